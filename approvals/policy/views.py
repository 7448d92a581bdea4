"""The rules page: the rules a user may see, grouped by scope, each with Disable/Enable and Delete,
and a "New rule" form whose Simulate step shows what the rule would have done before it is saved
(the same rulemaking and simulate functions as the JSON API)."""
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.html import format_html
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRedirect

from . import forms as rule_form, rulemaking, shadow, simulate
from ..models import Rule
from ..permissions import is_approver

REFUSED = {rulemaking.InvalidRule: 400, rulemaking.ScopeNotAllowed: 403, rulemaking.TargetNotFound: 404}

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
    return render(request, "approvals/rules.html", _page_context(request, rule_form.RuleForm()))


@login_required
@require_POST
def rule_new(request) -> HttpResponse:
    """The "New rule" form. Simulate (the default step): what the rule would have done to its
    scope's recent calls, nothing saved. Save: make it, and back to the page."""
    form = rule_form.RuleForm.from_post(request.POST)
    saving = request.POST.get("step") == "save"
    try:
        fields, days = form.rule_fields(), simulate.check_days(form.days_back())
        if saving:
            rule = rulemaking.create(request.user, **fields)
        else:
            simulation = simulate.simulate_for(request.user, days=days, **fields)
    except tuple(REFUSED) as exc:
        return _form_answer(request, form, status=REFUSED[type(exc)], error=str(exc))
    if saving:
        messages.success(request, f"Rule #{rule.pk} saved: {rulemaking.describe(rule)}.")
        return HttpResponseClientRedirect(reverse("rules:page")) if request.htmx else redirect("rules:page")
    return _form_answer(request, form, simulation=simulation)


def _form_answer(request, form, *, status: int = 200, error: str = "", simulation=None) -> HttpResponse:
    """The simulation (or why not) in place of the last one; without JavaScript, the page with it."""
    context = {"form": form, "error": error, "simulation": simulation, "reasons": simulate.REASONS}
    if request.htmx:
        return render(request, "partials/rule_simulation.html", context, status=status)
    return render(request, "approvals/rules.html", {**_page_context(request, form), **context, "form_open": True}, status=status)


def _page_context(request, form) -> dict:
    rules = list(rulemaking.visible_rules(request.user)[: RULES_SHOWN + 1])
    shadow.attach_counts(rules[:RULES_SHOWN])
    sections = [
        {"scope": scope, "heading": heading, "rules": [rule for rule in rules[:RULES_SHOWN] if rule.scope == scope]}
        for scope, heading in SCOPE_HEADINGS.items()
    ]
    return {
        "sections": [section for section in sections if section["rules"]],
        "is_approver": is_approver(request.user),
        "more": len(rules) > RULES_SHOWN,
        "shown": RULES_SHOWN,
        "form": form,
        "choices": rule_form.choices_for(request.user),
        "reasons": simulate.REASONS,
    }


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
    if request.htmx and request.POST.get("from") == "card":  # undone on the card that saved it
        return HttpResponse(format_html('<p class="rule-saved rule-undone" role="status">Rule #{} removed: calls like this ask again.</p>', rule_id))
    said = f"Rule #{rule_id} deleted: it decides nothing any more; the decisions it made keep naming it."
    if not request.htmx:
        return _back_to_the_page(request, said)
    return HttpResponse(_status_html(said))  # no row: the row's outerHTML swap removes it


@login_required
@require_POST
def rule_promote(request, rule_id: int) -> HttpResponse:
    """Make a shadow rule live (a new policy version): it decides matching calls from now on."""
    try:
        rule = rulemaking.promote(request.user, rule_id)
    except Rule.DoesNotExist:
        raise Http404("No such rule.") from None
    except rulemaking.ScopeNotAllowed as exc:
        return HttpResponse(str(exc), status=403)
    except shadow.NotShadow as exc:
        return HttpResponse(str(exc), status=409)
    said = f"Rule #{rule.pk} is live: it decides matching calls from now on."
    if not request.htmx:
        return _back_to_the_page(request, said)
    shadow.attach_counts([rule])
    return HttpResponse(render_to_string("partials/rule_row.html", {"rule": rule}, request) + _status_html(said))


def _back_to_the_page(request, said: str) -> HttpResponse:
    """Without JavaScript: the page again, saying what the change did."""
    messages.success(request, said)
    return redirect("rules:page")


def _status_html(said: str) -> str:
    """What a change did, for the page's status line (beside the row's swap)."""
    return render_to_string("partials/rules_status.html", {"oob": True, "said": said})
