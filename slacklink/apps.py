from django.apps import AppConfig


class SlackLinkConfig(AppConfig):
    """Slack as one more surface of the decision service: requests go as Block Kit messages to
    those who may decide them, a press decides through approvals.services, and every message
    follows the outcome however it was decided."""

    name = "slacklink"
    verbose_name = "Slack"

    def ready(self) -> None:
        from approvals.signals import (
            approval_edited, approval_extended, approval_requested, approval_voted, approvals_decided, approvals_escalated,
            approvals_expiring, approvals_reminded,
        )
        from profiles.sections import Section, register

        from . import receivers
        from .views import profile_context

        register(Section("slack", "Slack", "slacklink/profile_section.html", order=20, context=profile_context))

        approval_requested.connect(receivers.on_approval_requested, dispatch_uid="slacklink.on_requested")
        approvals_decided.connect(receivers.on_approvals_decided, dispatch_uid="slacklink.on_decided")
        approval_edited.connect(receivers.on_approval_edited, dispatch_uid="slacklink.on_edited")
        approval_voted.connect(receivers.on_approval_voted, dispatch_uid="slacklink.on_voted")
        approvals_reminded.connect(receivers.on_approvals_reminded, dispatch_uid="slacklink.on_reminded")
        approvals_escalated.connect(receivers.on_approvals_escalated, dispatch_uid="slacklink.on_escalated")
        approvals_expiring.connect(receivers.on_approvals_expiring, dispatch_uid="slacklink.on_expiring")
        approval_extended.connect(receivers.on_approval_extended, dispatch_uid="slacklink.on_extended")
