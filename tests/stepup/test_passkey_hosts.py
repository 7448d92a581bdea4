"""Passkeys where the README sends people (issue 38, item 8): WebAuthn refuses an IP address as the
relying party, so the passkey pages decide from the request's host (stepup.hosts) whether passkeys
can work there, and at an IP address say so before anyone tries, linking the same page at a name.
A passkey registered says so in the answer the page shows without a reload (its row)."""
import json
import re

import pytest
from django.test import RequestFactory

from stepup import hosts
from tests.conftest import client_for
from tests.standins.soft_passkey import SoftPasskey

EXPLAINED = "<strong>Passkeys need a name, not an IP address:</strong> browsers refuse 127.0.0.1 as a passkey's site."


@pytest.mark.parametrize(("host", "ip"), [
    ("127.0.0.1", "127.0.0.1"),
    ("127.0.0.1:8000", "127.0.0.1"),
    ("127.0.0.1.", "127.0.0.1"),
    ("[::1]:8000", "::1"),
    ("[::1]", "::1"),
    ("::1", "::1"),
    ("192.168.1.5:80", "192.168.1.5"),
    ("localhost:8000", ""),
    ("LOCALHOST", ""),
    ("hitl.example.com", ""),
    ("testserver", ""),
    ("", ""),
])
def test_an_ip_literal_host_is_told_from_a_name(host, ip):
    assert hosts.ip_address(host) == ip


def request_at(host: str, path: str = "/profile/", *, secure: bool = False):
    return RequestFactory().get(path, HTTP_HOST=host, secure=secure)


@pytest.fixture
def lan(settings):
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "192.168.1.5"]
    return settings


@pytest.mark.parametrize(("host", "url"), [
    ("127.0.0.1:8000", "http://localhost:8000/profile/?x=1"),
    ("127.0.0.1", "http://localhost/profile/?x=1"),
    ("[::1]:9000", "http://localhost:9000/profile/?x=1"),
])
def test_at_a_loopback_address_the_same_page_is_linked_at_localhost_on_the_same_port(host, url):
    assert hosts.ip_host(request_at(host, "/profile/?x=1")) == hosts.IpHost(hosts.ip_address(host), url)


def test_at_a_name_passkeys_can_work_and_nothing_is_said():
    assert hosts.ip_host(request_at("localhost:8000")) is None
    assert hosts.ip_host(request_at("testserver")) is None


def test_https_stays_https_and_the_path_can_be_given():
    assert hosts.ip_host(request_at("127.0.0.1:8443", secure=True), "/profile/#passkeys").url == "https://localhost:8443/profile/#passkeys"


def test_a_lan_address_links_the_configured_name_or_none(lan):
    """localhost on another machine is that machine: only a name the site was given is linked."""
    lan.HITL_BASE_URL = "http://localhost:8000"
    assert hosts.ip_host(request_at("192.168.1.5:8000")) == hosts.IpHost("192.168.1.5", "")
    lan.HITL_BASE_URL = "https://hitl.example.com"
    assert hosts.ip_host(request_at("192.168.1.5:8000")).url == "https://hitl.example.com/profile/"
    lan.HITL_WEBAUTHN_ORIGIN = "https://passkeys.example.com/"
    assert hosts.ip_host(request_at("192.168.1.5:8000")).url == "https://passkeys.example.com/profile/"
    assert hosts.ip_host(request_at("127.0.0.1:8000")).url == "https://passkeys.example.com/profile/"


# --- The profile's passkeys section ------------------------------------------------------------------


def passkeys_section(page: str) -> str:
    return re.search(r'<section class="profile-section" id="passkeys".*?</section>', page, re.S).group(0)


@pytest.mark.django_db
def test_at_127_0_0_1_the_section_explains_links_localhost_and_offers_no_add(alice):
    section = passkeys_section(client_for(alice).get("/profile/", HTTP_HOST="127.0.0.1:8000").content.decode())

    assert EXPLAINED in section
    assert 'Open this page at <a href="http://localhost:8000/profile/#passkeys">http://localhost:8000/profile/</a> instead' in section
    assert re.search(r'<button class="btn" type="submit" disabled aria-describedby="passkey-elsewhere">Add a passkey</button>', section)
    assert re.search(r'id="passkey-password"[^>]* disabled', section)


@pytest.mark.django_db
def test_at_localhost_the_section_offers_the_add_and_says_nothing_of_addresses(alice):
    section = passkeys_section(client_for(alice).get("/profile/", HTTP_HOST="localhost:8000").content.decode())

    assert "Passkeys need a name" not in section and "passkey-elsewhere" not in section
    assert '<button class="btn" type="submit">Add a passkey</button>' in section
    assert "No passkey yet." in section


@pytest.mark.django_db
def test_at_a_lan_address_without_a_name_the_section_says_so_without_a_link(alice, lan):
    lan.HITL_BASE_URL = "http://localhost:8000"
    section = passkeys_section(client_for(alice).get("/profile/", HTTP_HOST="192.168.1.5:8000").content.decode())

    assert "browsers refuse 192.168.1.5 as a passkey" in section and "Open this site at a name that reaches this server" in section
    assert "localhost" not in section


@pytest.mark.django_db(transaction=True)
def test_a_registered_passkey_comes_back_with_the_row_the_list_shows(alice):
    client, key = client_for(alice), SoftPasskey()
    options = client.post("/stepup/passkeys/options/", json.dumps({"password": "alice-password"}), content_type="application/json")
    added = client.post("/stepup/passkeys/", json.dumps({"name": "<b>laptop</b>", "credential": key.create(options.json())}),
                        content_type="application/json")

    assert added.status_code == 201, added.content
    answer = added.json()
    assert answer["name"] == "<b>laptop</b>"
    assert f'<li class="passkey" id="passkey-{answer["id"]}"><strong>&lt;b&gt;laptop&lt;/b&gt;</strong>' in answer["row"]
    assert "never used" in answer["row"] and 'name="csrfmiddlewaretoken"' in answer["row"]
    # The row is the list's own: the page after a reload shows the same (but for its CSRF token's mask).
    unmasked = lambda html: re.sub(r'name="csrfmiddlewaretoken" value="[^"]+"', "", html)  # noqa: E731
    assert unmasked(answer["row"].strip()) in unmasked(passkeys_section(client.get("/profile/").content.decode()))
