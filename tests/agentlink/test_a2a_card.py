"""The agent card: the bearer scheme and the agent's skills, text as the only input mode (a new task
with a data or file part is refused), and cached privately with an ETag."""
import pytest

from chat.models import ApiToken, Conversation
from tests.agentlink.a2a_client import CARD, call, rpc

pytestmark = pytest.mark.django_db(transaction=True)  # real commits: the loop runs on them (eager Celery)


def test_the_card_has_the_bearer_scheme_and_the_agents_skills(alice, agent):
    response = call("GET", CARD, token=ApiToken.issue(alice))

    assert response.status_code == 200
    assert response.headers["x-content-type-options"] == "nosniff"
    card = response.json()
    assert card["name"] == agent.name
    assert card["supportedInterfaces"][0]["url"] == "http://localhost/a2a/demo/"
    assert card["capabilities"]["streaming"] is True
    assert card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"] == "Bearer"
    assert card["securityRequirements"] == [{"schemes": {"bearer": {}}}]
    skills = {skill["id"]: skill for skill in card["skills"]}
    assert "may ask a human first" in skills["write_file"]["tags"]
    assert any(tag.startswith("risk:") for tag in skills["write_file"]["tags"])


def test_a_new_task_with_a_data_or_file_part_is_content_type_not_supported_and_the_card_says_text(alice, agent):
    token = ApiToken.issue(alice)
    parts = ([{"text": "hello"}, {"data": {"decision_type": "approve"}}], [{"url": "https://example.com/a.pdf", "mediaType": "application/pdf"}],
             [{"raw": "aGVsbG8=", "mediaType": "image/png"}])

    refusals = [rpc(token, "SendMessage", {"message": {"role": "ROLE_USER", "messageId": f"m{n}", "parts": part}})["error"]
                for n, part in enumerate(parts)]

    assert [refusal["code"] for refusal in refusals] == [-32005] * 3, refusals
    assert "a file part (application/pdf)" in refusals[1]["message"] and "text/plain" in refusals[1]["message"]
    assert not Conversation.objects.exists()
    card = call("GET", CARD, token=token).json()
    assert card["defaultInputModes"] == ["text/plain"]
    assert not any("inputModes" in skill for skill in card["skills"])


def test_the_card_is_cached_privately_with_an_etag_and_a_matching_one_is_304(alice, agent):
    token = ApiToken.issue(alice)
    first = call("GET", CARD, token=token)
    etag = first.headers["etag"]

    again = call("GET", CARD, token=token, headers={"If-None-Match": f'W/"other", {etag}'})
    stale = call("GET", CARD, token=token, headers={"If-None-Match": '"other"'})
    agent.tools = agent.tools[:-1]  # a tool fewer: another card
    agent.save()
    changed = call("GET", CARD, token=token, headers={"If-None-Match": etag})

    assert first.status_code == 200 and etag.startswith('"') and len(etag) == 34
    assert (first.headers["cache-control"], first.headers["vary"]) == ("private, max-age=300", "Authorization")
    assert (again.status_code, again.content, again.headers["etag"]) == (304, b"", etag)
    assert again.headers["cache-control"] == "private, max-age=300"
    assert (stale.status_code, stale.json()) == (200, first.json())
    assert changed.status_code == 200 and changed.headers["etag"] != etag
    answer = call("POST", "/a2a/demo/", token=token, headers={"A2A-Version": "1.0"},
                  json={"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}})
    assert answer.headers.get_list("cache-control") == ["no-store"]  # JSON-RPC answers are never kept
    assert call("GET", CARD).headers.get_list("cache-control") == ["no-store"]  # nor a refusal on the card's path
