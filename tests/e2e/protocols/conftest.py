"""What the protocols' end-to-end tests share."""
import pytest

from tests.e2e.a2a_client import A2A


@pytest.fixture
def a2a(e2e):
    """The real `a2a-sdk` client against the session's daphne, for one user: `a2a(alice)`."""
    return lambda user, **kwargs: A2A(e2e.base_url, user, **kwargs)
