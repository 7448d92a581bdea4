"""One web page for web_fetch: the name resolved once and checked, the connection pinned to the
addresses that were checked, and the body read under a byte cap within one deadline."""
import codecs
import ipaddress
import socket
import threading
import time
from dataclasses import dataclass

import httpcore
import httpx

from .tools import ToolError

# Addresses that carry an IPv4 address in their last 32 bits: IPv4-mapped, the old IPv4-compatible
# form and the well-known NAT64 prefix. The kernel or a NAT64 gateway delivers them to that IPv4
# address, yet Python 3.11 calls 64:ff9b::7f00:1 global.
_CARRIES_IPV4 = [ipaddress.ip_network(prefix) for prefix in ("::ffff:0:0/96", "::/96", "64:ff9b::/96")]
_LOCAL_NAT64 = ipaddress.ip_network("64:ff9b:1::/48")  # RFC 8215: for a network's own translators


def is_public(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """Whether `ip` is globally reachable, and so is any IPv4 address it carries (mapped, NAT64, 6to4)."""
    if isinstance(ip, ipaddress.IPv6Address):
        if ip in _LOCAL_NAT64:
            return False
        carried = ip.sixtofour
        if carried is None and any(ip in prefix for prefix in _CARRIES_IPV4):
            carried = ipaddress.IPv4Address(int(ip) & 0xFFFF_FFFF)
        if carried is not None and not carried.is_global:
            return False
    return ip.is_global


class Deadline:
    """One time limit for the whole fetch: resolving, connecting, the TLS handshake, every read and write."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self._at = time.monotonic() + seconds

    def bound(self, timeout: float | None, error: type[Exception]) -> float:
        """`timeout` shortened to the time left; `error` once none is left."""
        left = self._at - time.monotonic()
        if left <= 0:
            raise error(f"the {self.seconds:g} s deadline has passed")
        return left if timeout is None else min(timeout, left)


def resolve(host: str, port: int, deadline: Deadline) -> list[str]:
    """Every address of `host`, asked once. getaddrinfo ignores socket timeouts, so it runs in a
    daemon thread that a stuck resolver cannot hold us on past the deadline."""
    found: list[list[str]] = []

    def ask() -> None:
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError, ValueError):
            return
        found.append(list(dict.fromkeys(str(info[4][0]) for info in infos)))

    worker = threading.Thread(target=ask, name=f"fetch-resolve-{host}", daemon=True)
    worker.start()
    worker.join(deadline.bound(None, ToolError))
    if worker.is_alive():
        raise ToolError(f"Could not resolve {host} within {deadline.seconds:g} s.")
    if not found or not found[0]:
        raise ToolError(f"Could not resolve {host}.")
    return found[0]


def is_public_address(address: str) -> bool:
    """`is_public` of an address as getaddrinfo writes it (an IPv6 one may carry a %scope)."""
    try:
        return is_public(ipaddress.ip_address(address.split("%")[0]))
    except ValueError:
        return False


def refuse_private(host: str, addresses: list[str]) -> None:
    """Refuse the fetch if any address is not public: a name answering one public and one private
    address must not get to choose which the connection uses."""
    for address in addresses:
        if not is_public_address(address):
            raise ToolError(f"Refused: {host} is a private address ({address.split('%')[0]}).")


class _DeadlineStream(httpcore.NetworkStream):
    """A connection whose every read, write and handshake ends by the deadline, so a server sending a
    byte at a time (headers included) cannot keep the call beyond it."""

    def __init__(self, stream: httpcore.NetworkStream, deadline: Deadline):
        self._stream = stream
        self._deadline = deadline

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._stream.read(max_bytes, self._deadline.bound(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._stream.write(buffer, self._deadline.bound(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._stream.close()

    def start_tls(self, ssl_context, server_hostname: str | None = None, timeout: float | None = None):
        timeout = self._deadline.bound(timeout, httpcore.ConnectTimeout)
        return _DeadlineStream(self._stream.start_tls(ssl_context, server_hostname, timeout), self._deadline)

    def get_extra_info(self, info: str):
        return self._stream.get_extra_info(info)


class _PinnedBackend(httpcore.NetworkBackend):
    """Connects to the checked addresses, in order, whatever host httpcore names, so nothing resolves
    the name a second time. The URL itself is unchanged: httpcore still sends its Host header and uses
    its host as TLS server name (SNI) and for the certificate check."""

    def __init__(self, addresses: list[str], deadline: Deadline):
        self._addresses = addresses
        self._deadline = deadline
        self._backend = httpcore.SyncBackend()

    def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        failure: Exception = httpcore.ConnectError(f"no address for {host}")
        for address in self._addresses:
            try:
                stream = self._backend.connect_tcp(
                    address, port, self._deadline.bound(timeout, httpcore.ConnectTimeout), local_address, socket_options
                )
            except httpcore.ConnectError as exc:
                failure = exc
                continue
            return _DeadlineStream(stream, self._deadline)
        raise failure

    def connect_unix_socket(self, path, timeout=None, socket_options=None):
        raise httpcore.ConnectError("web_fetch does not use unix sockets")


class _PinnedTransport(httpx.HTTPTransport):
    def __init__(self, backend: _PinnedBackend):
        ssl_context = httpx.create_ssl_context()
        super().__init__(verify=ssl_context)
        # httpx 0.28 passes no network backend to its pool (encode/httpx#3749 proposes one), so the
        # pool is built again with ours. tests/security/test_web_fetch.py fails if this stops working.
        self._pool = httpcore.ConnectionPool(ssl_context=ssl_context, network_backend=backend)


@dataclass(frozen=True)
class Page:
    status_code: int
    text: str
    is_cut: bool  # the body went on past `max_bytes`


def fetch(url: str, *, allow_private: bool, max_bytes: int, seconds: float) -> Page:
    """GET `url` without following redirects: at most `max_bytes` of its body, within `seconds` in all."""
    deadline = Deadline(seconds)
    try:
        parts = httpx.URL(url)
    except httpx.InvalidURL:
        raise ToolError(f"{url!r} is not a web address.") from None
    host = parts.raw_host.decode("ascii")
    if parts.scheme not in ("http", "https") or not host:
        raise ToolError(f"{url!r} is not an http(s) address with a host.")
    addresses = resolve(host, parts.port or (443 if parts.scheme == "https" else 80), deadline)
    if not allow_private:
        refuse_private(host, addresses)
    transport = _PinnedTransport(_PinnedBackend(addresses, deadline))
    # trust_env=False: a proxy from the environment would resolve the name again, on its side.
    client = httpx.Client(transport=transport, timeout=seconds, follow_redirects=False, trust_env=False)
    try:
        # identity: a compressed body could expand far past the cap within a single read.
        with client, client.stream("GET", url, headers={"Accept-Encoding": "identity"}) as response:
            body, is_cut = _read_capped(response, max_bytes)
    except httpx.TimeoutException:
        raise ToolError(f"Fetching {url} took longer than {seconds:g} s: stopped.") from None
    except httpx.HTTPError as exc:
        raise ToolError(f"Fetching {url} failed: {exc.__class__.__name__}.") from None
    return Page(response.status_code, _decode(body, response.charset_encoding, is_cut=is_cut), is_cut)


def _read_capped(response: httpx.Response, max_bytes: int) -> tuple[bytes, bool]:
    """The first `max_bytes` of the body, and whether it went on. The caller closes the response
    right after, which closes the connection: the rest is never read."""
    body = bytearray()
    for chunk in response.iter_bytes():
        body += chunk
        if len(body) > max_bytes:
            return bytes(body[:max_bytes]), True
    return bytes(body), False


def _decode(body: bytes, charset: str | None, *, is_cut: bool) -> str:
    """The body as text; a character cut in half at the cap is left off rather than garbled."""
    try:
        decoder = codecs.getincrementaldecoder(charset or "utf-8")(errors="replace")
    except LookupError:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    return decoder.decode(body, final=not is_cut)
