"""The rules page: the rules a user may see, grouped by scope, each with Disable/Enable and Delete
(the same rulemaking functions as the JSON API)."""
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.views.decorators.http import require_GET, require_POST

from . import rulemaking
from .models import Rule
from .permissions import is_approver

RULES_SHOWN = 500  # the newest; the page says when there are more

SCOPE_HEADINGS = {
    Rule.Scope.CONVERSATION: "In one conversation",
    Rule.Scope.AGENT_USER: "With an agent, in your conversations",
    Rule.Scope.AGENT: "With an agent, in everyone's conversations",
    Rule.Scope.GLOBAL: "With every agent, for everyone",
}


@login_required
@require_GET
def rules_page(request) -> HttpResponse:
    rules = list(rulemaking.visible_rules(request.user)[: RULES_SHOWN + 1])
    sections = [
        {"scope": scope, "heading": heading, "rules": [rule for rule in rules[:RULES_SHOWN] if rule.scope == scope]}
        for scope, heading in SCOPE_HEADINGS.items()
    ]
    context = {
        "sections": [section for section in sections if section["rules"]],
        "is_approver": is_approver(request.user),
        "more": len(rules) > RULES_SHOWN,
        "shown": RULES_SHOWN,
    }
    return render(request, "approvals/rules.html", context)


@login_required
@require_POST
def rule_enable(request, rule_id: int) -> HttpResponse:
    """Disable or enable a rule (`enabled` = "1" or "0"); the decisions it made stand."""
    if request.POST.get("enabled") not in ("0", "1"):
        return HttpResponse("Say enabled=1 or enabled=0.", status=400)
    try:
        rule = rulemaking.set_enabled(request.user, rule_id, request.POST["enabled"] == "1")
    except Rule.DoesNotExist:
        raise Http404("No such rule.") from None
    except rulemaking.ScopeNotAllowed as exc:
        return HttpResponse(str(exc), status=403)
    if rule.enabled:
        said = f"Rule #{rule.pk} enabled: it decides matching calls again."
    else:
        said = f"Rule #{rule.pk} disabled: it decides nothing until it is enabled again."
    if not request.htmx:
        return _back_to_the_page(request, said)
    return HttpResponse(render_to_string("partials/rule_row.html", {"rule": rule}, request) + _status_html(said))


@login_required
@require_POST
def rule_delete(request, rule_id: int) -> HttpResponse:
    """Remove a rule: it stops deciding at once and leaves the page; the decisions it made keep naming it."""
    try:
        rulemaking.remove(request.user, rule_id)
    except Rule.DoesNotExist:
        raise Http404("No such rule.") from None
    except rulemaking.ScopeNotAllowed as exc:
        return HttpResponse(str(exc), status=403)
    said = f"Rule #{rule_id} deleted: it decides nothing any more; the decisions it made keep naming it."
    if not request.htmx:
        return _back_to_the_page(request, said)
    return HttpResponse(_status_html(said))  # no row: the row's outerHTML swap removes it


def _back_to_the_page(request, said: str) -> HttpResponse:
    """Without JavaScript: the page again, saying what the change did."""
    messages.success(request, said)
    return redirect("rules:page")


def _status_html(said: str) -> str:
    """What a change did, for the page's status line (beside the row's swap)."""
    return render_to_string("partials/rules_status.html", {"oob": True, "said": said})
