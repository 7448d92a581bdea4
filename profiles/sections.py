"""The profile page's sections: each surface app registers one in its AppConfig.ready(), so the
page knows no surface and a new one adds itself."""
from collections.abc import Callable
from dataclasses import dataclass

from django.http import HttpRequest


@dataclass(frozen=True)
class Section:
    key: str  # unique, also the section's HTML id
    title: str
    template: str  # rendered with the page's context plus what `context` returns
    order: int = 100
    context: Callable[[HttpRequest], dict] = lambda request: {}


_sections: dict[str, Section] = {}


def register(section: Section) -> None:
    _sections[section.key] = section  # idempotent: ready() may run twice in tests


def all_sections() -> list[Section]:
    return sorted(_sections.values(), key=lambda section: (section.order, section.key))
