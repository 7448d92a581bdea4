"""The profile page: one place to set how you are reached, each surface app adding its section."""
import pytest

from profiles.sections import Section, all_sections, register
from tests.conftest import client_for

pytestmark = pytest.mark.django_db


def test_the_profile_page_shows_each_registered_section_in_order(alice):
    keys = [section.key for section in all_sections()]

    page = client_for(alice).get("/profile/")

    assert page.status_code == 200 and "telegram" in keys
    html = page.content.decode()
    positions = [html.index(f'id="{key}"') for key in keys]
    assert positions == sorted(positions)
    assert "Telegram" in html


def test_the_nav_names_you_and_links_to_your_profile(alice):
    html = client_for(alice).get("/").content.decode()

    assert '<a class="who" href="/profile/"' in html and ">alice</a>" in html


def test_the_profile_page_is_for_people_logged_in(client):
    assert client.get("/profile/").status_code == 302


def test_a_section_registered_twice_is_listed_once():
    from profiles import sections

    section = Section("zz-test", "Test", "telegramlink/profile_section.html", order=999)
    try:
        register(section)
        register(section)
        assert [s.key for s in all_sections()].count("zz-test") == 1
    finally:
        sections._sections.pop("zz-test", None)
