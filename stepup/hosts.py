"""Where passkeys can work. WebAuthn takes a domain as the relying party, never an IP address: at
http://127.0.0.1:8000/ the browser refuses the ceremony ("This is an invalid domain"). The passkey
pages decide it here, from the host the request came to, and say so before anyone tries, with the
same page at an address that works."""
import ipaddress
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.conf import settings
from django.http.request import split_domain_port


@dataclass(frozen=True)
class IpHost:
    """The page was opened at an IP address: passkeys cannot work here."""

    ip: str  # "127.0.0.1", "::1"
    url: str  # the same page at a name ("http://localhost:8000/profile/"), "" when none is known


def ip_address(host: str) -> str:
    """The IP address a Host (with or without its port, IPv6 in brackets or not) names, or ""
    when it names a domain."""
    host = host.strip().lower()
    try:
        return str(ipaddress.ip_address(host.strip("[]")))  # a bare IPv6 address, colons and all
    except ValueError:
        pass
    domain, _ = split_domain_port(host)
    try:
        return str(ipaddress.ip_address(domain.strip("[]")))
    except ValueError:
        return ""


def ip_host(request, path: str | None = None) -> IpHost | None:
    """None when passkeys can work at the request's host; else the IP and `path` (the request's own
    by default) at a name: the configured WebAuthn origin, else for a loopback address localhost on
    the same port (the same machine), else HITL_BASE_URL when it names another host. A LAN address
    has no name we know unless one is configured (localhost would be the visitor's own machine)."""
    host = request.get_host()
    ip = ip_address(host)
    if not ip:
        return None
    path = request.get_full_path() if path is None else path
    if settings.HITL_WEBAUTHN_ORIGIN:
        return IpHost(ip, settings.HITL_WEBAUTHN_ORIGIN.rstrip("/") + path)
    if ipaddress.ip_address(ip).is_loopback:
        port = split_domain_port(host)[1]
        return IpHost(ip, f"{request.scheme}://localhost{':' + port if port else ''}{path}")
    base = urlsplit(settings.HITL_BASE_URL)
    if base.hostname and not ip_address(base.netloc) and base.hostname != "localhost":
        return IpHost(ip, f"{base.scheme}://{base.netloc}{path}")
    return IpHost(ip, "")
