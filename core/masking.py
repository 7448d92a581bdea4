"""Decision tokens never leave the decision: where one is part of a URL (an email's
`/approve/<token>/`; a password reset's too), what is traced or logged is the route with the token masked. Used by the
telemetry's request hooks (span names and attributes), a filter on the loggers that name a
request's path (Django's "Forbidden: /approve/…"), daphne's access log, and Django's error mail to
ADMINS."""
import logging
import re

MASK = "<token>"

# The routes whose path segment is a token, whatever the segment holds: emaillink's page, Django's
# password reset link (a token as good as a password while it lives), and the Telegram webhook's
# secret path (half of what proves an update comes from Telegram).
TOKEN_ROUTE = re.compile(r"(/approve/|/accounts/reset/[^/?#\s\"']+/|/telegram/webhook/)[^/?#\s\"']+")
# Any value signed by approvals.tokens (Django's signing.dumps: payload:timestamp:signature, in the
# URL-safe base64 alphabet), wherever it stands: another route's path, a query, a message.
SIGNED_VALUE = re.compile(r"[A-Za-z0-9_-]{16,}(?::|%3[Aa])[A-Za-z0-9]{4,}(?::|%3[Aa])[A-Za-z0-9_-]{20,}")


def mask(text: str) -> str:
    """`text` with every decision token in it replaced by <token>."""
    return SIGNED_VALUE.sub(MASK, TOKEN_ROUTE.sub(rf"\g<1>{MASK}", text))


def mask_span(span, *_request) -> None:
    """A request hook (the ASGI and Django instrumentations call it once a server span has its URL
    attributes): the span's name and every string attribute, masked (`http.target`, `http.url`,
    `url.path`, `url.full`, `url.query`...). Later attributes hold no URL (status, route pattern)."""
    if not span.is_recording():
        return
    masked = mask(span.name)
    if masked != span.name:
        span.update_name(masked)
    for key, value in dict(getattr(span, "attributes", None) or {}).items():
        if isinstance(value, str) and mask(value) != value:
            span.set_attribute(key, mask(value))


class MaskTokens(logging.Filter):
    """On a logger (LOGGING in hitl/settings.py): masks the tokens of each record it lets through,
    so every handler downstream, daphne's root handler included, writes the masked line."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a malformed call: the handler reports it as it would without us
            return True
        masked = mask(message)
        if masked != message:
            record.msg, record.args = masked, None
        return True


def mask_daphne_access_log() -> None:
    """Daphne writes its access log ("GET /approve/<token>/" 200 …) straight to a stream, with no
    hook of its own (daphne 4.2): its writer gets the path masked. Safe to call more than once."""
    try:
        from daphne.access import AccessLogGenerator
    except ImportError:  # not under daphne
        return
    if getattr(AccessLogGenerator.write_entry, "masks_tokens", False):
        return
    write_entry = AccessLogGenerator.write_entry

    def masked_write_entry(self, host, date, request, *args, **kwargs):
        return write_entry(self, host, date, mask(request), *args, **kwargs)

    masked_write_entry.masks_tokens = True
    AccessLogGenerator.write_entry = masked_write_entry


def mask_admin_emails() -> None:
    """Django's error mail to ADMINS (AdminEmailHandler) writes the request's URL, its headers (a
    Referer) and each frame's variables, none of which a log filter reaches: its subject and both
    its parts are masked as they are sent, however LOGGING names the handler. Safe to call more than once."""
    from django.utils.log import AdminEmailHandler

    if getattr(AdminEmailHandler.send_mail, "masks_tokens", False):
        return
    send_mail = AdminEmailHandler.send_mail

    def masked_send_mail(self, subject, message, *args, html_message=None, **kwargs):
        html_message = mask(html_message) if html_message else html_message
        return send_mail(self, mask(subject), mask(message), *args, html_message=html_message, **kwargs)

    masked_send_mail.masks_tokens = True
    AdminEmailHandler.send_mail = masked_send_mail
