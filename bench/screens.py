"""Screenshots of the pages as people meet them, made from a real stack (`make screens`, bin/screens).

Starts what `make run` starts, on loopback and in a temporary directory (its own redis-server, a
Celery worker as the Procfile starts it, beat and daphne; a throwaway SQLite database set up by
`migrate` and `setup_demo`, and the offline scripted model), then drives Chromium as the demo's two
users: `demo` owns the conversations, `approver` decides in the inbox. Each scene waits for what it
shows (a card's `data-status`, a row's `data-approval-id`), never for a time, and writes
`docs/screens/<scene>-<width>.png`. A scene that fails says what the page showed and the tour goes
on; the exit status is 1 if any failed. Every process started here is stopped at the end, Ctrl-C
included.

The scenes are keyed on the pages' stable hooks (`tool-call-<id>`, `data-status`, `data-tool`,
`data-approval-id`, the buttons' names), so a redesign of the cards or the inbox changes the
pictures, not the script.
"""
import argparse
import io
import os
import re
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from playwright.sync_api import expect, sync_playwright

from bench.stack import ROOT, Stack, log

OUT = ROOT / "docs" / "screens"
README_IMAGE = ROOT / "docs" / "screenshot.png"
README_SCENE = "chat-pending-1280"  # the README's main image is a copy of this one
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--no-first-run"]
WIDE, PHONE = 1280, 390
HEIGHTS = {WIDE: 800, PHONE: 844}
MAX_HEIGHT = 2500  # a full-page shot is clipped to this many pixels
TIMEOUT_MS = 20_000
OWNER, APPROVER = ("demo", "demo"), ("approver", "approver")  # setup_demo's users, without HITL_DEMO_PASSWORD

# Counts the page's socket opens on <html data-ws-opens> (as tests/e2e/browser.py does), so a scene
# acts only once pushes reach the page.
WATCH_SOCKET = """
document.addEventListener("htmx:wsOpen", () => {
  const data = document.documentElement.dataset;
  data.wsOpens = String(Number(data.wsOpens || 0) + 1);
});
"""


@dataclass(frozen=True)
class Scene:
    name: str
    widths: tuple[int, ...]
    what: str
    needs: tuple[str, ...] = ()  # the scenes that leave what this one shows


# Every picture the tour takes, in order. Later scenes build on earlier ones (the chat-decided card
# is the chat-pending card once approved; the inbox lists what the chat scenes left pending).
SCENES = [
    Scene("chat-pending", (WIDE, PHONE), "a write waiting for the owner's decision, its preview first"),
    Scene("chat-decided", (WIDE,), "the same card once approved: what happened and by whom", ("chat-pending",)),
    Scene("chat-edited", (WIDE,), "an email approved as edited (its subject changed before it ran)"),
    Scene("chat-critical", (WIDE,), "a critical call (delete all files) with its confirmation typed", ("chat-decided",)),
    Scene("chat-question", (WIDE,), "the agent asks a choice question; one option chosen"),
    Scene("chat-plan", (WIDE,), "the agent proposes a plan with an optional step"),
    Scene("inbox", (WIDE, PHONE), "the approver's inbox with several pending calls of several kinds",
          ("chat-critical", "chat-question", "chat-plan")),
    Scene("inbox-open", (WIDE,), "one inbox row opened into its card (the critical call)", ("inbox",)),
    Scene("inbox-grouped", (WIDE,), "alike calls grouped into one row, opened (only when the inbox groups)", ("inbox",)),
    Scene("inbox-keys", (WIDE,), "the inbox's keyboard shortcuts, with what each kind needs after a", ("inbox",)),
    Scene("history", (WIDE, PHONE), "decided calls: approved, edited, rejected with a reason, by owner and approver",
          ("chat-edited", "inbox")),
    Scene("chat-diff", (WIDE, PHONE), "a write over an existing file: its lines removed and added, numbered"),
    Scene("chat-diff-edit", (WIDE, PHONE), "that write being edited: the file's live diff and the title's new size", ("chat-diff",)),
    Scene("chat-diff-edited", (WIDE, PHONE), "that write approved as edited: the edit as the file's lines", ("chat-diff-edit",)),
    Scene("chat-routed", (WIDE, PHONE), "an email routed to two of finance: the status bar says who must approve it"),
]
REQUIRED = {"chat-pending", "chat-decided", "chat-edited", "chat-critical", "chat-question", "chat-plan", "inbox", "history"}
PHONE_VIEWS = {"chat-pending", "inbox", "history", "chat-diff", "chat-diff-edit", "chat-diff-edited", "chat-routed"}

# Where a grouped inbox row may say it holds several calls (whichever the inbox uses).
GROUP_HOOKS = "[data-group], [data-approval-ids], [data-group-ids], .inbox-group, .group-row"


class Skipped(Exception):
    """A scene that does not apply to the pages as they are now (say, no grouping in the inbox)."""


# --- PNGs ---------------------------------------------------------------------------------------------


def shrink_png(data: bytes) -> bytes:
    """The same picture in fewer bytes: Pillow's optimizer when installed, else the image data
    deflated again at the highest level (Chromium writes it fast, not small). Never bigger."""
    try:
        from PIL import Image
    except ImportError:
        smaller = _redeflate(data)
    else:
        buffer = io.BytesIO()
        Image.open(io.BytesIO(data)).save(buffer, format="PNG", optimize=True)
        smaller = buffer.getvalue()
    return smaller if len(smaller) < len(data) else data


def _chunks(data: bytes):
    position = 8
    while position < len(data):
        (length,) = struct.unpack(">I", data[position : position + 4])
        kind = data[position + 4 : position + 8]
        yield kind, data[position + 8 : position + 8 + length]
        position += 12 + length


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)


def _redeflate(data: bytes) -> bytes:
    """The PNG with its IDAT chunks joined into one, compressed at level 9; other chunks kept."""
    if not data.startswith(b"\x89PNG\r\n\x1a\n"):
        return data
    chunks = list(_chunks(data))
    pixels = zlib.decompress(b"".join(body for kind, body in chunks if kind == b"IDAT"))
    out, written = [data[:8]], False
    for kind, body in chunks:
        if kind == b"IDAT":
            if not written:
                out.append(_chunk(b"IDAT", zlib.compress(pixels, 9)))
                written = True
        else:
            out.append(_chunk(kind, body))
    return b"".join(out)


# --- The stack ----------------------------------------------------------------------------------------


def start_stack(work: Path) -> Stack:
    """As `make run`: migrate, setup_demo, then redis, the Procfile's worker, beat and daphne."""
    os.environ.pop("HITL_DEMO_PASSWORD", None)  # the users' passwords are their names
    os.environ.setdefault("HITL_WORKERS", "1")  # one worker process is plenty for one person's clicks
    stack = Stack(work=work, database_url=f"sqlite:///{work / 'db.sqlite3'}", debug=True)
    env = os.environ | stack.env()
    for command in (["migrate", "--no-input", "-v", "0"], ["setup_demo"]):
        subprocess.run([sys.executable, "manage.py", *command], cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL)
    log("starting redis-server, a worker, beat and daphne")
    stack.start_redis()
    stack.start_worker()
    stack.start_beat()
    stack.start_daphne()
    return stack


# --- The tour -----------------------------------------------------------------------------------------


@dataclass
class Tour:
    """The browser side: one page per user, and what the scenes leave for the later ones."""

    browser: object
    base_url: str
    out: Path
    pages: dict = field(default_factory=dict)
    conversations: dict = field(default_factory=dict)  # name -> conversation URL
    pending: dict = field(default_factory=dict)  # what is left pending -> approval id

    def page_of(self, username: str, password: str):
        if username not in self.pages:
            context = self.browser.new_context(base_url=self.base_url, viewport={"width": WIDE, "height": HEIGHTS[WIDE]})
            context.set_default_timeout(TIMEOUT_MS)
            context.add_init_script(WATCH_SOCKET)
            page = context.new_page()
            page.goto("/accounts/login/")
            page.get_by_label("Username").fill(username)
            page.get_by_label("Password").fill(password)
            page.get_by_role("button", name="Log in").click()
            expect(page.get_by_role("navigation", name="Main")).to_contain_text(username)
            self.pages[username] = page
        return self.pages[username]

    def left(self, name: str):
        """What an earlier scene left for this one (a pending call's approval id, cards' ids)."""
        if name not in self.pending:
            raise RuntimeError(f"an earlier scene should have left {name!r}: it failed")
        return self.pending[name]

    @property
    def owner(self):
        return self.page_of(*OWNER)

    @property
    def approver(self):
        return self.page_of(*APPROVER)

    # -- the chat --

    def start(self, name: str, message: str, agent: str = "Demo agent"):
        """A new conversation as the owner, through the form on the home page; its page, live."""
        page = self.owner
        page.goto("/")
        page.get_by_label("Agent", exact=True).select_option(label=agent)
        page.get_by_label("Message", exact=True).fill(message)
        page.get_by_role("button", name="Start", exact=True).click()
        page.wait_for_url(re.compile(r"/conversations/[0-9a-f-]{36}/$"))
        self.conversations[name] = page.url
        wait_for_live(page)
        return page

    def say(self, page, message: str) -> None:
        page.locator("#message-box").fill(message)
        page.locator("#composer").get_by_role("button", name="Send", exact=True).click()

    def shoot(self, page, scene: str, width: int) -> None:
        """`docs/screens/<scene>-<width>.png`: the whole page at that width, clipped to MAX_HEIGHT.
        Taken in a window as tall as the page rather than as Playwright's full-page shot, which
        paints a sticky bar where the first screen ends, over the rows below it."""
        page.set_viewport_size({"width": width, "height": HEIGHTS[width]})
        settle(page)
        height = min(MAX_HEIGHT, max(HEIGHTS[width], page.evaluate("Math.ceil(document.documentElement.scrollHeight)")))
        page.set_viewport_size({"width": width, "height": height})
        settle(page)
        data = page.screenshot(animations="disabled")
        page.set_viewport_size({"width": width, "height": HEIGHTS[width]})
        path = self.out / f"{scene}-{width}.png"
        path.write_bytes(shrink_png(data))
        log(f"  wrote {shown(path)} ({width}×{height}, {path.stat().st_size // 1024} KB)")

    def shoot_all(self, page, scene: Scene) -> None:
        for width in scene.widths:
            self.shoot(page, scene.name, width)
        if page.viewport_size["width"] != WIDE:
            page.set_viewport_size({"width": WIDE, "height": HEIGHTS[WIDE]})


def shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def wait_for_live(page) -> None:
    """The page's socket is open and the re-read its opening triggers has landed."""
    expect(page.locator("html")).to_have_attribute("data-ws-opens", re.compile(r"[1-9]\d*"))
    expect(page.locator("#conversation-live[aria-busy]")).to_have_count(0)


def settle(page) -> None:
    """Two animation frames, so a resize or a swap is laid out and painted before the shot."""
    page.evaluate("() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))")


def cards(page, tool: str, status: str = ""):
    selector = f'article[id^="tool-call-"][data-tool="{tool}"]'
    return page.locator(selector + (f'[data-status="{status}"]' if status else ""))


def pending_card(page, tool: str):
    """The (last) card of `tool` waiting for a human, once it is there and the run waits for it; by
    its id, so the locator still finds it once decided."""
    waiting = cards(page, tool, "pending_approval").last
    expect(waiting).to_be_visible()
    expect(page.locator("#conversation-status")).to_have_attribute("data-status", "waiting_for_approval")
    return page.locator("#" + waiting.get_attribute("id"))


def finished(page, card, status: str = "succeeded") -> None:
    expect(card).to_have_attribute("data-status", status)
    expect(page.locator("#conversation-status")).to_have_attribute("data-status", "idle")


def button(scope, name: str):
    return scope.get_by_role("button", name=name, exact=True)


def approve(card) -> None:
    button(card, "Approve").click()


def reject(card, reason: str) -> None:
    """Reject… with a reason, whatever shape the refusal takes: a toggle that opens a reason field
    and a confirming button, or a field beside a plain Reject."""
    card.get_by_role("button", name=re.compile(r"^Reject(…|\.\.\.)?$")).first.click()
    reason_box = card.get_by_label(re.compile(r"^Reason", re.I)).first
    expect(reason_box).to_be_visible()
    reason_box.fill(reason)
    card.get_by_role("button", name=re.compile(r"^Confirm reject|^Reject$")).last.click()


def approval_id(card) -> str:
    value = card.get_attribute("data-approval-id")
    if not value:  # before the redesign the id was on the controls inside the card
        inner = card.locator('[id^="approval-"]').first.get_attribute("id") or ""
        value = inner.removeprefix("approval-")
    return value


# -- The scenes ----------------------------------------------------------------------------------------


def chat_pending(tour: Tour, scene: Scene) -> None:
    page = tour.start("write", "write Buy milk\nCall Sam about Friday\nBook the dentist to todo.txt")
    pending_card(page, "write_file")
    tour.shoot_all(page, scene)


def chat_decided(tour: Tour, scene: Scene) -> None:
    page = tour.owner
    page.goto(tour.conversations["write"])
    wait_for_live(page)
    card = pending_card(page, "write_file")
    approve(card)
    finished(page, card)
    tour.shoot_all(page, scene)


def chat_edited(tour: Tour, scene: Scene) -> None:
    page = tour.start("email", "email bob@example.com about lunch")
    card = pending_card(page, "send_email")
    card.get_by_role("link", name="Edit", exact=True).or_(button(card, "Edit")).first.click()
    subject = card.locator('[name="arg-subject"]')
    subject.fill("lunch on Friday at 12:30")
    button(card, "Approve edited").click()
    finished(page, card)
    tour.shoot_all(page, scene)


def chat_critical(tour: Tour, scene: Scene) -> None:
    page = tour.owner
    page.goto(tour.conversations["write"])  # a sandbox with a file in it: the preview lists it
    wait_for_live(page)
    tour.say(page, "delete all files")
    card = pending_card(page, "delete_all_files")
    card.locator('input[name="confirmation"]').first.press_sequentially("DELETE")
    expect(button(card, "Approve").first).to_be_enabled()
    tour.pending["critical"] = approval_id(card)  # left pending, for the inbox
    tour.shoot_all(page, scene)


def chat_question(tour: Tour, scene: Scene) -> None:
    page = tour.start("question", "ask me to choose between tea, coffee and water")
    card = pending_card(page, "ask_human")
    card.get_by_label("coffee", exact=True).check()
    tour.pending["question"] = approval_id(card)
    tour.shoot_all(page, scene)


def chat_plan(tour: Tour, scene: Scene) -> None:
    page = tour.start("plan", "plan a tidy-up of the notes")
    card = pending_card(page, "propose_plan")
    tour.pending["plan"] = approval_id(card)
    tour.shoot_all(page, scene)


def _inbox_calls(tour: Tour) -> None:
    """More for the approver than the chat scenes left: two four-eyes deletes with the ops agent
    (of files the owner wrote first), and two alike emails waiting with the demo agent (the same
    address and subject, from two conversations: the inbox groups them)."""
    page = tour.start("ops", "write hello to notes.txt", agent="Ops agent (four eyes)")
    for n, message in enumerate(("", "write first draft to draft.txt")):
        if message:
            tour.say(page, message)
        expect(cards(page, "write_file")).to_have_count(n + 1)
        card = pending_card(page, "write_file")
        approve(card)  # a medium-risk write: the owner may approve it alone
        finished(page, card)
    tour.say(page, "delete notes.txt and draft.txt")
    expect(cards(page, "delete_file", "pending_approval")).to_have_count(2)
    deletes = cards(page, "delete_file", "pending_approval")
    tour.pending["delete-1"], tour.pending["delete-2"] = approval_id(deletes.nth(0)), approval_id(deletes.nth(1))
    tour.pending["delete-cards"] = [deletes.nth(0).get_attribute("id"), deletes.nth(1).get_attribute("id")]
    for n, subject in enumerate(("the offsite", "the offsite")):
        page = tour.start(f"email-{n}", f"email bob@example.com about {subject}")
        tour.pending[f"email-{n}"] = approval_id(pending_card(page, "send_email"))


def inbox(tour: Tour, scene: Scene) -> None:
    _inbox_calls(tour)
    page = tour.approver
    page.goto("/approvals/")
    for name in ("critical", "delete-1", "delete-2", "email-0", "email-1"):
        expect(page.locator(f'[data-approval-id="{tour.left(name)}"]').first).to_be_attached()
    tour.shoot_all(page, scene)


def inbox_open(tour: Tour, scene: Scene) -> None:
    page = tour.approver
    page.goto("/approvals/")
    row = page.locator(f'[data-approval-id="{tour.left("critical")}"]').first
    if not row.get_by_role("button", name="Approve", exact=True).is_visible():  # a row that opens into the card
        row.locator("summary").first.click()
    expect(row.get_by_role("button", name="Approve", exact=True)).to_be_visible()
    tour.shoot_all(page, scene)


def inbox_grouped(tour: Tour, scene: Scene) -> None:
    page = tour.approver
    page.goto("/approvals/")
    expect(page.locator(f'[data-approval-id="{tour.left("delete-1")}"]').first).to_be_attached()
    groups = page.locator(GROUP_HOOKS)
    if not groups.count():
        raise Skipped("the inbox does not group alike calls yet (none of " + GROUP_HOOKS + ")")
    groups.first.locator("summary").first.click()
    expect(groups.first.locator("[data-approval-id]").first).to_be_visible()
    tour.shoot_all(page, scene)


def inbox_keys(tour: Tour, scene: Scene) -> None:
    page = tour.approver
    page.goto("/approvals/")
    expect(page.locator("#dashboard-rows [data-line]").first).to_be_visible()
    page.locator("body").press("?")
    expect(page.get_by_role("dialog", name="Keyboard shortcuts")).to_be_visible()
    tour.shoot_all(page, scene)
    page.keyboard.press("Escape")


def chat_routed(tour: Tour, scene: Scene) -> None:
    page = tour.start("routed", "email bob@example.com about the budget", agent="Ops agent (four eyes)")
    pending_card(page, "send_email")
    expect(page.locator("#conversation-status")).to_contain_text("Waiting for 2 approvals from finance.")
    tour.shoot_all(page, scene)


def history(tour: Tour, scene: Scene) -> None:
    """The approver decides the four-eyes deletes (one approved, one rejected with a reason) on the
    owner's conversation, then reads the history."""
    page = tour.approver
    page.goto(tour.conversations["ops"])
    wait_for_live(page)
    first, second = (page.locator(f"#{card_id}") for card_id in tour.left("delete-cards"))
    approve(first)
    expect(first).to_have_attribute("data-status", re.compile("approved|running|succeeded"))  # runs once both are decided
    reject(second, "keep the draft until Friday")
    expect(second).to_have_attribute("data-status", "rejected")
    finished(page, first)
    page.goto("/approvals/history/")
    expect(page.locator("main")).to_contain_text("keep the draft until Friday")
    expect(page.locator("main")).to_contain_text("lunch on Friday at 12:30")
    tour.shoot_all(page, scene)


def chat_diff(tour: Tour, scene: Scene) -> None:
    page = tour.start("shopping", "list files")  # the writes through the composer, which sends its lines as typed
    tour.say(page, "write Milk\nEggs\nBread\nCoffee\n to shopping.txt")
    card = pending_card(page, "write_file")
    approve(card)
    finished(page, card)
    tour.say(page, "write Milk\nEggs (a dozen)\nBread\nCoffee\nTea\n to shopping.txt")
    tour.pending["diff"] = pending_card(page, "write_file").get_attribute("id")
    tour.shoot_all(page, scene)


def chat_diff_edit(tour: Tour, scene: Scene) -> None:
    page = tour.owner
    card = page.locator("#" + tour.left("diff"))
    card.get_by_role("link", name="Edit", exact=True).click()
    card.locator('[name="arg-content"]').fill("Milk\nEggs (a dozen)\nBread\nGround coffee\nTea\n")
    expect(card.locator(".card-title")).to_have_text("Write shopping.txt (44 bytes)")
    tour.shoot_all(page, scene)


def chat_diff_edited(tour: Tour, scene: Scene) -> None:
    page = tour.owner
    card = page.locator("#" + tour.left("diff"))
    button(card, "Approve edited").click()
    finished(page, card)
    tour.shoot_all(page, scene)


RUNS: dict[str, Callable[[Tour, Scene], None]] = {
    "chat-pending": chat_pending,
    "chat-decided": chat_decided,
    "chat-edited": chat_edited,
    "chat-critical": chat_critical,
    "chat-question": chat_question,
    "chat-plan": chat_plan,
    "inbox": inbox,
    "inbox-open": inbox_open,
    "inbox-grouped": inbox_grouped,
    "inbox-keys": inbox_keys,
    "history": history,
    "chat-diff": chat_diff,
    "chat-diff-edit": chat_diff_edit,
    "chat-diff-edited": chat_diff_edited,
    "chat-routed": chat_routed,
}


def what_the_page_showed(tour: Tour) -> str:
    lines = []
    for username, page in tour.pages.items():
        try:
            text = page.locator("main").inner_text(timeout=2_000)
        except Exception as exc:  # the page may be what broke
            text = f"(could not read it: {exc})"
        text = re.sub(r"\n\s*\n+", "\n", text).strip()
        lines.append(f"  {username}'s page {page.url}:\n    " + "\n    ".join(text.splitlines()[:40]))
    return "\n".join(lines)


def with_needs(names: set[str]) -> set[str]:
    """The scenes `names` and every scene they need, transitively."""
    by_name = {scene.name: scene for scene in SCENES}
    wanted, todo = set(), list(names)
    while todo:
        name = todo.pop()
        if name not in wanted:
            wanted.add(name)
            todo.extend(by_name[name].needs)
    return wanted


def run_tour(base_url: str, out: Path, only: set[str] | None = None) -> tuple[int, list[str]]:
    """Every scene in order (or those of `only`); returns how many ran and the names of those that failed."""
    ran, failed = 0, []
    with sync_playwright() as playwright:
        expect.set_options(timeout=TIMEOUT_MS)
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        tour = Tour(browser, base_url, out)
        try:
            for scene in SCENES:
                if only and scene.name not in only:
                    continue
                ran += 1
                started = time.monotonic()
                log(f"{scene.name}: {scene.what}")
                if broken := [need for need in scene.needs if need in failed]:
                    failed.append(scene.name)
                    log(f"  FAILED: not taken, it builds on {', '.join(broken)}, which failed")
                    continue
                try:
                    RUNS[scene.name](tour, scene)
                except Skipped as skipped:
                    ran -= 1
                    log(f"  skipped: {skipped}")
                except Exception as exc:
                    failed.append(scene.name)
                    log(f"  FAILED: {type(exc).__name__}: {str(exc).strip()[:1500]}\n{what_the_page_showed(tour)}")
                else:
                    log(f"  done in {time.monotonic() - started:.1f} s")
        finally:
            browser.close()
    return ran, failed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("scenes", nargs="*", help="only these scenes and those they need, by name (default: all): " + ", ".join(s.name for s in SCENES))
    parser.add_argument("--out", type=Path, default=OUT, help=f"where the PNGs go (default: {OUT.relative_to(ROOT)})")
    options = parser.parse_args(argv)
    if unknown := set(options.scenes) - set(RUNS):
        parser.error(f"no such scene: {', '.join(sorted(unknown))}")
    if not Path(CHROMIUM).exists():
        parser.error(f"{CHROMIUM} is not installed: run bin/ensure-system-packages --test")
    options.out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    ran, failed = 0, ["the stack"]
    with tempfile.TemporaryDirectory(prefix="hitl-screens-") as work:
        stack = None
        try:
            stack = start_stack(Path(work))
            log(f"the stack is up at {stack.base_url} ({time.monotonic() - started:.0f} s)")
            ran, failed = run_tour(stack.base_url, options.out, with_needs(set(options.scenes)) or None)
            stack.check()
        except BaseException:
            if stack:
                for process in stack.processes.values():
                    print(f"--- {process.name} ---\n{process.tail(15)}", file=sys.stderr)
            raise
        finally:
            if stack:
                log("stopping the stack")
                stack.stop()
    readme_source = options.out / f"{README_SCENE}.png"
    if options.out == OUT and readme_source.exists() and README_SCENE.rsplit("-", 1)[0] not in failed:
        README_IMAGE.write_bytes(readme_source.read_bytes())
        log(f"copied {shown(readme_source)} to {shown(README_IMAGE)}")
    log(f"{ran - len(failed)} of {ran} scenes fine in {time.monotonic() - started:.0f} s"
        + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
