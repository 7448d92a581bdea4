"""What the approvals' end-to-end tests share."""


def start_on(api, agent_slug: str, text: str) -> str:
    """A conversation with the agent `agent_slug`, started through the JSON API; its id."""
    response = api.post("conversations", {"agent": agent_slug, "message": text})
    assert response.status_code == 201, response.text
    return response.json()["id"]
