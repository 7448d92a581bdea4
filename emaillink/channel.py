"""Email as a channel on the deliveries base: who gets a mail (the deciders with an address who did
not opt out), and the mail itself. A mail cannot be rewritten or taken back: an edit mails the new
version (the old link decides nothing), and once decided, a sent mail's link opens a page saying
who decided. A mail server that is down costs a retry, never a decision: nothing here runs inside one."""
import smtplib

from django.conf import settings
from django.core.mail import EmailMultiAlternatives, get_connection
from django.template.loader import render_to_string

from approvals import tokens
from approvals.deciders import routing, votes
from approvals.models import Approval
from deliveries.channels import Channel
from deliveries.outbox import Failed, Unwanted

from . import texts
from .models import EmailDelivery, EmailPreference

Kind = EmailDelivery.Kind


def enabled() -> bool:
    return settings.HITL_EMAIL_APPROVALS


def opted_in(user) -> bool:
    return bool(user.email) and not EmailPreference.objects.filter(user=user, opted_out=True).exists()


class EmailChannel(Channel):
    name = "email"
    delivery = EmailDelivery
    settings_prefix = "HITL_EMAIL"
    rewrites_in_place = False

    def enabled(self) -> bool:
        return enabled()

    def recipients(self, approval: Approval) -> list:
        """Those who may decide it (approvals.deciders.routing.deciders) with an address, who did not opt out."""
        opted_out = set(EmailPreference.objects.filter(opted_out=True).values_list("user_id", flat=True))
        return [user for user in routing.deciders(approval) if user.is_active and user.email and user.pk not in opted_out]

    def create(self, approval: Approval, user):
        return EmailDelivery.objects.get_or_create(approval=approval, user=user, kind=Kind.REQUEST)

    def requests(self, deliveries):
        return deliveries.filter(kind=Kind.REQUEST)

    def queue_warning(self, row: EmailDelivery, deadline) -> list:
        # One warning a person (the site is where Extend is): an extended deadline mails none again.
        return self._follow_up(row, Kind.WARNING)

    def queue_reminder(self, row: EmailDelivery) -> list:
        return self._follow_up(row, Kind.REMINDER)

    def _follow_up(self, row: EmailDelivery, kind: str) -> list:
        follow_up, created = EmailDelivery.objects.get_or_create(approval_id=row.approval_id, user_id=row.user_id, kind=kind)
        return [(EmailDelivery, follow_up.pk)] if created else []

    def related(self, model) -> tuple[str, ...]:
        return ("user", "approval__tool_call", "approval__conversation__agent", "approval__requested_by")

    def send(self, row: EmailDelivery) -> dict:
        approval, user = row.approval, row.user
        if not user.is_active or not opted_in(user):
            raise Unwanted("The reader opted out, has no address or is inactive.")
        if row.kind != Kind.REQUEST and any(user.pk in (vote.user_id, vote.voter_id) for vote in votes.counted(approval)):
            raise Unwanted("The reader has voted.")
        try:
            compose(approval, user, kind=row.kind).send()
        except (smtplib.SMTPException, OSError) as exc:
            raise Failed(f"{type(exc).__name__}: {exc}", permanent=_permanent(exc)) from None
        return {"address": user.email, "shown_hash": approval.shown_hash}


def compose(approval: Approval, user, *, kind: str = Kind.REQUEST) -> EmailMultiAlternatives:
    """The mail of `kind`, a text part and an HTML part from the call's one summary: a request (or
    its reminder) with Approve and Reject links when the page can decide its kind, else the sentence
    and a link to the conversation; a warning with the deadline and a link to the site (Extend is there)."""
    context = texts.shown(approval) | {"user": user, "kind": kind, "reminder": kind == Kind.REMINDER}
    if kind == Kind.WARNING:
        subject, template = texts.warning_subject(context["summary"]), "emaillink/warning"
    else:
        subject, template = texts.subject(context["summary"], reminder=kind == Kind.REMINDER), "emaillink/mail"
        if context["decided_on_the_page"]:
            context |= decision_links(approval, user)
    mail = EmailMultiAlternatives(
        subject=subject,
        body=render_to_string(f"{template}.txt", context),
        to=[user.email],
        headers={"X-Hitl-Approval": str(approval.pk)},  # for a mail client's filters (and the tests)
        connection=get_connection(timeout=settings.EMAIL_TIMEOUT),
    )
    mail.attach_alternative(render_to_string(f"{template}.html", context), "text/html")
    return mail


def decision_links(approval: Approval, user) -> dict:
    """Approve and Reject as two links, each with a single-use token of its own.

    The Approve token is issued complete (may approve) whatever the mail could show: it opens the
    page, which shows the whole call, and decides only the version it was issued for, so what is
    approved is what that page showed. The Reject token is issued not complete: it opens the reject
    form, and the decision service refuses an approve through it (services.ShownCut, the token left
    unspent), so a forged POST of "approve" with a Reject link's token approves nothing."""
    return {
        "approve_link": texts.link(tokens.issue(approval, user, channel="email", complete=True)),
        "reject_link": texts.reject_link(tokens.issue(approval, user, channel="email", complete=False)),
    }


def _permanent(exc: Exception) -> bool:
    """A 5xx answer (no such mailbox, refused) will not change on a retry; a 4xx or a dead connection may."""
    if isinstance(exc, smtplib.SMTPRecipientsRefused):
        return all(code >= 500 for code, _ in exc.recipients.values())
    return isinstance(exc, smtplib.SMTPResponseException) and exc.smtp_code >= 500


CHANNEL = EmailChannel()
