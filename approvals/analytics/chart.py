"""The analytics page's chart as plain geometry: bars for the decisions of each day, a line for
what was pending at its end, in an SVG viewBox the template draws (no script, no chart library)."""
from dataclasses import dataclass

from .selectors import Day

WIDTH, HEIGHT = 600, 260
LEFT, RIGHT, TOP, BOTTOM = 56, 36, 14, 34  # room for the axes' numbers and dates (today's, centred, at the right)
MAX_DATE_LABELS = 6
MAX_DOTTED_DAYS = 31  # past a month the line's points would blur into one thick line
WIDE_APART = 150  # viewBox units between dates a phone's larger type still fits; closer: every other one is minor


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    width: float
    height: float


@dataclass(frozen=True)
class Tick:
    at: float  # x or y in the viewBox
    text: str
    is_minor: bool = False  # a date left out on a phone (analytics.css), so the others never overlap


@dataclass(frozen=True)
class Point:
    x: float
    y: float


@dataclass(frozen=True)
class Chart:
    width: int
    height: int
    left: int
    right: int  # x of the plot's right edge
    bottom: int  # y of the plot's base line
    bars: list[Bar]
    pending_points: str  # the polyline's "x,y x,y ..."
    dots: list[Point]  # the line's points, marked, so a lone day still shows
    y_ticks: list[Tick]
    x_ticks: list[Tick]


def nice_top(value: int) -> int:
    """The smallest of 2, 4, 10, 20, 40, 100, ... at or above `value`: even, so the middle tick is whole."""
    top = 2
    while top < value:
        top = top * 5 // 2 if str(top).startswith("4") else top * 2
    return top


def chart_of(days: list[Day]) -> Chart:
    plot_width, plot_height = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    base = TOP + plot_height
    top = nice_top(max([day.pending for day in days] + [day.decided for day in days] + [1]))
    slot = plot_width / max(len(days), 1)

    def y_of(value: int) -> float:
        return round(base - value / top * plot_height, 1)

    bars, points, dots = [], [], []
    for i, day in enumerate(days):
        x = LEFT + slot * i
        bars.append(Bar(round(x + slot * 0.15, 1), y_of(day.decided), round(slot * 0.7, 1), round(base - y_of(day.decided), 1)))
        centre = round(x + slot / 2, 1)
        points.append(f"{centre},{y_of(day.pending)}")
        if len(days) <= MAX_DOTTED_DAYS:
            dots.append(Point(centre, y_of(day.pending)))
    every = -(-len(days) // MAX_DATE_LABELS)  # ceil: today is labelled, then every `every` days back
    crowded = every * slot < WIDE_APART
    x_ticks = [
        Tick(round(LEFT + slot * (i + 0.5), 1), days[i].date.strftime("%b %-d"), is_minor=crowded and n % 2 == 1)
        for n, i in enumerate(range(len(days) - 1, -1, -every))
    ]
    y_ticks = [Tick(y_of(value), str(value)) for value in (0, top // 2, top)]
    return Chart(WIDTH, HEIGHT, LEFT, WIDTH - RIGHT, base, bars, " ".join(points), dots, y_ticks, x_ticks)
