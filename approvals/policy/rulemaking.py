"""Making, listing, disabling and removing rules: who may make which scope, and what a rule may say,
checked when it is made. Every surface (the API, the card's "Always…" menus, the rules page) makes
rules here. Removing a rule keeps its row (`deleted_at`), so the decisions it made still name it."""
import json

from django.db.models import Q, QuerySet
from django.utils import timezone

from core.inputs import is_storable
from core.visible import hidden_as_any

from . import conditions, memory
from .conditions import MAX_PATTERN_CHARS
from ..models import Rule
from ..permissions import is_approver
from ..deciders.routing import ASKING_TOKEN, asks_only

APPROVER_SCOPES = (Rule.Scope.AGENT, Rule.Scope.GLOBAL)
MAX_CONDITIONS = 20
MAX_NOTE_CHARS = 500
EXACT_VALUE_CHARS = 200  # longer text is left free in a prefilled rule
FREE_TEXT_ARGUMENTS = {"content", "body", "text", "message", "data"}  # what is written, not where: left free


class InvalidRule(ValueError):
    """A rule that cannot be made as asked (400), said in words for the person making it."""


class ScopeNotAllowed(PermissionError):
    """The scope is for approvers only, or the rule is someone else's and the caller no approver (403)."""


class TargetNotFound(LookupError):
    """The conversation or agent is unknown, or not the caller's (404)."""


def allowed_scopes(user) -> list[str]:
    """The scopes `user` may make rules in: everyone their own conversations and their own
    conversations with an agent; approvers also an agent's every conversation, and everything."""
    scopes = [Rule.Scope.CONVERSATION, Rule.Scope.AGENT_USER]
    return scopes + list(APPROVER_SCOPES) if is_approver(user) else scopes


def create(user, **fields) -> Rule:
    """Make a rule for `user` (the fields as draft() takes them). Raises ScopeNotAllowed,
    TargetNotFound or InvalidRule; nothing is stored then."""
    if asks_only(user):
        raise ScopeNotAllowed(ASKING_TOKEN)  # a rule decides what it matches, later
    rule = draft(user, **fields)
    rule.save()
    return rule


def draft(
    user,
    *,
    effect: str,
    tool: str,
    arguments: dict | None,
    scope: str,
    conversation_id=None,
    agent: str = "",
    expires_at=None,
    max_uses: int | None = None,
    note: str = "",
    mode: str = Rule.Mode.LIVE,
    after: dict | None = None,
    at_most: dict | None = None,
) -> Rule:
    """A rule as `user` asks for it, checked and not yet saved. `mode` shadow: it decides nothing
    and what it would have done is recorded (approvals.policy.shadow) until it is promoted."""
    if effect not in Rule.Effect.values:
        raise InvalidRule("`effect` is allow, deny or ask.")
    if mode not in Rule.Mode.values:
        raise InvalidRule("`mode` is live or shadow.")
    if scope not in Rule.Scope.values:
        raise InvalidRule(f"`scope` is one of {', '.join(Rule.Scope.values)}.")
    if scope not in allowed_scopes(user):
        raise ScopeNotAllowed(f"Only approvers may make {scope} rules.")
    rule = Rule(
        effect=effect,
        tool=check_tool(tool),
        arguments=check_conditions(arguments),
        scope=scope,
        created_by=user,
        expires_at=_check_expiry(expires_at),
        max_uses=_check_max_uses(max_uses),
        note=_check_note(note),
        mode=mode,
        **_memory(after, at_most),
    )
    rule.conversation, rule.agent = _target(user, scope, conversation_id, agent)
    return rule


def draft_from_call(
    user, approval, *, approve: bool, scope: str, call_arguments: dict, arguments: dict | None = None, note: str = "", **limits
) -> Rule:
    """The rule a decider asks to remember with their decision ("always allow/deny this"): for the
    call's tool, in the call's conversation or with its agent; its conditions `arguments`, or those
    prefilled (conditions_for) from `call_arguments`, the version decided (an edit's, never the
    request it replaced), when left out; `{}` matches any arguments."""
    conversation = approval.conversation
    conditions = conditions_for(call_arguments) if arguments is None else arguments
    effect = Rule.Effect.ALLOW if approve else Rule.Effect.DENY
    rule = draft(
        user, effect=effect, tool=approval.tool_call.name, arguments=conditions, scope=scope,
        conversation_id=conversation.pk if scope == Rule.Scope.CONVERSATION else None,
        agent=conversation.agent.slug if scope in (Rule.Scope.AGENT_USER, Rule.Scope.AGENT) else "",
        note=note, **limits,
    )
    rule.note = rule.note or describe(rule)
    return rule


def describe(rule: Rule) -> str:
    """A rule in words, its default note: "always allow write_file path notes/* in this conversation"."""
    conditions = " ".join(f"{name} {pattern.get('regex') if isinstance(pattern, dict) else pattern}" for name, pattern in rule.arguments.items())
    where = {
        Rule.Scope.CONVERSATION: "in this conversation",
        Rule.Scope.AGENT_USER: f"with {rule.agent.name if rule.agent else 'this agent'}",
        Rule.Scope.AGENT: f"with {rule.agent.name if rule.agent else 'this agent'}, for everyone",
        Rule.Scope.GLOBAL: "with every agent, for everyone",
    }[rule.scope]
    text = " ".join(part for part in (f"always {rule.effect}", rule.tool, conditions, where) if part)
    return text[:MAX_NOTE_CHARS]


def _target(user, scope: str, conversation_id, agent_slug: str):
    """(conversation, agent) for the scope, each one the caller may use."""
    from chat.selectors import agent_for, visible_conversations
    from chat.models import Agent

    if scope == Rule.Scope.CONVERSATION:
        if agent_slug:
            raise InvalidRule("A conversation rule names its conversation (`conversation_id`), not an agent.")
        if not conversation_id:
            raise InvalidRule("A conversation rule needs `conversation_id`.")
        conversation = visible_conversations(user).filter(pk=conversation_id).first()
        if conversation is None:
            raise TargetNotFound("No such conversation.")
        # Seeing a conversation (a route's member sees one a call was routed from) is no say over it:
        # an allow rule there would approve its owner's calls, an ask or deny would hold them.
        if conversation.owner_id != user.pk and not is_approver(user):
            raise ScopeNotAllowed("Only the conversation's owner (or an approver) makes rules in it.")
        return conversation, None
    if conversation_id:
        raise InvalidRule(f"A {scope} rule takes no `conversation_id`.")
    if scope == Rule.Scope.GLOBAL:
        if agent_slug:
            raise InvalidRule("A global rule takes no `agent`: it holds for every agent.")
        return None, None
    if not agent_slug:
        raise InvalidRule(f"A {scope} rule needs `agent` (an agent's slug).")
    # An approver's agent-wide rule may name any agent; a user's own, only one they may use.
    agents = Agent.objects.filter(slug=agent_slug) if scope == Rule.Scope.AGENT and is_storable(agent_slug) else None
    found = agents.first() if agents is not None else agent_for(user, agent_slug)
    if found is None:
        raise TargetNotFound("No such agent.")
    return None, found


def _memory(after, at_most) -> dict:
    """The rule's conditions on what happened before (approvals.policy.memory), checked."""
    try:
        return {"after": memory.check_after(after), "at_most": memory.check_at_most(at_most)}
    except memory.InvalidMemory as exc:
        raise InvalidRule(str(exc)) from None


def check_tool(tool) -> str:
    if not isinstance(tool, str) or not tool.strip():
        raise InvalidRule("`tool` is a tool's name or a glob such as notes__*.")
    tool = tool.strip()
    if len(tool) > MAX_PATTERN_CHARS or not is_storable(tool):
        raise InvalidRule(f"`tool` is at most {MAX_PATTERN_CHARS} characters of text.")
    return tool


def check_conditions(arguments) -> dict:
    """{name: glob} or {name: {"regex": ...}}: every regular expression one RE2 takes (linear time),
    every condition on a URL argument a URL (approvals.policy.conditions)."""
    if arguments is None:
        return {}
    if not isinstance(arguments, dict):
        raise InvalidRule('`arguments` is an object: {"name": "glob"} or {"name": {"regex": "..."}}.')
    if len(arguments) > MAX_CONDITIONS:
        raise InvalidRule(f"At most {MAX_CONDITIONS} argument conditions.")
    checked = {}
    for name, condition in arguments.items():
        if not name or len(name) > 100 or not is_storable(name):
            raise InvalidRule("Each argument condition names an argument (at most 100 characters).")
        pattern = condition.get("regex") if isinstance(condition, dict) and set(condition) == {"regex"} else condition
        if not isinstance(pattern, str) or len(pattern) > MAX_PATTERN_CHARS or not is_storable(pattern):
            raise InvalidRule(
                f'The condition on {name!r} is a glob, or {{"regex": "..."}}, of at most {MAX_PATTERN_CHARS} characters.'
            )
        try:
            conditions.check(name, condition)
        except ValueError as exc:
            raise InvalidRule(str(exc)) from None
        checked[name] = condition
    return checked


def _check_expiry(expires_at):
    if expires_at is not None and timezone.is_naive(expires_at):
        expires_at = timezone.make_aware(expires_at)  # a time without its zone is the site's (TIME_ZONE), as Django's forms read one
    if expires_at is not None and expires_at <= timezone.now():
        raise InvalidRule("`expires_at` is in the past.")
    return expires_at


def _check_max_uses(max_uses):
    if max_uses is not None and not (isinstance(max_uses, int) and 1 <= max_uses <= 10**9):
        raise InvalidRule("`max_uses` is a whole number from 1.")
    return max_uses


def _check_note(note) -> str:
    note = (note or "").strip()
    if len(note) > MAX_NOTE_CHARS or not is_storable(note):
        raise InvalidRule(f"The note is at most {MAX_NOTE_CHARS} characters of text.")
    return note


def conditions_for(arguments: dict) -> dict:
    """The argument conditions a rule made from this call starts with (the card prefills them, and a
    trust suggestion offers them): a URL becomes its scheme, host and folder (`https://docs.vendor.test/*`),
    a path its folder's glob (`notes/*`), a short value itself, exactly; what is written rather than
    where (a file's content, a mail's body: by the argument's name), and long or multi-line text, is
    left free. An invisible or direction-changing character becomes `?` (any one character), so the
    condition shows what it holds."""
    prefilled = {}
    for name, value in sorted(arguments.items()):
        if name in FREE_TEXT_ARGUMENTS:
            continue
        if isinstance(value, str):
            if "\n" in value or len(value) > EXACT_VALUE_CHARS:
                continue
            prefilled[name] = hidden_as_any(conditions.prefill(name, value))
        else:
            prefilled[name] = hidden_as_any(conditions.escape(json.dumps(value, sort_keys=True, ensure_ascii=False)))
    return prefilled


def visible_rules(user) -> QuerySet[Rule]:
    """The rules `user` may see and manage, removed ones left out: the rules they made, the rules of
    their own conversations, and for approvers every agent-wide and global rule."""
    mine = Q(created_by=user) | Q(scope=Rule.Scope.CONVERSATION, conversation__owner=user)
    if is_approver(user):
        mine |= Q(scope__in=APPROVER_SCOPES)
    return Rule.objects.filter(mine, deleted_at__isnull=True).select_related("agent", "created_by", "conversation")


def rule_for(user, rule_id: int) -> Rule:
    """The rule, if `user` may see it (Rule.DoesNotExist otherwise: its existence is not told)."""
    return visible_rules(user).get(pk=rule_id)


def changeable_rule(user, rule_id: int) -> Rule:
    """The rule, if `user` may change or remove it: their own, or any they see if they are an
    approver. A rule someone else made in a non-approver's conversation was made by an approver (only
    approvers see others' conversations), and the conversation's owner may not undo it (403)."""
    rule = rule_for(user, rule_id)
    if asks_only(user):
        raise ScopeNotAllowed(ASKING_TOKEN)
    if not may_change(user, rule):
        raise ScopeNotAllowed("Only approvers may change or remove a rule an approver made.")
    return rule


def may_change(user, rule: Rule) -> bool:
    """The one decision on who may disable, enable or remove a rule they can see (the page hides
    the buttons by it, the API and the page's POSTs refuse by it)."""
    return rule.created_by_id == user.pk or is_approver(user)


def promote(user, rule_id: int) -> Rule:
    """Make a shadow rule live (shadow.promote), if `user` may change it and still use its scope."""
    from . import shadow  # lazily: shadow reads the simulator, which drafts rules here

    rule = changeable_rule(user, rule_id)
    if rule.scope not in allowed_scopes(user):
        raise ScopeNotAllowed(f"Only approvers may make {rule.scope} rules live.")
    return shadow.promote(rule)


def set_enabled(user, rule_id: int, enabled: bool) -> Rule:
    """Disable a rule, or enable it again if its scope is still the user's to use (someone who made
    a global rule as an approver, and is one no more, may switch it off but not back on)."""
    rule = changeable_rule(user, rule_id)
    if enabled and rule.scope not in allowed_scopes(user):
        raise ScopeNotAllowed(f"Only approvers may enable {rule.scope} rules.")
    rule.enabled = enabled
    rule.save(update_fields=["enabled"])  # saved, not updated: its history and a policy version (approvals.policy.versions)
    return rule


def remove(user, rule_id: int) -> Rule:
    """Disable the rule and mark it removed; the decisions it made keep naming it."""
    rule = changeable_rule(user, rule_id)
    now = timezone.now()
    rule.enabled, rule.deleted_at = False, now
    rule.save(update_fields=["enabled", "deleted_at"])  # saved: its history and a policy version
    return rule
