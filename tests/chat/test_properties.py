"""The loop's promises under any interleaving: a Hypothesis state machine starts conversations,
decides, approves all, expires, re-runs and redelivers tasks and crashes workers, all through the
real services and the real loop (eager Celery, real commits), and checks the promises after each step."""
import uuid
from collections import Counter
from datetime import timedelta

import pytest
from django.conf import settings as django_settings
from django.db import connection
from django.utils import timezone
from hypothesis import Phase, settings as hypothesis_settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule, run_state_machine_as_test

from approvals.models import Approval, LateDecision
from approvals.services import AlreadyDecided, NotAllowed, decide, decide_all, expire_overdue
from approvals.audit.triggers import erasing
from chat import loop, recovery, services, tasks
from chat.scripted import SCRIPTED_REQUESTS
from chat.models import Agent, Conversation, Message, OutboxEmail, ToolCall
from chat.selectors import stalled_conversations
from chat.tools import ToolContext, registry

Status = ToolCall.Status

PROMPTS = (
    "delete a.txt and b.txt",
    "email x@example.com about y",
    "write hi to c.txt",
    "email team@example.com about the launch",
    "write one to a.txt",
    "what is 6 * 7",
)
# What an owner may type into a conversation: a clear yes or no, an ambiguous answer, something to
# hold while calls wait, or a new request.
# The typed replies that decide, each with (approves, the number of calls it says it decides).
DECISIVE_REPLIES = {
    "yes": (True, 1),
    "no, because not today": (False, 1),
    "approve all 2": (True, 2),
    "reject all 2 because not today": (False, 2),
}
REPLIES = (
    *DECISIVE_REPLIES,
    "yes but not b.txt",
    "hello",
    "delete c.txt",
    "email x@example.com about z",
    "write two to b.txt",
)
DECIDERS = ("owner", "bob", "carol", "mallory")
APPROVERS = ("bob", "carol")
FOUR_EYES_TOOLS = ("delete_file", "send_email")  # high risk, above the ops agent's owner_max_risk
# database=None: no .hypothesis/ folder in the project; a failure prints its steps instead.
# No explain phase: its line tracer makes a failing run minutes slower than the report is worth.
MACHINE_SETTINGS = hypothesis_settings(
    max_examples=25,
    stateful_step_count=15,
    deadline=None,
    database=None,
    phases=[Phase.explicit, Phase.generate, Phase.shrink],
)


class RunningClaims:
    """A connection execute wrapper that counts, per tool call, the UPDATEs that moved it to
    `running`: the claim taken just before a tool runs. It reads the SQL the loop sends, so the
    loop itself is not touched, and whatever claims a call (the loop, a simulated dead worker) counts."""

    def __init__(self):
        self.count: Counter = Counter()
        self.unattributed: list[str] = []

    def __call__(self, execute, sql, params, many, context):
        result = execute(sql, params, many, context)
        if many or not sql.startswith('UPDATE "chat_toolcall"') or not params:
            return result
        assignments, _, where = sql.partition(" WHERE ")
        marker = '"status" = %s'
        if marker not in assignments:
            return result
        if params[assignments[: assignments.index(marker)].count("%s")] != Status.RUNNING:
            return result
        if context["cursor"].rowcount <= 0:
            return result
        id_marker = '"chat_toolcall"."id" = %s'
        if id_marker not in where:
            self.unattributed.append(sql)
            return result
        self.count[params[assignments.count("%s") + where[: where.index(id_marker)].count("%s")]] += 1
        return result


class World:
    """What lives for the whole test: the users, the running-claim ledger, and what the checks
    remember within one example (first-seen decisions, finished calls, stored arguments)."""

    def __init__(self, users: dict, claims: RunningClaims):
        self.users = users
        self.claims = claims
        self.decided: dict[int, tuple] = {}  # approval id → (status, by, via, reason, at) when first seen decided
        self.finished: dict[int, tuple] = {}  # tool call id → (status, result, error) when first seen finished
        self.stored: dict[int, tuple] = {}  # tool call id → (name, arguments, hash) when first seen
        self.claimed: set[int] = set()  # every tool call id the ledger ever saw claimed

    def reset(self) -> None:
        self.claimed |= set(self.claims.count)
        self.claims.count.clear()
        self.claims.unattributed.clear()
        self.decided.clear()
        self.finished.clear()
        self.stored.clear()


def answer_check(messages: list[dict]) -> None:
    """Each tool call id of an assistant message gets exactly one tool result, right after it."""
    for i, message in enumerate(messages):
        if message["role"] == "tool":
            j = i
            while j > 0 and messages[j]["role"] == "tool":
                j -= 1
            owner = messages[j]
            assert owner["role"] == "assistant" and owner.get("tool_calls"), f"stray tool result {message}"
            assert message["tool_call_id"] in {c["id"] for c in owner["tool_calls"]}, f"result for an unknown call {message}"
        if message["role"] == "assistant" and message.get("tool_calls"):
            ids = [c["id"] for c in message["tool_calls"]]
            answers = []
            for later in messages[i + 1 :]:
                if later["role"] != "tool":
                    break
                answers.append(later["tool_call_id"])
            assert len(set(ids)) == len(ids), f"duplicate call ids {ids}"
            assert Counter(answers) == Counter(ids), f"calls {ids} were answered by {answers}"


def agent_wrote_beside(conversation: Conversation, pending: list[Approval]) -> bool:
    """Words of the agent's since the user's last message before the pending calls (the turn that
    asked for them, or a step before it), read from the stored messages."""
    if not pending:
        return False
    first = min(approval.tool_call.message.position for approval in pending)
    messages = list(Message.objects.filter(conversation=conversation).order_by("position"))
    since = max((m.position for m in messages if m.role == Message.Role.USER and m.in_model_context and m.position < first), default=0)
    return any(m.role == Message.Role.ASSISTANT and m.position > since and m.content.strip() for m in messages)


class LoopMachine(RuleBasedStateMachine):
    world: World  # set by the test (run_state_machine_as_test builds one machine per example)

    def __init__(self):
        super().__init__()
        # Each example starts from no conversations, so a replayed example meets the same state.
        with erasing():  # decided approvals and finished calls are kept by the database otherwise
            OutboxEmail.objects.all().delete()
            LateDecision.objects.all().delete()  # a decision after an expiry is kept, and keeps its approval
            Approval.objects.filter(asked_again_from__isnull=False).delete()
            Approval.objects.all().delete()
            Conversation.objects.all().delete()
        self.world.reset()
        self.conversations: list = []  # ids of the conversations this example started
        self.dead_tokens: dict = {}  # conversation id → task id of the worker that died holding its lease
        self.crashed_calls: dict[int, str] = {}  # tool call id → crash point
        SCRIPTED_REQUESTS.clear()

    # --- helpers ------------------------------------------------------------------------------

    def user(self, name: str, conversation: Conversation):
        return conversation.owner if name == "owner" else self.world.users[name]

    def conversation(self, pick: int, waiting: bool = False) -> Conversation:
        """One of this example's conversations; with `waiting`, one with pending calls if there is one."""
        pks = self.conversations
        if waiting:
            pending = Approval.objects.filter(conversation__in=pks, status=Approval.Status.PENDING)
            pks = sorted(set(pending.values_list("conversation_id", flat=True)), key=pks.index) or pks
        return Conversation.objects.select_related("agent", "owner").get(pk=pks[pick % len(pks)])

    def expected(self, user, approval: Approval, conversation: Conversation, approve: bool = True) -> str:
        """What deciding should do, from the rules as written (not from approvals.permissions):
        approving a four-eyes call takes an approver who is not the owner; anyone who sees a call
        may reject it."""
        is_owner = user.pk == conversation.owner_id
        is_approver = user.username in APPROVERS
        four_eyes = conversation.agent.slug == "ops" and approval.tool_call.name in FOUR_EYES_TOOLS
        if not (is_owner or is_approver):
            return "hidden"
        if four_eyes and approve and (is_owner or not is_approver):
            return "not_allowed"
        return "decided" if approval.status == Approval.Status.PENDING else "already_decided"

    def second_person(self, conversation: Conversation):
        """An approver who is not the owner: may decide every call of the conversation."""
        return self.world.users["carol" if conversation.owner.username == "bob" else "bob"]

    def decide_one(self, which, fresh, decider, approve, via, reason=""):
        """Decide one approval of this example: a pending one when `fresh`, else any (maybe decided)."""
        approvals = Approval.objects.filter(conversation__in=self.conversations).select_related("tool_call").order_by("pk")
        if fresh and approvals.filter(status=Approval.Status.PENDING).exists():
            approvals = approvals.filter(status=Approval.Status.PENDING)
        approvals = list(approvals)
        if not approvals:
            return
        approval = approvals[which % len(approvals)]
        conversation = Conversation.objects.select_related("agent", "owner").get(pk=approval.conversation_id)
        user = self.user(decider, conversation)
        expected = self.expected(user, approval, conversation, approve)
        before = Approval.objects.values().get(pk=approval.pk)
        try:
            decide(approval.pk, user=user, approve=approve, via=via, reason=reason, shown_hash="")
            outcome = "decided"
        except AlreadyDecided:
            outcome = "already_decided"
        except NotAllowed:
            outcome = "not_allowed"
        except Approval.DoesNotExist:
            outcome = "hidden"
        assert outcome == expected, f"{user} deciding {approval}: expected {expected}, got {outcome}"
        after = Approval.objects.values().get(pk=approval.pk)
        if outcome == "decided":
            status = Approval.Status.APPROVED if approve else Approval.Status.REJECTED
            assert (after["status"], after["decided_by_id"], after["decided_via"]) == (status, user.pk, via)
            assert after["rejection_reason"] == ("" if approve else reason.strip())
        else:
            assert after == before

    # --- rules --------------------------------------------------------------------------------

    @initialize(timeout=st.sampled_from([None, 600]))
    def give_the_demo_agent_a_timeout(self, timeout):
        Agent.objects.filter(slug="demo").update(approval_timeout_seconds=timeout)

    @initialize(
        owner=st.sampled_from(["alice", "bob"]), agent=st.sampled_from(["demo", "ops"]), prompt=st.sampled_from(PROMPTS[:5])
    )
    def start_with_gated_calls(self, owner, agent, prompt):
        self.start(owner, agent, prompt)

    @rule(owner=st.sampled_from(["alice", "bob"]), agent=st.sampled_from(["demo", "ops"]), prompt=st.sampled_from(PROMPTS))
    def start(self, owner, agent, prompt):
        conversation = services.start_conversation(
            user=self.world.users[owner], agent=Agent.objects.get(slug=agent), content=prompt
        )
        self.conversations.append(conversation.pk)

    @precondition(lambda self: self.conversations)
    @rule(pick=st.integers(0, 999), waiting=st.booleans(), text=st.sampled_from(REPLIES))
    def say(self, pick, waiting, text):
        conversation = self.conversation(pick, waiting)
        owner = conversation.owner
        pending = list(Approval.objects.filter(conversation=conversation, status=Approval.Status.PENDING).select_related("tool_call"))
        approves, count = DECISIVE_REPLIES.get(text, (True, None))
        decidable = [a.pk for a in pending if self.expected(owner, a, conversation, approves) == "decided"]
        # A clear answer for exactly the calls pending decides every one the owner may, unless the agent
        # wrote words in the turn that asked for them (they may ask what a "yes" answers: the cards decide).
        decides = count == len(pending) and not agent_wrote_beside(conversation, pending)
        services.post_message(conversation=conversation, user=owner, content=text)
        after = Approval.objects.filter(pk__in=[a.pk for a in pending])
        if decides:
            assert all(a.status != Approval.Status.PENDING and a.decided_via == Approval.Via.TEXT for a in after if a.pk in decidable)
        else:  # anything else, or a count that does not match, decides nothing
            assert all(a.status == Approval.Status.PENDING or a.decided_via != Approval.Via.TEXT for a in after)

    @precondition(lambda self: self.conversations)
    @rule(
        which=st.integers(0, 999),
        fresh=st.booleans(),
        decider=st.sampled_from(DECIDERS),
        via=st.sampled_from([Approval.Via.CHAT, Approval.Via.DASHBOARD, Approval.Via.API]),
    )
    def approve_one(self, which, fresh, decider, via):
        self.decide_one(which, fresh, decider, True, via)

    @precondition(lambda self: self.conversations)
    @rule(
        which=st.integers(0, 999),
        fresh=st.booleans(),
        decider=st.sampled_from(DECIDERS),
        reason=st.sampled_from(["", "not today", "  wrong file  "]),
    )
    def reject_one(self, which, fresh, decider, reason):
        self.decide_one(which, fresh, decider, False, Approval.Via.CHAT, reason)

    @precondition(lambda self: self.conversations)
    @rule(
        pick=st.integers(0, 999),
        waiting=st.booleans(),
        who=st.sampled_from(["owner", "bob"]),
        explicit=st.booleans(),
        mask=st.integers(0, 255),
    )
    def approve_all(self, pick, waiting, who, explicit, mask):
        conversation = self.conversation(pick, waiting)
        user = self.user(who, conversation)
        pending = list(
            Approval.objects.filter(conversation=conversation, status=Approval.Status.PENDING)
            .select_related("tool_call")
            .order_by("pk")
        )
        others = Approval.objects.exclude(conversation=conversation).filter(status=Approval.Status.PENDING)
        ids = None
        if explicit:  # what the user saw: some of the pending ids, maybe a decided one and another conversation's
            ids = [a.pk for i, a in enumerate(pending) if mask >> i & 1]
            decided = Approval.objects.filter(conversation=conversation).exclude(status=Approval.Status.PENDING).first()
            if mask & 64 and decided:
                ids.append(decided.pk)
            if mask & 128 and others.exists():
                ids.append(others.first().pk)
        untouched = {a.pk: a.status for a in Approval.objects.filter(pk__in=ids or [])}
        expected = {a.pk for a in pending if (ids is None or a.pk in ids) and self.expected(user, a, conversation) == "decided"}

        result = decide_all(conversation_id=conversation.pk, user=user, via=Approval.Via.CHAT, shown=None if ids is None else dict.fromkeys(ids, "")).decided

        assert {a.pk for a in result} == expected
        left = {a.pk for a in pending} - expected
        assert not Approval.objects.filter(pk__in=left).exclude(status=Approval.Status.PENDING).exists()
        for pk, status in untouched.items():
            if pk not in expected:
                assert Approval.objects.get(pk=pk).status == status

    @rule(due=st.booleans())
    def expire(self, due):
        now = timezone.now() + (timedelta(hours=2) if due else timedelta(seconds=1))
        deadlines = dict(
            Approval.objects.filter(status=Approval.Status.PENDING, expires_at__isnull=False).values_list("pk", "expires_at")
        )

        expired = expire_overdue(now=now)

        assert set(expired) <= set(deadlines) and all(deadlines[pk] <= now for pk in expired)
        assert set(expired) == {pk for pk, at in deadlines.items() if at <= now}
        for approval in Approval.objects.filter(pk__in=expired):
            assert (approval.status, approval.decided_by_id, approval.decided_via) == ("expired", None, "timeout")

    @precondition(lambda self: self.conversations)
    @rule(pick=st.integers(0, 999), redelivered=st.booleans())
    def resume(self, pick, redelivered):
        """advance() again, as a duplicate task (a fresh task id) or a redelivered one (the dead task's id)."""
        conversation = self.conversation(pick)
        token = self.dead_tokens.get(conversation.pk) if redelivered else None
        lease_held = conversation.advancing_until is not None and conversation.advancing_until > timezone.now()
        claimed = list(ToolCall.objects.filter(pk__in=self.crashed_calls, message__conversation=conversation, status=Status.RUNNING))
        if token:
            loop.advance(conversation.pk, token=token)
        else:
            tasks.advance_conversation.delay(str(conversation.pk))
        for call in claimed:
            call.refresh_from_db()
            if token or not lease_held:  # the lease's holder, or anyone once it expired, settles it
                assert call.status == Status.INTERRUPTED, call.status
            else:  # someone else's live lease: a duplicate task does nothing
                assert call.status == Status.RUNNING, call.status

    @precondition(lambda self: self.conversations)
    @rule(
        pick=st.integers(0, 999),
        point=st.sampled_from(["before_waiting", "receiver_lost", "before_effect", "after_effect"]),
        lease_expired=st.booleans(),
    )
    def crash(self, pick, point, lease_expired):
        """Leave the rows a worker leaves when it dies, at one of these points:
        - before_waiting: it stored a turn with gated calls, then died before setting `waiting`
          (the conversation stays `running`, its lease held by the dead task);
        - receiver_lost: the turn's last decision committed, its on_commit receiver never ran;
        - before_effect / after_effect: a task took the lease, settled the decisions, claimed a
          call `running` and died inside the tool, before or after its effect."""
        conversation = self.conversation(pick, waiting=True)
        if conversation.status != Conversation.Status.WAITING_FOR_APPROVAL or conversation.pk in self.dead_tokens:
            return
        turn = conversation.messages.filter(role=Message.Role.ASSISTANT).order_by("-position").first()
        pending = list(Approval.objects.filter(conversation=conversation, status=Approval.Status.PENDING).order_by("pk"))
        if not pending:  # waiting, but its last decision's receiver was lost already
            return
        now = timezone.now()
        token = f"dead-{uuid.uuid4().hex}"
        lease = timedelta(seconds=django_settings.HITL_LOOP_LEASE_SECONDS)
        until = now - timedelta(seconds=1) if lease_expired else now + lease
        if point == "before_waiting":
            if Approval.objects.filter(tool_call__message=turn).exclude(status=Approval.Status.PENDING).exists():
                return  # a decision came in, so the turn had been shown as waiting
            assert Conversation.objects.filter(pk=conversation.pk, advancing_token="").update(
                status=Conversation.Status.RUNNING, advancing_token=token, advancing_until=until
            )
            self.dead_tokens[conversation.pk] = token
            return
        decider = self.second_person(conversation)
        *first, last = pending
        for approval in first:
            decide(approval.pk, user=decider, approve=True, via=Approval.Via.DASHBOARD, shown_hash="")
        # The last decision commits; the process dies before its on_commit receiver runs.
        assert Approval.objects.filter(pk=last.pk, status=Approval.Status.PENDING).update(
            status=Approval.Status.APPROVED, decided_at=now, decided_by=decider, decided_via=Approval.Via.DASHBOARD
        )
        if point == "receiver_lost":
            return
        # Someone (the sweeper) resumed it and a task took the lease ...
        assert recovery.resume_if_decided(conversation.pk)
        assert Conversation.objects.filter(pk=conversation.pk, advancing_token="").update(
            advancing_token=token, advancing_until=until
        )
        # ... settled the decisions, claimed the first approved call, and died inside the tool.
        for call in turn.tool_calls.all():
            loop.apply_decision(call.pk)
        call = turn.tool_calls.filter(status=Status.APPROVED).order_by("position").first()
        assert ToolCall.objects.filter(pk=call.pk, status=Status.APPROVED).update(status=Status.RUNNING, started_at=now)
        if point == "after_effect":
            context = ToolContext(
                conversation_id=str(conversation.pk),
                agent=conversation.agent,
                sandbox=django_settings.HITL_SANDBOX_ROOT / str(conversation.pk),
                idempotency_key=str(call.approval.pk),
            )
            try:
                registry.get(call.name).run(call.arguments, context)
            except Exception:
                pass  # the effect may fail too (no such file); the worker dies either way
        self.dead_tokens[conversation.pk] = token
        self.crashed_calls[call.pk] = point

    @rule()
    def sweep(self):
        """The periodic recover_stalled task: whatever can move is moved, nothing is left stalled."""
        tasks.recover_stalled()
        assert not stalled_conversations(stalled_for=timedelta(0)).filter(pk__in=self.conversations).exists()

    # --- the promises -------------------------------------------------------------------------

    @invariant()
    def promises_hold(self):
        world = self.world
        # A decided approval never changes (and never goes back to pending).
        rows = Approval.objects.exclude(status=Approval.Status.PENDING).values_list(
            "pk", "status", "decided_by_id", "decided_via", "rejection_reason", "decided_at"
        )
        seen = set()
        for pk, *decision in rows:
            seen.add(pk)
            assert world.decided.setdefault(pk, tuple(decision)) == tuple(decision), f"approval {pk} changed"
        assert set(world.decided) <= seen, "a decided approval went back to pending"

        # A call reaches `running` at most once, and a call has started exactly when it was claimed.
        assert not world.claims.unattributed, world.claims.unattributed
        assert all(n == 1 for n in world.claims.count.values()), world.claims.count
        emails = {e.idempotency_key: e for e in OutboxEmail.objects.all()}
        for call in ToolCall.objects.select_related("approval", "message__conversation__agent"):
            assert (call.started_at is not None) == (world.claims.count[call.pk] == 1), (call, call.status)
            stored = (call.name, call.arguments, call.arguments_hash)
            assert world.stored.setdefault(call.pk, stored) == stored, f"{call} arguments changed"
            if call.status in ToolCall.FINISHED:
                final = (call.status, call.result, call.error)
                assert world.finished.setdefault(call.pk, final) == final, f"{call} changed after it finished"
            if not call.is_gated:
                assert not Approval.objects.filter(tool_call=call).exists()
                continue
            # Every executed gated call has an approval that said yes, for exactly these arguments.
            approval = call.approval
            assert approval.arguments_hash == call.arguments_hash
            if call.started_at is not None or call.status in (Status.APPROVED, Status.RUNNING, Status.SUCCEEDED, Status.INTERRUPTED):
                assert approval.status == Approval.Status.APPROVED, f"{call} ran ({call.status}) with {approval}"
            if call.status == Status.REJECTED:
                assert approval.status in (Approval.Status.REJECTED, Approval.Status.CANCELLED)
            if call.status == Status.EXPIRED:
                assert approval.status == Approval.Status.EXPIRED
            if approval.status == Approval.Status.PENDING:
                assert call.status == Status.PENDING_APPROVAL
            four_eyes = call.message.conversation.agent.slug == "ops" and call.name in FOUR_EYES_TOOLS
            assert approval.approver_required == four_eyes
            # One email per approval, and only for a call that was claimed; a success sent it once.
            if call.name == "send_email":
                email = emails.pop(str(approval.pk), None)
                if call.status == Status.SUCCEEDED:
                    assert email is not None and "(already sent)" not in call.result, call.result
                if email is not None:
                    assert call.started_at is not None and email.to == call.arguments["to"]
        assert not emails, f"emails without a claimed, approved send_email call: {list(emails)}"

        # Each tool call id has exactly one result before the model is called again.
        for request in SCRIPTED_REQUESTS:
            answer_check(request["messages"])
        SCRIPTED_REQUESTS.clear()

    def teardown(self):
        """Drain: redeliver dead tasks, reject what waits, sweep; then nothing may be left hanging."""
        for pk, token in self.dead_tokens.items():
            loop.advance(pk, token=token)
        for _ in range(5):  # held messages may bring new calls after the decisions
            for pk in self.conversations:
                conversation = Conversation.objects.select_related("owner").get(pk=pk)
                decide_all(
                    conversation_id=pk, user=self.second_person(conversation), via=Approval.Via.DASHBOARD,
                    approve=False, reason="end of the example", shown=None,
                )
            tasks.recover_stalled()
        self.promises_hold()
        for conversation in Conversation.objects.filter(pk__in=self.conversations):
            assert conversation.status in (Conversation.Status.IDLE, Conversation.Status.FAILED), (
                f"{conversation.pk} left {conversation.status}"
            )
        stuck = ToolCall.objects.filter(
            message__conversation__in=self.conversations,
            status__in=[Status.PENDING_APPROVAL, Status.APPROVED, Status.RUNNING],
        )
        assert not stuck.exists(), list(stuck.values_list("pk", "status"))


@pytest.mark.django_db(transaction=True)
def test_the_loop_keeps_its_promises_under_any_interleaving(alice, bob, carol, mallory, agent, ops_agent, settings):
    settings.HITL_STALL_SECONDS = 0  # the sweeper may take any conversation whose state says it can move
    claims = RunningClaims()
    LoopMachine.world = World({"alice": alice, "bob": bob, "carol": carol, "mallory": mallory}, claims)
    with connection.execute_wrapper(claims):
        run_state_machine_as_test(LoopMachine, settings=MACHINE_SETTINGS)
    LoopMachine.world.reset()
    assert LoopMachine.world.claimed, "no call was ever claimed: the running-claim ledger saw nothing"
