"""One-click email end to end: a stack of its own (redis-server, daphne, beat and a Celery worker)
whose worker mails through Django's SMTP backend to a real SMTP server in this process
(tests/standins/smtp_sink.py, aiosmtpd), and whose daphne and worker export their spans to a stand-in OTLP
collector (tests/standins/otlp_collector.py). A test plays the recipient: it reads the mail, opens the link
with a plain HTTP client (no login), and presses Approve or Reject as the page's form does."""
import json
import os
import re

import httpx
import pytest

from approvals.models import Approval
from emaillink.models import EmailDelivery
from tests.conftest import wait_until
from tests.e2e import conftest as stack_parts
from tests.e2e.channels.conftest import ChannelStack, after_the_test, approval_of, start_on, start_parts, wait_for_parts
from tests.e2e.conftest import Api, free_port, status_of
from tests.standins.otlp_collector import Collector
from tests.standins.smtp_sink import SmtpSink, link, links, parts

pytestmark = pytest.mark.e2e
SERVER = 2  # SpanKind.SERVER in OTLP


class EmailStack(ChannelStack):
    def __init__(self, base_url: str, sink: SmtpSink, collector: Collector, processes: dict):
        self.base_url, self.sink, self.collector, self.processes = base_url, sink, collector, processes


@pytest.fixture(scope="module")
def email_stack(django_db_setup, django_db_blocker, tmp_path_factory):
    work = tmp_path_factory.mktemp("email")
    redis_port, web_port = free_port(), free_port()
    sink = SmtpSink().start()
    collector = Collector().start()
    env = os.environ | {
        "OTEL_EXPORTER_OTLP_ENDPOINT": collector.endpoint,
        "OTEL_BSP_SCHEDULE_DELAY": "100",  # milliseconds: spans leave at once
        "OTEL_METRIC_EXPORT_INTERVAL": "60000",
        "DJANGO_SETTINGS_MODULE": "hitl.settings",
        "DATABASE_URL": stack_parts.test_database_url(),
        "REDIS_URL": f"redis://127.0.0.1:{redis_port}/0",
        "HITL_VAR_DIR": str(work / "var"),
        "HITL_SANDBOX_ROOT": str(work / "sandboxes"),
        "DEBUG": "1",
        "OPENAI_API_KEY": "test",
        "HITL_QUOTA_CONVERSATIONS_PER_HOUR": "0",
        "HITL_QUOTA_MESSAGES_PER_MINUTE": "0",
        "HITL_QUOTA_MODEL_CALLS_PER_HOUR": "0",
        "PYTHONUNBUFFERED": "1",
        "HITL_EMAIL_APPROVALS": "1",
        "EMAIL_HOST": sink.host,
        "EMAIL_PORT": str(sink.port),
        "EMAIL_USE_TLS": "0",
        "EMAIL_TIMEOUT": "3",
        "DEFAULT_FROM_EMAIL": "hitl@example.org",
        "HITL_DELIVERY_SWEEP_SECONDS": "1",
        "HITL_EMAIL_STALE_SECONDS": "2",
        "HITL_BASE_URL": f"http://127.0.0.1:{web_port}",
    }
    processes = {}
    try:
        start_parts(processes, "email", env, work, redis_port, web_port)
        stack = EmailStack(f"http://127.0.0.1:{web_port}", sink, collector, processes)
        wait_for_parts(processes, web_port, daphne_timeout=90)
        yield stack
    finally:
        for process in reversed(processes.values()):
            process.stop()
        sink.stop()
        collector.stop()


@pytest.fixture
def mail(email_stack, transactional_db):
    email_stack.sink.raw.clear()
    email_stack.sink.refused.clear()
    yield email_stack
    after_the_test(email_stack)


def addressed(*users) -> None:
    for user in users:
        user.email = f"{user.username}@example.org"
        user.save(update_fields=["email"])


def mails_to(stack, user, approval: Approval) -> list:
    return [m for m in stack.sink.messages(user.email) if m["X-Hitl-Approval"] == str(approval.pk)]


def mailed(stack, user, approval: Approval, count: int = 1):
    return wait_until(lambda: len(mails_to(stack, user, approval)) >= count and mails_to(stack, user, approval)[-1], timeout=20,
                      message=f"the mail to {user}\n{stack.logs()}")


class Page:
    """The link opened in a browser with no session: the page and its own form."""

    def __init__(self, url: str):
        self.url = url
        self.http = httpx.Client(timeout=10, follow_redirects=False)
        self.shown = self.http.get(url)

    def press(self, decision: str, **fields) -> httpx.Response:
        csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', self.shown.text)
        token = csrf[1] if csrf else self.http.cookies.get("csrftoken", "")
        return self.http.post(self.url, data={"csrfmiddlewaretoken": token, "decision": decision, **fields})


def text(response: httpx.Response) -> str:
    return re.sub(r"\s+", " ", response.text)


def test_approving_from_the_mail_resumes_the_run_and_a_second_press_decides_nothing(mail, alice, agent):
    addressed(alice)
    conversation_id = start_on(mail, alice, "write hello to a.txt")
    approval = approval_of(conversation_id)
    message = mailed(mail, alice, approval)
    assert "a.txt" in message["Subject"] and "alice" in message["Subject"] and set(parts(message)) == {"text/plain", "text/html"}
    assert link(message).startswith(f"{mail.base_url}/approve/")
    page = Page(link(message))
    Page(link(message))  # opening it again changes nothing
    assert page.shown.status_code == 200 and "a.txt" in page.shown.text
    assert Approval.objects.get(pk=approval.pk).status == "pending"

    response = page.press("approve")

    assert response.status_code == 200 and "Approved by alice via email" in text(response)
    wait_until(lambda: status_of(conversation_id) == "idle", timeout=20, message="the run to go on")
    approval.refresh_from_db()
    assert (approval.status, approval.decided_via, approval.decided_by) == ("approved", "email", alice)
    again = page.press("reject", reason="too late")
    assert again.status_code == 409 and "Already decided" in text(again)
    assert Approval.objects.get(pk=approval.pk).status == "approved"


def test_rejecting_with_a_reason_from_the_mails_reject_link_and_no_token_in_spans_or_server_output(mail, alice, agent):
    addressed(alice)
    conversation_id = start_on(mail, alice, "write hello to a.txt")
    approval = approval_of(conversation_id)
    urls = links(mailed(mail, alice, approval))
    page = Page(urls["reject"])
    assert page.shown.status_code == 200 and 'name="reason"' in page.shown.text and 'value="approve"' not in page.shown.text
    forged = page.press("approve")  # a forged approve with the Reject link's token
    assert forged.status_code == 409 and Approval.objects.get(pk=approval.pk).status == "pending"
    Page(urls["approve"])  # the Approve link opened too: its request is traced and logged as well

    response = page.press("reject", reason="wrong file")

    assert response.status_code == 200
    wait_until(lambda: status_of(conversation_id) == "idle", timeout=20, message="the run to go on")
    approval.refresh_from_db()
    assert (approval.status, approval.rejection_reason, approval.decided_via) == ("rejected", "wrong file", "email")

    # Every request to the links was traced and logged, each with its token masked.
    values = [url.split("/approve/")[1].split("/")[0] for url in urls.values()]
    posts = lambda: [s for s in mail.collector.spans_named("POST /approve/<token>/") if s.kind == SERVER]  # noqa: E731
    wait_until(lambda: len(posts()) >= 2, timeout=15, message="the POSTs' server spans at the collector")
    exported = json.dumps([[span.name, span.attributes] for span in mail.collector.spans], default=str)
    assert "/approve/<token>/?decision=reject" in exported
    access = mail.processes["web"].log.read_text()
    assert '"POST /approve/<token>/?decision=reject" 409' in access and "Conflict: /approve/<token>/" in access
    for value in values:
        assert value not in exported and value.split(":")[-1] not in exported
        for name, process in mail.processes.items():
            assert value not in process.log.read_text(), f"a token in {name}'s output"


def test_a_warning_is_mailed_before_expiry_once_with_the_site_link(mail, alice, agent):
    addressed(alice)
    agent.approval_timeout_seconds = 60  # warned at once: at least a minute before the deadline
    agent.save(update_fields=["approval_timeout_seconds"])
    approval = approval_of(start_on(mail, alice, "write hello to a.txt"))
    mailed(mail, alice, approval)

    warning = mailed(mail, alice, approval, count=2)

    approval.refresh_from_db()
    assert warning["Subject"].strip() == f"Expires at {approval.expires_at:%H:%M} UTC: Write a.txt (5 bytes)"
    assert f"/conversations/{approval.conversation_id}/" in parts(warning)["text/plain"] and "Extend" in parts(warning)["text/plain"]
    wait_until(lambda: EmailDelivery.objects.filter(approval=approval, kind="warning", status="sent").exists(), message="the warning sent")
    assert len(mails_to(mail, alice, approval)) == 2 and Approval.objects.get(pk=approval.pk).status == "pending"


def test_a_late_click_after_the_api_decided_says_who_decided_and_changes_nothing(mail, alice, agent):
    addressed(alice)
    approval = approval_of(start_on(mail, alice, "write hello to a.txt"))
    url = link(mailed(mail, alice, approval))
    decided = Api(mail.base_url, alice).post(f"approvals/{approval.pk}/decision", {"decision": "reject", "reason": "no", "shown_hash": approval.shown_hash})
    assert decided.status_code == 200, decided.text

    page = Page(url)
    response = page.press("approve")

    assert "Rejected by alice via api" in text(page.shown) and 'value="approve"' not in page.shown.text
    assert response.status_code in (403, 409) and Approval.objects.get(pk=approval.pk).decided_via == "api"


def test_a_tampered_link_gets_a_403_page_and_decides_nothing(mail, alice, agent):
    addressed(alice)
    approval = approval_of(start_on(mail, alice, "write hello to a.txt"))
    url = link(mailed(mail, alice, approval))
    value = url.rstrip("/").rsplit("/", 1)[1]

    for forged in (value[:-3] + "xyz", value.split(":")[0], "garbage", "A" * 3000):
        page = Page(f"{mail.base_url}/approve/{forged}/")
        assert page.shown.status_code == 403 and "not valid" in page.shown.text
        assert page.press("approve").status_code == 403
    assert Page(url).press("launch").status_code == 400

    assert Approval.objects.get(pk=approval.pk).status == "pending"


def test_an_edit_after_the_mail_voids_its_link_and_mails_the_new_version(mail, alice, agent):
    addressed(alice)
    approval = approval_of(start_on(mail, alice, "write hello to a.txt"))
    old = link(mailed(mail, alice, approval))
    edit = {"decision": "approve", "shown_hash": approval.shown_hash, "arguments": {"path": "b\u200b.txt", "content": "hello"}}
    assert Api(mail.base_url, alice).post(f"approvals/{approval.pk}/decision", edit).json()["status"] == "pending"

    new = mailed(mail, alice, approval, count=2)

    page = Page(old)
    assert "edited since this mail" in text(page.shown) and f"/conversations/{approval.conversation_id}/" in page.shown.text
    assert page.press("approve").status_code in (403, 409)
    assert "⟨U+200B⟩" in parts(new)["text/plain"]
    assert Page(link(new)).press("approve").status_code == 200
    approval.refresh_from_db()
    assert (approval.status, approval.approved_arguments["path"]) == ("approved", "b\u200b.txt")


def test_a_critical_call_asks_for_its_confirmation_on_the_page(mail, alice, agent):
    addressed(alice)
    approval = approval_of(start_on(mail, alice, "delete all files"))
    page = Page(link(mailed(mail, alice, approval)))
    assert approval.confirmation_required and 'name="confirmation"' in page.shown.text

    refused = page.press("approve", confirmation="sure")

    assert refused.status_code == 400 and Approval.objects.get(pk=approval.pk).status == "pending"
    assert page.press("approve", confirmation=approval.confirmation_hint).status_code == 200
    assert Approval.objects.get(pk=approval.pk).status == "approved"


def test_a_four_eyes_call_is_mailed_only_to_the_eligible_approvers(mail, alice, bob, carol, mallory, ops_agent):
    addressed(alice, bob, carol, mallory)
    approval = approval_of(start_on(mail, alice, "delete a.txt", agent="ops"))
    assert approval.approver_required

    for user in (bob, carol):
        mailed(mail, user, approval)
    wait_until(lambda: EmailDelivery.objects.filter(approval=approval, status="sent").count() == 2, message="both sent")
    assert not mails_to(mail, alice, approval) and not mails_to(mail, mallory, approval)
    assert Page(link(mails_to(mail, bob, approval)[0])).press("approve").status_code == 200
    approval.refresh_from_db()
    assert (approval.status, approval.decided_by, approval.decided_via) == ("approved", bob, "email")


def test_a_mail_server_down_then_back_delivers_each_mail_once_and_blocks_no_decision(mail, alice, bob, agent):
    addressed(alice, bob)
    mail.sink.stop()
    try:
        first = approval_of(start_on(mail, alice, "write hello to a.txt"))
        row = wait_until(lambda: EmailDelivery.objects.filter(approval=first).exclude(last_error="").first(), timeout=20,
                         message=f"a failed send\n{mail.logs()}")
        assert row.status == "queued"
        second = approval_of(start_on(mail, alice, "write hello to b.txt"))
        decided = Api(mail.base_url, alice).post(f"approvals/{second.pk}/decision", {"decision": "approve", "shown_hash": second.shown_hash})
        assert decided.status_code == 200  # the mail server being down holds up no decision
    finally:
        mail.sink.start()

    message = mailed(mail, alice, first)
    wait_until(lambda: EmailDelivery.objects.get(approval=first, user=alice).status == "sent", message="sent")
    assert Page(link(message)).press("approve").status_code == 200
    assert len(mails_to(mail, alice, first)) == 1 and not mails_to(mail, alice, second)
    assert EmailDelivery.objects.get(approval=second, user=alice).status in ("closed", "sent")
