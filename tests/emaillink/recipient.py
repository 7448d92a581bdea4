"""The emaillink tests' side of a mailed person: the site's base URL the links start with, a user
given an address, a link's path, its page's form posted from a browser holding the site's CSRF
cookie, and a page's text."""
import re

from django.test import Client

BASE = "https://hitl.example.org"


def with_address(user, address: str | None = None):
    user.email = address or f"{user.username}@example.org"
    user.save(update_fields=["email"])
    return user


def path_of(url: str) -> str:
    assert url.startswith(BASE + "/approve/")
    return url[len(BASE):]


def post(url: str, decision: str, **fields):
    """As the page's form does, from a browser holding the site's CSRF cookie (the page set it)."""
    browser = Client(enforce_csrf_checks=True)
    browser.cookies["csrftoken"] = CSRF
    return browser.post(path_of(url), {"decision": decision, "csrfmiddlewaretoken": CSRF, **fields})


CSRF = "k" * 32


def text_of(response) -> str:
    return re.sub(r"\s+", " ", response.content.decode())
