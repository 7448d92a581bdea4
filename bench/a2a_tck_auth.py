"""A pytest plugin for running the A2A TCK (a2aproject/a2a-tck) against hitl, which wants a token
on every request: each httpx client the TCK makes sends `Authorization: Bearer $HITL_TCK_TOKEN`
(the TCK has no option for an auth header). Used as docs/a2a.md says:
`PYTHONPATH=<hitl>/bench ./run_tck.py --sut-host http://127.0.0.1:8000/a2a/demo -- -p a2a_tck_auth`."""
import os

import httpx

def pytest_configure(config) -> None:
    token = os.environ.get("HITL_TCK_TOKEN") or ""
    if not token:
        raise SystemExit("Set HITL_TCK_TOKEN to an API token (python manage.py create_api_token <user>).")
    for client_class in (httpx.Client, httpx.AsyncClient):
        _send_token(client_class, token)


def _send_token(client_class, token: str) -> None:
    original = client_class.__init__

    def __init__(self, *args, headers=None, **kwargs):
        headers = dict(headers or {})
        headers.setdefault("Authorization", f"Bearer {token}")
        original(self, *args, headers=headers, **kwargs)

    client_class.__init__ = __init__
