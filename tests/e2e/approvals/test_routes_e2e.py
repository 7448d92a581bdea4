"""Routes end to end (issue 25) with the real worker, beat, daphne and Redis: a two-of-three quorum
decided from the dashboard and Telegram runs the call once; an approval nobody decides escalates
to its escalation group and tells the webhooks; a beat restarted between the reminder and the
escalation sends each once; a delegate votes for the delegator until the delegation is deleted.
The gated call is an email: `OutboxEmail` counts how often it ran."""
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.utils import timezone
from playwright.sync_api import expect

from approvals.models import Approval, Vote, Webhook, WebhookDelivery
from approvals.announcements.webhooks import SIGNATURE_HEADER, verify
from chat.models import OutboxEmail, ToolCall
from tests.conftest import wait_until
from tests.e2e.browser import TIMEOUT_MS, WATCH_DASHBOARD, WATCH_SOCKET, browser, button, log_in, open_dashboard, opened  # noqa: F401  (browser: a fixture)
from tests.e2e.conftest import BIN, Api, start
from tests.e2e.chat.test_api_e2e import wait_for_status
from tests.e2e.channels.test_telegram_e2e import answer, edited_to, link, request_to, telegram_stack, tg  # noqa: F401  (fixtures)
from tests.standins.webhook_receiver import webhook_receiver  # noqa: F401  (the fixture)

pytestmark = pytest.mark.e2e

EMAIL = "email carol@example.com about lunch"
ERIN_TG = 2002


def person(name: str) -> User:
    """A user with the password tests/e2e/browser.py logs in with."""
    return User.objects.create_user(name, password=f"{name}-password")


def group(name: str, *members: User) -> Group:
    made = Group.objects.create(name=name)
    made.user_set.add(*members)
    return made


def operator() -> User:
    user = person("olga")
    user.user_permissions.add(Permission.objects.get(content_type__app_label="approvals", codename="manage_route"))
    return User.objects.get(pk=user.pk)


def make_route(base_url: str, **fields) -> dict:
    """A route on the demo agent's emails, made through POST /api/routes as an operator would."""
    body = {"agent": "demo", "tool": "send_email"} | fields
    made = Api(base_url, operator()).post("routes", body)
    assert made.status_code == 201, made.text
    return made.json()


def email_from(api: Api) -> str:
    response = api.post("conversations", {"agent": "demo", "message": EMAIL})
    assert response.status_code == 201, response.text
    return response.json()["id"]


def pending_approval(conversation_id: str, logs=lambda: "") -> Approval:
    return wait_until(
        lambda: Approval.objects.filter(conversation_id=conversation_id, status=Approval.Status.PENDING).first(),
        timeout=20, message=f"the routed call's approval\n{logs()}",
    )


def as_listed(api: Api, approval: Approval) -> dict:
    """The approval as GET /api/approvals shows it to the caller."""
    items = api.get("approvals", limit=500).json()["items"]
    return next(item for item in items if item["id"] == approval.pk)


def decision(api: Api, approval: Approval, verdict: str = "approve"):
    return api.post(f"approvals/{approval.pk}/decision", {"decision": verdict, "reason": "" if verdict == "approve" else "no"})


def test_a_two_of_three_quorum_decided_on_the_dashboard_and_on_telegram_runs_the_call_once(tg, browser, alice, agent):
    dora, erin, finn = person("dora"), person("erin"), person("finn")
    group("deployers", dora, erin, finn)
    route = make_route(tg.base_url, approvers=["deployers"], quorum=2)
    link(tg, erin, ERIN_TG)

    conversation_id = email_from(Api(tg.base_url, alice))
    approval = pending_approval(conversation_id, tg.logs)
    assert (approval.route_id, approval.quorum, approval.approver_required) == (route["id"], 2, True)
    request = request_to(tg, ERIN_TG, conversation_id)  # erin's phone has it, with its buttons

    # Dora, on the dashboard in Chromium: her Approve is the first vote of two.
    context = browser.new_context(base_url=tg.base_url, viewport={"width": 1280, "height": 900})
    context.set_default_timeout(TIMEOUT_MS)
    context.add_init_script(WATCH_SOCKET)
    context.add_init_script(WATCH_DASHBOARD)
    try:
        page = context.new_page()
        log_in(page, dora)
        open_dashboard(page)  # no re-read after this closes the row she opens
        row = page.locator(f"#approval-row-{approval.pk}")
        button(opened(row), "Approve").click()
        expect(row).to_contain_text("1 of 2 approvals: dora")  # still pending, on her inbox
        wait_until(lambda: Vote.objects.filter(approval=approval).count() == 1, timeout=15,
                   message=f"dora's vote from the dashboard\n{tg.logs()}")
    finally:
        context.close()
    assert Approval.objects.get(pk=approval.pk).status == Approval.Status.PENDING
    assert not OutboxEmail.objects.exists()

    # Erin, on Telegram: her copy now counts dora's vote; the second vote decides it.
    counted = edited_to(tg, ERIN_TG, "1 of 2 approvals: dora")
    pressed = tg.fake.press(ERIN_TG, tg.fake.buttons(counted)["Approve"])
    answer(tg, pressed)

    wait_for_status(conversation_id, "idle", timeout=20)
    shown = as_listed(Api(tg.base_url, alice), approval)
    assert shown["status"] == "approved" and shown["quorum"] == 2 and shown["route"] == route["id"]
    assert [(v["user"], v["via"], v["on_behalf_of"]) for v in shown["votes"]] == [("dora", "dashboard", None), ("erin", "telegram", None)]
    assert OutboxEmail.objects.count() == 1  # the email went once
    assert ToolCall.objects.get(pk=approval.tool_call_id).status == ToolCall.Status.SUCCEEDED

    late = decision(Api(tg.base_url, finn), approval)
    assert late.status_code == 409 and "already" in late.json()["detail"], late.text
    assert Vote.objects.filter(approval=approval).count() == 2 and OutboxEmail.objects.count() == 1


def test_an_undecided_call_escalates_to_the_escalation_group_and_its_webhook_after_the_delay(
    e2e, api_for, alice, agent, webhook_receiver
):
    Webhook.objects.create(url=webhook_receiver.url, secret="hush")
    dora, gina = person("dora"), person("gina")
    group("deployers", dora)
    group("leads", gina)
    make_route(e2e.base_url, approvers=["deployers"], escalate_after_seconds=4, escalate_to=["leads"])

    conversation_id = email_from(api_for(alice))
    approval = pending_approval(conversation_id)
    lead = api_for(gina)

    early = decision(lead, approval)
    not_yet = Approval.objects.get(pk=approval.pk).escalated_at is None  # so the answer came before the escalation
    assert (early.status_code, not_yet) == (403, True), early.text  # she sees it, may not decide it yet

    escalated_at = wait_until(lambda: Approval.objects.get(pk=approval.pk).escalated_at, timeout=15, message="the escalation")
    assert escalated_at - approval.requested_at >= timedelta(seconds=4)
    sent = wait_until(
        lambda: [call for call in webhook_receiver.calls if call.json["event"] == "approval.escalated"],
        timeout=15, message="the approval.escalated webhook",
    )
    assert len(sent) == 1 and verify(sent[0].headers[SIGNATURE_HEADER], sent[0].body, "hush")
    assert sent[0].json["approval"]["id"] == approval.pk and sent[0].json["approval"]["status"] == "pending"
    assert as_listed(lead, approval)["escalated_at"] is not None

    approved = decision(lead, approval)

    assert approved.status_code == 200 and approved.json()["status"] == "approved", approved.text
    wait_for_status(conversation_id, "idle")
    assert OutboxEmail.objects.count() == 1 and Approval.objects.get(pk=approval.pk).decided_by == gina
    assert WebhookDelivery.objects.filter(approval=approval, event="approval.escalated").count() == 1


def sweeps_done(e2e) -> int:
    """How many sweeps of reminders and escalations the worker has finished so far."""
    lines = e2e.processes["worker"].log.read_text(errors="replace").splitlines()
    return sum("approvals.tasks.remind_and_escalate[" in line and "] succeeded" in line for line in lines)


def test_a_beat_restarted_between_the_reminder_and_the_escalation_sends_each_once(e2e, api_for, alice, agent, webhook_receiver):
    Webhook.objects.create(url=webhook_receiver.url, secret="hush")
    dora, gina = person("dora"), person("gina")
    group("deployers", dora)
    group("leads", gina)
    make_route(e2e.base_url, approvers=["deployers"], remind_after_seconds=1, escalate_after_seconds=8, escalate_to=["leads"])
    conversation_id = email_from(api_for(alice))
    approval = pending_approval(conversation_id)

    wait_until(lambda: "approval.reminder" in webhook_receiver.events(), timeout=15, message="the reminder webhook")
    beat = e2e.processes["beat"]
    beat.stop()
    reminded = Approval.objects.get(pk=approval.pk)
    assert reminded.reminded_at is not None and reminded.escalated_at is None  # stopped between the two
    e2e.processes["beat"] = start(
        "beat-restarted", [str(BIN / "celery"), "-A", "hitl", "beat", "--loglevel", "INFO", "--schedule", str(e2e.work / "beat-schedule")],
        e2e.env, e2e.work,
    )

    wait_until(lambda: "approval.escalated" in webhook_receiver.events(), timeout=20, message="the escalation webhook")
    swept = sweeps_done(e2e)
    wait_until(lambda: sweeps_done(e2e) >= swept + 2, timeout=20, message="two more sweeps after the escalation")  # room to send twice

    assert sorted(webhook_receiver.events()) == ["approval.escalated", "approval.reminder", "approval.requested"]
    deliveries = WebhookDelivery.objects.filter(approval=approval)
    assert sorted(deliveries.values_list("event", flat=True)) == ["approval.escalated", "approval.reminder", "approval.requested"]
    stored = Approval.objects.get(pk=approval.pk)
    assert stored.reminded_at == reminded.reminded_at and stored.escalated_at is not None
    assert stored.status == Approval.Status.PENDING

    assert decision(api_for(gina), approval, "reject").status_code == 200
    wait_for_status(conversation_id, "idle")


def test_a_delegate_votes_for_the_delegator_until_the_delegation_is_deleted(e2e, api_for, alice, agent):
    dora, erin, hugo = person("dora"), person("erin"), person("hugo")
    group("deployers", dora, erin)
    make_route(e2e.base_url, approvers=["deployers"], quorum=2)
    now = timezone.now()
    delegated = api_for(dora).post(
        "delegations", {"to": "hugo", "starts_at": (now - timedelta(minutes=1)).isoformat(), "ends_at": (now + timedelta(hours=1)).isoformat()}
    )
    assert delegated.status_code == 201, delegated.text
    delegate = api_for(hugo)

    first = pending_approval(email_from(api_for(alice)))
    voted = decision(delegate, first)

    assert voted.status_code == 200 and voted.json()["status"] == "pending", voted.text
    [vote] = voted.json()["votes"]
    assert (vote["user"], vote["on_behalf_of"], vote["via"]) == ("hugo", "dora", "api")
    assert decision(api_for(dora), first).status_code == 409  # dora's vote is counted already, through hugo
    assert decision(api_for(erin), first).json()["status"] == "approved"  # dora (by hugo) and erin: two of two
    wait_for_status(first.conversation_id, "idle")

    ended = api_for(dora).http.delete(f"delegations/{delegated.json()['id']}")
    assert ended.status_code == 204, ended.text
    second = pending_approval(email_from(api_for(alice)))

    refused = decision(delegate, second)

    assert refused.status_code in (403, 404), refused.text
    assert not Vote.objects.filter(approval=second).exists()
    assert decision(api_for(dora), second, "reject").json()["status"] == "rejected"
    wait_for_status(second.conversation_id, "idle")
    assert OutboxEmail.objects.count() == 1
