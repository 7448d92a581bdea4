"""The audit admin for approvals and webhooks: searchable, filterable, read-only, exportable; and
the routes operators define (made and removed, never changed), with the delegations people made."""
import csv
import json
import logging

from django import forms
from django.contrib import admin
from django.http import HttpResponse
from django.utils import timezone

from core.admin import ExactTimesMixin, ReadOnlyAdminMixin
from core.times import to_the_second

from .policy.admin import PolicyHistoryAdmin

from .deciders import routemaking, votes
from .models import Approval, Delegation, LateDecision, Outcome, PolicyVersion, Route, Rule, Vote, Webhook, WebhookDelivery
from .permissions import may_manage_routes
from .templatetags.approval_tags import edit_diff

logger = logging.getLogger(__name__)

EXPORT_COLUMNS = [
    "id", "status", "tool", "arguments", "risk", "reason", "approver_required", "agent", "conversation",
    "requested_by", "requested_at", "expires_at", "decided_by", "decided_via", "decided_at", "rejection_reason",
    "comment", "edited_by", "edited_arguments", "preview", "chain_position", "previous_hash", "decision_hash",
    "kind", "question", "plan", "answer", "extended_by", "extended_at", "asked_again_from", "late_decisions",
]
# A cell starting with one of these is a formula to a spreadsheet (OWASP, "CSV Injection").
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def neutralised(value) -> str:
    """A cell as text a spreadsheet shows and never runs: a leading quote before a formula's first
    character, as OWASP recommends (the csv module quotes the separators and quotes themselves)."""
    text = "" if value is None else str(value)
    return "'" + text if text.startswith(FORMULA_STARTS) else text


class VoteInline(ExactTimesMixin, ReadOnlyAdminMixin, admin.TabularInline):
    """The votes toward an approval's quorum, in the order cast (each linked into the audit chain)."""

    model = Vote
    fields = ["user", "on_behalf_of", "voter", "via", "decided_at", "comment", "version", "chain_position"]
    readonly_fields = fields
    extra = 0
    can_delete = False

    @admin.display(description="version approved")
    def version(self, vote: Vote) -> str:
        return vote.shown_hash[:12] + "…"  # the whole hash is in the audit export; this tells versions apart


class OutcomeInline(ExactTimesMixin, ReadOnlyAdminMixin, admin.StackedInline):
    """What an outside agent reported of the approved call it ran (chat.outside): once, linked into the audit chain."""

    model = Outcome
    fields = ["status", "result", "reported_by", "reported_at", "version", "chain_position"]
    readonly_fields = fields
    extra = 0
    can_delete = False

    @admin.display(description="version run")
    def version(self, outcome: Outcome) -> str:
        return outcome.shown_hash[:12] + "…"


class LateDecisionInline(ExactTimesMixin, ReadOnlyAdminMixin, admin.TabularInline):
    """Decisions that came after the approval expired: refused (the expiry stands), kept for the audit."""

    model = LateDecision
    fields = ["user", "decision", "via", "arrived_at"]
    readonly_fields = fields
    extra = 0
    can_delete = False


@admin.register(LateDecision)
class LateDecisionAdmin(ExactTimesMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    """Decisions that came too late, for auditors: "they answered, after it expired", never "nobody answered"."""

    list_display = ["approval", "tool_name", "user", "decision", "via", "arrived_at", "expired_at"]
    list_filter = ["decision", "via", ("user", admin.RelatedOnlyFieldListFilter), "arrived_at"]
    search_fields = ["=approval__id", "approval__tool_call__name", "user__username"]
    list_select_related = ["approval__tool_call", "user"]
    date_hierarchy = "arrived_at"
    ordering = ["-arrived_at"]  # the newest first

    @admin.display(description="tool", ordering="approval__tool_call__name")
    def tool_name(self, late: LateDecision) -> str:
        return late.approval.tool_call.name

    @admin.display(description="expired at", ordering="approval__decided_at")
    def expired_at(self, late: LateDecision) -> str:
        return to_the_second(late.approval.decided_at)


@admin.register(Outcome)
class OutcomeAdmin(ExactTimesMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    """Outcomes reported by outside agents, for auditors: what they say happened when they ran an approved call."""

    list_display = ["approval", "tool_name", "status", "reported_by", "reported_at", "chain_position"]
    list_filter = ["status", ("reported_by", admin.RelatedOnlyFieldListFilter), "reported_at"]
    search_fields = ["=approval__id", "approval__tool_call__name", "result", "reported_by__username"]
    list_select_related = ["approval__tool_call", "reported_by"]
    date_hierarchy = "reported_at"
    ordering = ["-reported_at"]

    @admin.display(description="tool", ordering="approval__tool_call__name")
    def tool_name(self, outcome: Outcome) -> str:
        return outcome.approval.tool_call.name


@admin.register(Approval)
class ApprovalAdmin(ExactTimesMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = [
        "id", "tool_name", "kind", "status", "risk", "quorum", "requested_by", "requested_at", "decided_by", "decided_via", "decided_at",
    ]
    list_filter = [
        "kind", "status", "risk", "decided_via", "approver_required", ("conversation__agent", admin.RelatedOnlyFieldListFilter),
        "tool_call__name", ("decided_by", admin.RelatedOnlyFieldListFilter), ("route", admin.RelatedOnlyFieldListFilter),
        "requested_at", "decided_at", ("extended_by", admin.RelatedOnlyFieldListFilter),
    ]
    inlines = [VoteInline, OutcomeInline, LateDecisionInline]
    search_fields = ["tool_call__name", "reason", "rejection_reason", "comment", "requested_by__username", "decided_by__username", "=conversation__id"]
    list_select_related = ["tool_call", "requested_by", "decided_by"]
    date_hierarchy = "requested_at"
    ordering = ["-requested_at"]  # the newest first (the model's own order is the oldest first)
    actions = ["export_csv"]
    readonly_fields = ["edit_as_diff", "votes_counted", "deadline", "asked_again_as"]

    @admin.display(description="deadline")
    def deadline(self, approval: Approval) -> str:
        """When it expires (or expired), and the one extension, if any: who and when."""
        if approval.expires_at is None:
            return "none: it waits until decided"
        text = to_the_second(approval.expires_at)
        if approval.extended_at:
            text += f", extended once by {approval.extended_by.get_username()} at {to_the_second(approval.extended_at)}"
        if approval.warned_at:
            text += f"; warned at {to_the_second(approval.warned_at)}"
        return text

    @admin.display(description="asked again as")
    def asked_again_as(self, approval: Approval) -> str:
        again = approval.asked_again.first()
        return f"approval #{again.pk} ({again.status})" if again else "—"

    @admin.display(description="votes counted")
    def votes_counted(self, approval: Approval) -> str:
        return votes.summary(approval) or "one person decides (quorum 1)"

    @admin.display(description="edit (− requested, + edited)")
    def edit_as_diff(self, approval: Approval) -> str:
        return "\n".join(edit_diff(approval)) if approval.is_edited else "not edited"

    @admin.display(description="tool", ordering="tool_call__name")
    def tool_name(self, approval: Approval) -> str:
        return approval.tool_call.name

    @admin.action(description="Export the selected decisions as CSV")
    def export_csv(self, request, queryset):
        response = HttpResponse(content_type="text/csv")
        response["Content-Disposition"] = f'attachment; filename="decisions-{timezone.now():%Y%m%d-%H%M%S}.csv"'
        writer = csv.writer(response)
        writer.writerow(EXPORT_COLUMNS)
        rows = queryset.select_related("tool_call", "conversation__agent", "requested_by", "decided_by", "edited_by", "extended_by")
        rows = rows.prefetch_related("late_decisions__user")
        for a in rows.order_by("pk"):
            # Every cell: the model writes the arguments, users the reasons, and so on.
            writer.writerow(neutralised(cell) for cell in [
                a.pk, a.status, a.tool_call.name, a.tool_call.arguments, a.risk, a.reason, a.approver_required,
                a.conversation.agent.slug, a.conversation_id, a.requested_by.get_username(), a.requested_at.isoformat(),
                a.expires_at.isoformat() if a.expires_at else "", a.decided_by.get_username() if a.decided_by else "",
                a.decided_via, a.decided_at.isoformat() if a.decided_at else "", a.rejection_reason, a.comment,
                a.edited_by.get_username() if a.edited_by else "", a.edited_arguments if a.is_edited else "",
                a.preview["text"] if a.preview else "", a.chain_position, a.previous_hash, a.decision_hash,
                a.kind, *("" if value is None else json.dumps(value, ensure_ascii=False) for value in (a.question, a.plan, a.answer)),
                a.extended_by.get_username() if a.extended_by else "", a.extended_at.isoformat() if a.extended_at else "",
                a.asked_again_from_id or "",
                "; ".join(f"{late.user.get_username()} {late.decision} via {late.via} at {late.arrived_at.isoformat()}" for late in a.late_decisions.all()),
            ])
        return response


@admin.register(Rule)
class RuleAdmin(PolicyHistoryAdmin):
    """Saved allow and deny rules. Changing or disabling one never changes a past decision (decided
    approvals are final); the decisions it made name it (Approval.rule)."""

    list_display = ["id", "effect", "tool", "scope", "agent", "conversation", "created_by", "uses", "max_uses", "last_used_at", "expires_at", "enabled"]
    list_filter = ["effect", "scope", "enabled", ("agent", admin.RelatedOnlyFieldListFilter)]
    search_fields = ["tool", "note", "created_by__username", "=conversation__id"]
    readonly_fields = ["uses", "last_used_at", "created_at", "deleted_at"]
    raw_id_fields = ["conversation", "created_by"]

    def has_delete_permission(self, request, obj=None) -> bool:
        return False  # disable it instead: the decisions it made keep naming it


@admin.register(Webhook)
class WebhookAdmin(admin.ModelAdmin):
    list_display = ["url", "agent", "is_active", "created_at"]
    list_filter = ["is_active", "agent"]


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["id", "event", "webhook", "approval", "status", "attempts", "last_status_code", "updated_at"]
    list_filter = ["status", "event", "webhook"]
    search_fields = ["webhook__url", "last_error"]


class InForceFilter(admin.SimpleListFilter):
    title = "state"
    parameter_name = "state"

    def lookups(self, request, model_admin):
        return [("in_force", "in force"), ("removed", "removed")]

    def queryset(self, request, queryset):
        if self.value() == "in_force":
            return queryset.filter(deleted_at__isnull=True)
        if self.value() == "removed":
            return queryset.filter(deleted_at__isnull=False)
        return queryset


class RouteForm(forms.ModelForm):
    """A new route, checked as the API checks one (approvals.deciders.routemaking.check_route)."""

    class Meta:
        model = Route
        fields = ["agent", "tool", "min_risk", "approvers", "quorum", "remind_after_seconds", "escalate_after_seconds", "escalate_to"]
        help_texts = {
            "min_risk": "It routes the agent's gated calls of this risk and above.",
            "approvers": "Their members see and decide what the route sends them.",
            "quorum": "How many distinct members must approve; one reject rejects.",
            "remind_after_seconds": "Remind the approvers once after this long undecided; empty: never.",
            "escalate_after_seconds": "After this long undecided the escalation groups may decide too; empty: never.",
        }

    def clean(self) -> dict:
        data = super().clean()
        if self.errors:
            return data
        try:
            routemaking.check_route(
                agent=data["agent"].slug, tool=data.get("tool") or "", min_risk=data.get("min_risk") or "",
                approvers=[group.name for group in data.get("approvers") or []], quorum=data.get("quorum") or 0,
                remind_after_seconds=data.get("remind_after_seconds"), escalate_after_seconds=data.get("escalate_after_seconds"),
                escalate_to=[group.name for group in data.get("escalate_to") or []],
            )
        except routemaking.InvalidRoute as exc:
            raise forms.ValidationError(str(exc)) from None
        return data


@admin.register(Route)
class RouteAdmin(PolicyHistoryAdmin):
    """Routes, for holders of `approvals.manage_route` (superusers have it). Made and removed, never
    changed: the calls a route sent keep it, and changing its groups would change who decides them.
    Removing one (the delete button and action) marks it removed (`deleted_at`) and keeps it."""

    form = RouteForm
    list_display = ["id", "agent_slug", "tool", "min_risk", "approver_groups", "quorum", "delays", "escalation_groups", "in_force"]
    list_filter = [("agent", admin.RelatedOnlyFieldListFilter), InForceFilter]
    list_select_related = ["agent"]
    filter_horizontal = ["approvers", "escalate_to"]
    readonly_fields = ["created_by", "created_at", "deleted_at"]
    search_fields = ["tool", "agent__slug", "approvers__name"]

    def get_queryset(self, request):
        return super().get_queryset(request).prefetch_related("approvers", "escalate_to")

    def get_fields(self, request, obj=None) -> list[str]:
        made = ["created_by", "created_at", "deleted_at"] if obj is not None else []
        return RouteForm.Meta.fields + made

    @admin.display(description="agent", ordering="agent__slug")
    def agent_slug(self, route: Route) -> str:
        return route.agent.slug

    @admin.display(description="remind, escalate")
    def delays(self, route: Route) -> str:
        remind = f"{route.remind_after_seconds} s" if route.remind_after_seconds else "never"
        escalate = f"{route.escalate_after_seconds} s" if route.escalate_after_seconds else "never"
        return f"{remind}, {escalate}"

    @admin.display(description="in force", boolean=True)
    def in_force(self, route: Route) -> bool:
        return route.deleted_at is None

    @admin.display(description="approvers")
    def approver_groups(self, route: Route) -> str:
        return ", ".join(sorted(group.name for group in route.approvers.all()))

    @admin.display(description="escalate to")
    def escalation_groups(self, route: Route) -> str:
        return ", ".join(sorted(group.name for group in route.escalate_to.all()))

    def has_module_permission(self, request) -> bool:
        return may_manage_routes(request.user) or super().has_module_permission(request)

    def has_view_permission(self, request, obj=None) -> bool:
        return may_manage_routes(request.user)

    def has_add_permission(self, request) -> bool:
        return may_manage_routes(request.user)

    def has_change_permission(self, request, obj=None) -> bool:
        return False  # remove it and make another: what it routed keeps the route it had

    def has_delete_permission(self, request, obj=None) -> bool:
        return may_manage_routes(request.user) and (obj is None or obj.deleted_at is None)

    def save_model(self, request, obj: Route, form, change: bool) -> None:
        obj.created_by = request.user
        super().save_model(request, obj, form, change)
        logger.info("route %s made by %s in the admin", obj.pk, request.user)

    def delete_model(self, request, obj: Route) -> None:
        routemaking.remove_route(obj)

    def delete_queryset(self, request, queryset) -> None:
        for route in queryset:
            routemaking.remove_route(route)

    def get_deleted_objects(self, objs, request):
        # Nothing is deleted (the route is marked removed), so nothing it routed stands in the way.
        routes = [route for route in objs if route.deleted_at is None]
        return [str(route) for route in routes], {Route._meta.verbose_name_plural: len(routes)}, set(), []


@admin.register(Delegation)
class DelegationAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Delegations, read-only: each is a link of the audit chain, made and ended on the delegation
    page or the API (approvals.deciders.delegations), never here."""

    list_display = ["id", "delegator", "delegate", "starts_at", "ends_at", "ended_at"]
    list_filter = [("delegator", admin.RelatedOnlyFieldListFilter), ("delegate", admin.RelatedOnlyFieldListFilter)]
    list_select_related = ["delegator", "delegate", "ended_by"]
    search_fields = ["delegator__username", "delegate__username"]


@admin.register(PolicyVersion)
class PolicyVersionAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """The numbered versions of the policy: who, when, what changed (read-only: final, in the audit chain)."""

    list_display = ["number", "created_at", "created_by", "note", "policy_hash"]
    readonly_fields = ["number", "created_at", "created_by", "note", "changes", "policy_hash", "chain_position", "previous_hash", "decision_hash"]
