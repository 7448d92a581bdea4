"""A rule with memory under load, on the real stack (issue 40, item 3): "at most 2 send_email in
60 s" meets ten conversations that email at the same moment, their turns stored at once by the
worker's threads: exactly two are decided by the rule, the other eight wait for a person (on
PostgreSQL the rule's row lock is the race; on SQLite the file's)."""
from concurrent.futures import ThreadPoolExecutor

import pytest

from approvals.models import Approval, Rule
from tests.conftest import wait_until
from tests.e2e.conftest import Api

pytestmark = pytest.mark.e2e
PEOPLE = 10


def test_at_most_two_in_a_minute_holds_under_ten_concurrent_calls(e2e, alice, agent):
    agent.max_auto_approve_risk = "high"  # send_email is high risk: an allow rule may approve it here
    agent.save()
    rule = Rule.objects.create(
        effect="allow", tool="send_email", scope="global", created_by=alice, at_most={"count": 2, "within_seconds": 60},
    )
    api = Api(e2e.base_url, alice)

    with ThreadPoolExecutor(PEOPLE) as people:
        responses = list(people.map(
            lambda n: api.post("conversations", {"agent": agent.slug, "message": f"email bob@example.com about update {n}"}), range(PEOPLE)
        ))
    assert [r.status_code for r in responses] == [201] * PEOPLE
    ids = [r.json()["id"] for r in responses]
    approvals = Approval.objects.filter(conversation_id__in=ids)
    wait_until(lambda: approvals.count() == PEOPLE, timeout=60, message="every call gated")

    decided = list(approvals.filter(decided_via="rule").values_list("rule_id", flat=True))
    assert decided == [rule.pk, rule.pk], list(approvals.values_list("status", "decided_via"))
    assert approvals.filter(status="pending", rule__isnull=True).count() == PEOPLE - 2
    rule.refresh_from_db()
    assert rule.uses == 2
