"""What the pushlink tests share: the fake push service each test talks to, and a request pending on
alice's subscribed device."""
import pytest

from tests.conftest import only_pending, start_conversation
from tests.pushlink.devices import requests_to, subscribe
from tests.standins.fake_push import FakePush


@pytest.fixture
def fake(settings):
    with FakePush() as push:
        yield push


@pytest.fixture
def pending(fake, alice, agent):
    """alice's pending write_file approval, its notification on her phone."""
    phone = subscribe(fake, alice)
    approval = only_pending(start_conversation(alice, agent, "write hello to a.txt"))
    (shown,) = requests_to(fake, phone, approval)
    return approval, shown, phone
