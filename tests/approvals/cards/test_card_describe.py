"""A call in words, the title of its card (issue 23, item 2): each demo tool's `describe`, an MCP
tool's title and key arguments, the tool's name for anything else, and never a crash on odd arguments."""
import pytest

from approvals.cards import titles
from approvals.templatetags.approval_tags import call_title, gate_note, shown_arguments
from chat.tools import ToolSpec, registry, tool
from tests.conftest import pending_approvals, start_conversation as start
from toolservers.titles import describe_call as describe_mcp_call


@pytest.mark.parametrize(
    ("name", "arguments", "title"),
    [
        ("delete_file", {"path": "notes.txt"}, "Delete notes.txt"),
        ("write_file", {"path": "notes.txt", "content": "hello"}, "Write notes.txt (5 bytes)"),
        ("write_file", {"path": "a.txt", "content": "x"}, "Write a.txt (1 byte)"),
        ("read_file", {"path": "notes.txt"}, "Read notes.txt"),
        ("list_directory", {}, "List the sandbox's files"),
        ("list_directory", {"path": "notes"}, "List the files in notes"),
        ("delete_all_files", {}, "Delete every file in the sandbox"),
        ("send_email", {"to": "bob@example.com", "subject": "lunch", "body": "at noon?"}, "Send an email to bob@example.com about lunch"),
        ("calculator", {"expression": "(2 + 3) * 4"}, "Calculate (2 + 3) * 4"),
        ("web_fetch", {"url": "https://example.com/a"}, "Fetch https://example.com/a"),
        ("ask_human", {"question": "Tea or coffee?"}, "Asks you: Tea or coffee?"),
        ("request_human_input", {"question": "Which day?"}, "Asks you: Which day?"),
        ("propose_plan", {"title": "Tidy up", "steps": [{"action": "a"}, {"action": "b"}]}, "Plan: Tidy up (2 steps)"),
    ],
)
def test_each_demo_tool_says_its_call_in_words(name, arguments, title):
    assert titles.title(name, arguments) == title


@pytest.mark.parametrize("arguments", [None, [], "delete it", 42, {}, {"paths": ["a.txt"]}, {"path": ""}])
def test_odd_arguments_fall_back_to_the_tools_name_and_never_crash(arguments):
    assert titles.title("delete_file", arguments) in ("delete_file", "Delete")
    assert titles.title("send_email", arguments) == "send_email"


def test_a_tool_without_describe_or_unknown_is_its_name():
    assert titles.title("no_such_tool", {"path": "a.txt"}) == "no_such_tool"

    @tool(name="card_test_plain")
    def plain(path: str) -> str:
        """A tool with no describe."""
        return path

    try:
        assert titles.title("card_test_plain", {"path": "a.txt"}) == "card_test_plain"
    finally:
        registry.tools.pop("card_test_plain")


def test_a_describe_that_raises_or_returns_nothing_is_the_name():
    def broken(arguments: dict) -> str:
        raise RuntimeError("oops")

    spec = ToolSpec(name="x", description="", function=print, arguments_model=None, describe=broken)
    assert spec.title_of({"a": 1}) == "x"
    assert ToolSpec(name="y", description="", function=print, arguments_model=None, describe=lambda a: "  ").title_of({}) == "y"


def test_a_title_is_one_short_line_with_invisible_characters_shown():
    long = titles.title("delete_file", {"path": "a/" * 200 + "z.txt"})
    assert len(long) == titles.MAX_TITLE_CHARS and long.endswith("…")
    assert titles.title("delete_file", {"path": "a\nb.txt"}) == "Delete a b.txt"


@pytest.mark.parametrize(
    ("name", "arguments", "annotations", "title"),
    [
        ("git__git_commit", {"repo_path": "/srv/" + "r" * 80, "message": "Second commit"}, None, "Git commit: Second commit"),
        ("notes__write_note", {"name": "a.txt", "text": "buy milk"}, {"readOnlyHint": False}, "Write note: a.txt, buy milk"),
        ("notes__delete_note", {"name": "a.txt"}, {"title": "Remove a note"}, "Remove a note (notes__delete_note): a.txt"),
        ("notes__list_notes", {}, None, "List notes"),
        ("notes__picture", {"options": {"a": 1}, "flag": True}, None, "Picture"),
        ("notes__huge", "not a dict", ["not", "a", "dict"], "Huge"),
    ],
)
def test_an_mcp_tool_is_its_title_and_key_arguments(name, arguments, annotations, title):
    assert describe_mcp_call(name, arguments, annotations) == title
    assert titles.title(name, arguments, annotations) == title


def test_the_mcp_fallback_leaves_built_in_tools_to_their_own_describe():
    assert describe_mcp_call("delete_file", {"path": "a.txt"}) == ""


@pytest.mark.django_db(transaction=True)
def test_call_title_reads_an_approval_or_a_tool_call_and_an_edit_is_what_runs(alice, agent):
    from approvals.services import approve_edited

    conversation = start(alice, agent, "write hello to notes.txt")
    [approval] = pending_approvals(conversation)
    assert call_title(approval) == call_title(approval.tool_call) == "Write notes.txt (5 bytes)"

    approve_edited(approval.pk, user=alice, arguments={"path": "other.txt", "content": "hello, world"}, via="chat", shown_hash=approval.shown_hash)
    approval.refresh_from_db()
    assert call_title(approval) == "Write other.txt (12 bytes)"  # what ran, not what was asked
    assert shown_arguments(approval) == {"path": "other.txt", "content": "hello, world"}


@pytest.mark.parametrize(
    ("reason", "note"),
    [
        ("Demo agent needs approval for write_file.", ""),
        ("delete_file always needs approval (high risk).", ""),
        ("Demo agent needs approval for git_commit on git.", ""),
        ("Ops agent needs approval for every tool call.", ""),
        ("example.com is not on the agent's allowlist.", "example.com is not on the agent's allowlist."),
        (
            "Demo agent needs approval for write_file. Its arguments contain invisible or direction-changing characters.",
            "Its arguments contain invisible or direction-changing characters.",
        ),
    ],
)
def test_the_gate_reason_is_shown_only_for_what_the_title_does_not_say(reason, note):
    assert gate_note(reason) == note
