"""web_fetch against servers that lie: a name that rebinds to loopback, private IPv4 addresses in
IPv6 clothing, a body too large to read whole, and a server that trickles (issue 11, findings 1-2).
Every server here is a loopback server started by the test; what stands for the world outside (DNS
answers, where a public address routes to) is faked at the socket module."""
import datetime
import socket
import ssl
import threading
import time
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace

import pytest
from cryptography import x509  # installed with daphne (autobahn, service-identity)
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from chat.demo_tools import MAX_FETCH_BYTES
from chat.tools import ToolContext, ToolError, registry

PUBLIC = "93.184.216.34"  # a global address the tests never really reach: see `route_public_to`
BIG_BODY = 20 * 1024 * 1024
CHUNK = 64 * 1024


def fetch(tmp_path: Path, url: str, *, allow_private: bool = False) -> str:
    agent = SimpleNamespace(fetch_allowlist=[], allow_private_fetch=allow_private)
    context = ToolContext(conversation_id="c1", agent=agent, sandbox=tmp_path / "box")
    return registry.get("web_fetch").run({"url": url}, context)


@contextmanager
def serve(respond, tls: ssl.SSLContext | None = None):
    """A loopback HTTP server in a thread (HTTPS with `tls`); `respond(handler)` answers each GET.
    Yields the server, whose `requests` lists the (path, Host header) of every request it received."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            server.requests.append((self.path, self.headers.get("Host")))
            try:
                respond(self)
            except OSError:  # the client hung up, as web_fetch does at the cap or the deadline
                pass

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.requests = []
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def answer(text: str):
    def respond(handler):
        body = text.encode()
        handler.send_response(200)
        handler.send_header("Content-Type", "text/plain; charset=utf-8")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    return respond


def route_public_to(monkeypatch, server) -> None:
    """The world outside: connections to PUBLIC reach `server`; others go where they say."""
    real_create_connection = socket.create_connection

    def create_connection(address, *args, **kwargs):
        if address[0] == PUBLIC:
            address = ("127.0.0.1", server.server_port)
        return real_create_connection(address, *args, **kwargs)

    monkeypatch.setattr(socket, "create_connection", create_connection)


def rebind(name: str, monkeypatch) -> list:
    """The world outside: DNS answers PUBLIC for `name` the first time and 127.0.0.1 after, as a
    rebinding attacker's server does. Returns the list of answers given."""
    real_getaddrinfo = socket.getaddrinfo
    answers = []

    def getaddrinfo(host, port, *args, **kwargs):
        if host != name:
            return real_getaddrinfo(host, port, *args, **kwargs)
        answers.append(PUBLIC if not answers else "127.0.0.1")
        return real_getaddrinfo(answers[-1], port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return answers


def test_web_fetch_connects_to_the_address_it_checked_not_a_rebound_one(tmp_path, monkeypatch):
    """DNS rebinding: the name answers a public address first and loopback after. The check and the
    connection must use the one answer, and the request still carries the name in its Host header."""
    with serve(answer("internal secrets")) as internal, serve(answer("the public page")) as public:
        route_public_to(monkeypatch, public)
        answers = rebind("rebind.test", monkeypatch)
        url = f"http://rebind.test:{internal.server_port}/page"
        result = fetch(tmp_path, url)

    assert internal.requests == []
    assert result == "HTTP 200\nthe public page"
    assert public.requests == [("/page", f"rebind.test:{internal.server_port}")]
    assert answers == [PUBLIC]


def certificate_for(name: str, tmp_path: Path) -> tuple[ssl.SSLContext, Path, list]:
    """A server TLS context whose certificate names only `name`, signed by a throwaway CA; the CA's
    file, to trust; and the list of server names (SNI) clients asked it for."""
    now = datetime.datetime.now(datetime.timezone.utc)

    def issue(subject, key, issuer, issuer_key, *, is_ca: bool, san=None):
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
            .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(hours=1))
            .add_extension(x509.BasicConstraints(ca=is_ca, path_length=None), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()), critical=False)
        )
        if is_ca:
            builder = builder.add_extension(
                x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
            )
        if san:
            builder = builder.add_extension(x509.SubjectAlternativeName([x509.DNSName(san)]), critical=False)
        return builder.sign(issuer_key, hashes.SHA256())

    ca_key, leaf_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca = issue("test CA", ca_key, "test CA", ca_key, is_ca=True)
    leaf = issue(name, leaf_key, "test CA", ca_key, is_ca=False, san=name)
    pem = serialization.Encoding.PEM
    (tmp_path / "ca.pem").write_bytes(ca.public_bytes(pem))
    (tmp_path / "leaf.pem").write_bytes(leaf.public_bytes(pem))
    (tmp_path / "leaf.key").write_bytes(
        leaf_key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tmp_path / "leaf.pem", tmp_path / "leaf.key")
    server_names = []
    context.sni_callback = lambda connection, server_name, context: server_names.append(server_name)
    return context, tmp_path / "ca.pem", server_names


def test_web_fetch_pins_https_yet_keeps_the_name_for_sni_and_the_certificate(tmp_path, monkeypatch):
    """The same rebinding over HTTPS: the connection goes to the checked address, and the TLS
    handshake still names the host (SNI) and verifies a certificate that names only the host."""
    tls, ca_file, server_names = certificate_for("rebind.test", tmp_path)
    monkeypatch.setenv("SSL_CERT_FILE", str(ca_file))
    with serve(answer("internal secrets"), tls) as internal, serve(answer("the public page"), tls) as public:
        route_public_to(monkeypatch, public)
        answers = rebind("rebind.test", monkeypatch)
        result = fetch(tmp_path, f"https://rebind.test:{internal.server_port}/page")

    assert internal.requests == []
    assert result == "HTTP 200\nthe public page"
    assert public.requests == [("/page", f"rebind.test:{internal.server_port}")]
    assert server_names == ["rebind.test"]
    assert answers == [PUBLIC]


def test_web_fetch_refuses_private_ipv4_inside_ipv6_forms(tmp_path, monkeypatch):
    """NAT64, local-use NAT64, 6to4, IPv4-mapped and IPv4-compatible forms of 127.0.0.1 or 10.0.0.1
    are private too: refused before any connection is attempted."""
    connected = []

    def create_connection(address, *args, **kwargs):
        connected.append(address[0])
        raise ConnectionRefusedError("nothing answers in this test")

    monkeypatch.setattr(socket, "create_connection", create_connection)
    for address in ["64:ff9b::7f00:1", "64:ff9b::a00:1", "64:ff9b:1::a00:1", "2002:7f00:1::1", "::ffff:127.0.0.1", "::7f00:1"]:
        with pytest.raises(ToolError, match="private address"):
            fetch(tmp_path, f"http://[{address}]:8080/")
    assert connected == []


def test_web_fetch_reads_a_huge_body_only_up_to_the_cap(tmp_path):
    """A 20 MiB body is cut at MAX_FETCH_BYTES and the connection closed: the server never gets to
    send it all. It sends 64 KiB at a time with a short pause, so what it managed to send before the
    client hung up is what the client wanted, not what the kernel's buffers could hold."""
    sent = []
    finished = threading.Event()

    def respond(handler):
        handler.send_response(200)
        handler.send_header("Content-Type", "text/plain")
        handler.send_header("Content-Length", str(BIG_BODY))
        handler.end_headers()
        try:
            while sum(sent) < BIG_BODY:
                handler.wfile.write(b"a" * CHUNK)
                sent.append(CHUNK)
                time.sleep(0.02)
        finally:
            finished.set()

    with serve(respond) as server:
        started = time.monotonic()
        result = fetch(tmp_path, f"http://127.0.0.1:{server.server_port}/", allow_private=True)
        elapsed = time.monotonic() - started
        assert finished.wait(10), "the server was still sending"

    assert sum(sent) < BIG_BODY // 10
    assert elapsed < 2
    assert result == f"HTTP 200\n{'a' * MAX_FETCH_BYTES}\n… cut at {MAX_FETCH_BYTES} bytes"


def test_web_fetch_stops_a_trickling_server_at_the_deadline(tmp_path, settings):
    """A server sending a byte every 0.2 s, status line and headers included, never trips a per-read
    timeout; the whole call still ends at HITL_FETCH_SECONDS with an error the model can read."""
    settings.HITL_FETCH_SECONDS = 1
    response = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 1000\r\n\r\n" + b"a" * 1000

    def respond(handler):
        given_up_at = time.monotonic() + 6  # so the code before the fix ends too, with the test failing
        for byte in response:
            if time.monotonic() > given_up_at:
                return
            handler.wfile.write(bytes([byte]))
            time.sleep(0.2)

    with serve(respond) as server:
        started = time.monotonic()
        with pytest.raises(ToolError, match=r"took longer than 1 s"):
            fetch(tmp_path, f"http://127.0.0.1:{server.server_port}/", allow_private=True)
        elapsed = time.monotonic() - started

    assert 0.9 < elapsed < 2
