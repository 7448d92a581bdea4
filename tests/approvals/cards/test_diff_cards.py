"""Readable diffs on the cards (issue 38, item 5): a write over a file shows its lines removed and
added, an edit shows the file's lines rather than its JSON, and the edit form's title follows the
edit through a route that decides nothing."""
import re

import pytest

from approvals.models import Approval
from approvals.services import approve_edited
from approvals.templatetags.approval_tags import call_title
from tests.conftest import client_for, pending_approvals, say, start_conversation as start

pytestmark = pytest.mark.django_db(transaction=True)


def card_of(page: str, approval: Approval) -> str:
    start_at = page.index(f'<article id="tool-call-{approval.tool_call_id}"')
    return page[start_at : page.index("</article>", start_at)]


def rows_of(html: str) -> list[tuple[str, str, str, str]]:
    """(kind, old number, new number, text) of each line row of a drawn diff."""
    found = re.findall(
        r'<tr class="diff-(same|del|add)"><td class="diff-ln">(\d*)</td><td class="diff-ln">(\d*)</td><td class="diff-sign">.*?</td><td class="diff-code">(.*?)</td></tr>',
        html,
    )
    return [tuple(row) for row in found]


def written_twice(alice, agent):
    """A conversation that wrote notes.txt and now asks to write it again, changed."""
    conversation = start(alice, agent, "write one\ntwo\nthree to notes.txt")
    [first] = pending_approvals(conversation)
    client_for(alice).post(f"/approvals/{first.pk}/decide/", {"decision": "approve", "shown_hash": first.shown_hash})
    say(conversation, alice, "write one\n2\nthree\nfour to notes.txt")
    [second] = pending_approvals(conversation)
    return conversation, second


def test_a_write_over_a_file_shows_its_lines_removed_then_added_with_their_numbers(alice, agent):
    conversation, approval = written_twice(alice, agent)

    card = card_of(client_for(alice).get(f"/conversations/{conversation.pk}/").content.decode(), approval)

    preview = re.search(r'<figure class="preview preview-diff".*?</figure>', card, re.S)[0]
    assert rows_of(preview) == [("same", "1", "1", "one"), ("del", "2", "", "two"), ("add", "", "2", "2"), ("same", "3", "3", "three"), ("add", "", "4", "four")]
    assert "@@" not in preview and "---" not in preview and "+++" not in preview and "No newline" not in preview
    assert '<td colspan="4">Adds a newline at the end of the file.</td>' not in preview  # both end without one
    assert approval.preview["text"].startswith("--- a/notes.txt\n+++ b/notes.txt\n@@ ")  # what channels send is still the diff


def test_an_edited_write_shows_the_files_lines_not_its_json(alice, agent):
    conversation, approval = written_twice(alice, agent)
    approve_edited(approval.pk, user=alice, arguments={"path": "notes.txt", "content": "one\ntwo\nthree\n4"}, via="chat", shown_hash=approval.shown_hash)

    card = card_of(client_for(alice).get(f"/conversations/{conversation.pk}/").content.decode(), approval)

    edit = re.search(r'<figure class="edit-diff preview-diff".*?</figure>', card, re.S)[0]
    assert rows_of(edit) == [("same", "1", "1", "one"), ("del", "2", "", "2"), ("add", "", "2", "two"), ("same", "3", "3", "three"), ("del", "4", "", "four"), ("add", "", "4", "4")]
    assert "&quot;content&quot;" not in edit and "Arguments edited by <strong>alice</strong>" in edit


def test_the_edit_forms_title_is_the_title_the_card_gets_once_edited(alice, agent):
    conversation = start(alice, agent, "write hello to notes.txt")
    [approval] = pending_approvals(conversation)
    edited = {"arg-path": "notes.txt", "arg-content": "hello, world\r\nand more", "shown_hash": approval.shown_hash}

    response = client_for(alice).post(f"/approvals/{approval.pk}/edit/title/", edited)

    assert response.status_code == 200
    assert response.json() == {"title": "Write notes.txt (21 bytes)"}  # as the submit reads it: CRLF as LF
    approval.refresh_from_db()
    assert (approval.status, approval.edited_arguments) == (Approval.Status.PENDING, None)  # nothing decided or stored
    approve_edited(approval.pk, user=alice, arguments={"path": "notes.txt", "content": "hello, world\nand more"}, via="chat", shown_hash=approval.shown_hash)
    approval.refresh_from_db()
    assert call_title(approval) == response.json()["title"]  # the server's one rule, before and after the submit


def test_the_edit_forms_title_shows_invisible_characters_as_the_card_does(alice, agent):
    conversation = start(alice, agent, "write hello to notes.txt")
    [approval] = pending_approvals(conversation)

    response = client_for(alice).post(f"/approvals/{approval.pk}/edit/title/", {"arg-path": "notes\u202etxt.exe", "arg-content": "x"})

    assert response.json() == {"title": "Write notes⟨U+202E⟩txt.exe (1 byte)"}


def test_the_edit_forms_title_is_for_who_may_see_the_call_and_needs_a_csrf_token(alice, bob, mallory, agent):
    conversation = start(alice, agent, "write hello to notes.txt")
    [approval] = pending_approvals(conversation)
    posted = {"arg-path": "notes.txt", "arg-content": "x"}

    assert client_for(mallory).post(f"/approvals/{approval.pk}/edit/title/", posted).status_code == 404
    assert client_for(alice, csrf=True).post(f"/approvals/{approval.pk}/edit/title/", posted).status_code == 403
    assert client_for(alice).get(f"/approvals/{approval.pk}/edit/title/").status_code == 405
    assert client_for(alice).post(f"/approvals/dashboard/{approval.pk}/edit/title/", posted).status_code == 403  # the dashboard's: approvers'
    assert client_for(bob).post(f"/approvals/dashboard/{approval.pk}/edit/title/", posted).json() == {"title": "Write notes.txt (1 byte)"}


def test_the_dashboards_edit_form_asks_its_own_route_for_the_title(bob, alice, agent):
    conversation = start(alice, agent, "write hello to notes.txt")
    [approval] = pending_approvals(conversation)

    html = client_for(bob).get(f"/approvals/dashboard/{approval.pk}/edit/", headers={"HX-Request": "true"}).content.decode()

    assert f'data-title-url="/approvals/dashboard/{approval.pk}/edit/title/"' in html and 'data-file-argument="content"' in html
