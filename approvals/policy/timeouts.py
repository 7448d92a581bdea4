"""What a deadline does when no one decided in time, per agent and tool (kagent's "auto-reject or
auto-approve, configurable", the Swift design's defaultTimeout): `expire` (the default: nothing runs,
the model is told it timed out), `reject` (with a stated reason the model reads), or `approve`, which
only a call that any one person could approve with a click may do: low risk, no four eyes, no route,
no quorum, no typed confirmation, no passkey. Pure: no database."""
EXPIRE, REJECT, APPROVE = "expire", "reject", "approve"
ACTIONS = (EXPIRE, REJECT, APPROVE)
CHOICES = [(EXPIRE, "expire (nothing runs)"), (REJECT, "reject, saying why"), (APPROVE, "approve (low-risk calls only)")]


def configured(agent, tool: str) -> str:
    """The agent's action for `tool`: its per-tool setting, else its own, else expire."""
    per_tool = getattr(agent, "timeout_actions", None) or {}
    action = per_tool.get(tool) or getattr(agent, "timeout_action", "") or EXPIRE
    return action if action in ACTIONS else EXPIRE


def why_not_approve(*, kind: str, risk: str, approver_required: bool, routed: bool, quorum: int = 1,
                    confirmation: bool = False, step_up: bool = False) -> str:
    """Why a deadline may not approve this pause ("" if it may): a timeout decides as nobody, so it
    may approve only what one click of anyone who may decide would."""
    if kind != "action":
        return f"a {kind} is a person's to answer"
    if risk != "low":
        return f"it is {risk} risk, and only a low-risk call is approved at its deadline"
    if routed or quorum > 1:
        return "a route names who approves it"
    if approver_required:
        return "it needs an approver other than its requester (four eyes)"
    if confirmation:
        return "it needs a typed confirmation"
    if step_up:
        return "approving it takes a passkey"
    return ""


def resolved(action: str, **pause) -> tuple[str, str]:
    """The action a pause stores when it is requested, and why an `approve` became `expire` (else "")."""
    if action != APPROVE:
        return action, ""
    refused = why_not_approve(**pause)
    return (EXPIRE, refused) if refused else (APPROVE, "")


def settings_errors(*, timeout_action: str, timeout_actions, tool_risks: dict[str, str]) -> dict[str, str]:
    """An agent's timeout settings checked as its form saves them: {field: message}. `tool_risks`:
    the declared risk of each tool the agent may call (a gate function may raise it: the request
    checks again, and expires what it may not approve)."""
    errors = {}
    if timeout_action not in ACTIONS:
        errors["timeout_action"] = f"Choose one of {', '.join(ACTIONS)}."
    elif timeout_action == APPROVE:
        risky = sorted(tool for tool, risk in tool_risks.items() if risk != "low")
        if risky:
            errors["timeout_action"] = (
                f"Approving at the deadline is for low-risk calls only, and {', '.join(risky)} "
                f"{'is' if len(risky) == 1 else 'are'} riskier: set approve per tool, for low-risk tools."
            )
    if not isinstance(timeout_actions, dict):
        errors["timeout_actions"] = 'Write {"tool name": "expire" | "reject" | "approve"}, e.g. {"run_command": "reject"}.'
        return errors
    for tool, action in timeout_actions.items():
        if not isinstance(tool, str) or not tool.strip() or action not in ACTIONS:
            errors["timeout_actions"] = f'Each tool\'s action is one of {", ".join(ACTIONS)}: {{"run_command": "reject"}}.'
            break
        if action == APPROVE and tool_risks.get(tool, "low") != "low":
            errors["timeout_actions"] = f"{tool} is {tool_risks[tool]} risk: only a low-risk tool may be approved at its deadline."
            break
    return errors


def described(action: str) -> str:
    """What the card says happens at the deadline."""
    return {REJECT: "Rejected", APPROVE: "Approved"}.get(action, "Expires")
