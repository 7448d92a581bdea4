"""The demo agents, users and route that `make run` creates (the agents are also used by the tests)."""
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from approvals.deciders import routemaking
from approvals.models import Route
from approvals.permissions import APPROVERS_GROUP, approvers_group

from .models import Agent

FINANCE_GROUP = "finance"
# When the demo agents ask a person (AgentKit's human-in-the-loop tool says when, in its prompt).
ASK_A_HUMAN = (
    "When the request is unclear, a choice is the user's to make (which file, which recipient, which "
    "option), or you lack something only they know, ask them with ask_human instead of guessing; "
    "for several steps that change things, propose a plan first with propose_plan. When a call is "
    "rejected, do not ask for the same call again: read the reason and try a different approach."
)

DEMO_TOOLS = [
    "list_directory", "read_file", "write_file", "delete_file", "delete_all_files", "send_email", "calculator", "web_fetch",
    "ask_human", "propose_plan", "add_domain", "allow_tool",
]


def ensure_demo_agent() -> Agent:
    """`demo`: its owner approves every gated call alone, so a newcomer's first approval needs nobody else."""
    agent, _ = Agent.objects.update_or_create(
        slug="demo",
        defaults={
            "name": "Demo agent",
            "system_prompt": "You help with files in a sandbox, email, arithmetic and web pages. "
            "Writes, deletes and emails wait for the user's approval. "
            + ASK_A_HUMAN,
            "model": "scripted/demo",
            "tools": DEMO_TOOLS,
            "require_approval": ["write_file", "delete_file", "send_email"],
            "fetch_allowlist": ["example.com", "python.org"],
            "open_to_everyone": True,
        },
    )
    return agent


def ensure_ops_agent() -> Agent:
    """`ops`: high-risk calls (deleting files, sending email) need an approver other than the owner,
    and pending approvals expire after 30 minutes."""
    agent, _ = Agent.objects.update_or_create(
        slug="ops",
        defaults={
            "name": "Ops agent (four eyes)",
            "system_prompt": "You operate on shared files and mail. Risky actions need a second person. " + ASK_A_HUMAN,
            "model": "scripted/ops",
            "tools": DEMO_TOOLS,
            "require_approval": ["write_file", "delete_file", "send_email"],
            "fetch_allowlist": ["example.com", "python.org"],
            "owner_max_risk": "medium",
            "approval_timeout_seconds": 30 * 60,
            "open_to_everyone": True,
        },
    )
    return agent


def ensure_outside_agent() -> Agent:
    """`outside`: the policy for agents that run elsewhere and ask here (POST /api/approval-requests,
    the Python client): every call they ask about waits for a human, whatever the tool."""
    agent, _ = Agent.objects.update_or_create(
        slug="outside",
        defaults={
            "name": "Outside agents (every call asks)",
            "system_prompt": "Approval requests from agents that run elsewhere land here; nothing runs here.",
            "model": "scripted/demo",
            "tools": [],
            "all_tools_need_approval": True,
            "approval_timeout_seconds": 24 * 60 * 60,
            "open_to_everyone": True,
        },
    )
    return agent


def ensure_finance_route() -> Route:
    """The ops agent's emails go to the `finance` group: two of its members must approve each, they
    are reminded after two minutes, and after ten the Approvers may decide too. (The ops agent moves
    no money; an email leaving the company is the nearest it comes to what finance signs off.) A
    live route of that shape is kept; one an operator removed is made again, as the agents are."""
    Group.objects.get_or_create(name=FINANCE_GROUP)
    approvers_group()
    live = Route.objects.filter(agent__slug="ops", tool="send_email", deleted_at__isnull=True, approvers__name=FINANCE_GROUP)
    return live.order_by("pk").first() or routemaking.create_route(
        created_by=None, agent="ops", tool="send_email", approvers=[FINANCE_GROUP], quorum=2,
        remind_after_seconds=120, escalate_after_seconds=600, escalate_to=[APPROVERS_GROUP],
    )


def ensure_user(username: str, password: str, *, approver: bool = False, group: str = ""):
    user, created = get_user_model().objects.get_or_create(username=username)
    if created:
        user.set_password(password)
        user.save()
    if approver:
        user.groups.add(approvers_group())
    if group:
        user.groups.add(Group.objects.get_or_create(name=group)[0])
    return user
