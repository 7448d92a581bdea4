"""A real SMTP server on a free local port (aiosmtpd's Controller, in a thread) that keeps every mail
it accepts; tests read them parsed (email.message_from_bytes). It can refuse recipients (a 550, as a
server that knows no such mailbox) and be stopped and started again on the same port (a mail server
down, then back)."""
import email
import re
from email import policy
import socket
import threading
from email.message import Message

from aiosmtpd.controller import Controller


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class _Handler:
    def __init__(self, sink: "SmtpSink"):
        self.sink = sink

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        if address in self.sink.refused:
            return "550 5.1.1 No such mailbox here"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        with self.sink.lock:
            self.sink.raw.append((envelope.mail_from, list(envelope.rcpt_tos), envelope.original_content or envelope.content))
        return "250 Message accepted for delivery"


class SmtpSink:
    def __init__(self, port: int | None = None):
        self.host = "127.0.0.1"
        self.port = port or free_port()
        self.raw: list[tuple[str, list[str], bytes]] = []
        self.refused: set[str] = set()
        self.lock = threading.Lock()
        self.controller: Controller | None = None

    def start(self) -> "SmtpSink":
        self.controller = Controller(_Handler(self), hostname=self.host, port=self.port)
        self.controller.start()
        return self

    def stop(self) -> None:
        if self.controller is not None:
            self.controller.stop()
            self.controller = None

    def __enter__(self) -> "SmtpSink":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def messages(self, to: str | None = None) -> list[Message]:
        """Every mail accepted (for `to` only, if given), parsed (headers decoded), oldest first."""
        with self.lock:
            raw = list(self.raw)
        return [email.message_from_bytes(content, policy=policy.default) for _, rcpt_tos, content in raw if to is None or to in rcpt_tos]


def parts(message: Message) -> dict[str, str]:
    """{"text/plain": ..., "text/html": ...}, decoded."""
    found = {}
    for part in message.walk():
        if part.get_content_maintype() == "text":
            found[part.get_content_type()] = part.get_payload(decode=True).decode(part.get_content_charset() or "utf-8")
    return found


def links(message: Message) -> dict[str, str]:
    """{"approve": ..., "reject": ...}: the decision links of a mail's text part ("Approve (...): <url>")."""
    found = re.findall(r"^(Approve|Reject) \(.*?\): (https?://\S+?)\s*$", parts(message)["text/plain"], re.M)
    return {name.lower(): url for name, url in found}


def link(message: Message) -> str:
    """The Approve link in a mail's text part."""
    return links(message)["approve"]
