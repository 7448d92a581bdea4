"""Issue 28's policy features attacked as an outsider would: rules made where the maker has no say,
step-up dodged, the simulator and explanations read beyond what one may see."""
import pytest
from django.contrib.auth.models import Group, User

from approvals.models import Approval, Rule
from approvals.routemaking import create_route
from tests.conftest import pending_approvals, start_conversation as start

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def dana(db):
    """A member of the finance group a route names: an approver of routed calls only."""
    user = User.objects.create_user("dana", password="dana-password")
    user.groups.add(Group.objects.get_or_create(name="finance")[0])
    return User.objects.get(pk=user.pk)


@pytest.fixture
def routed(alice, agent, dana):
    """alice's conversation holding a call routed to finance, which dana may therefore see."""
    create_route(created_by=None, agent=agent.slug, tool="delete_file", approvers=["finance"], quorum=1)
    [approval] = pending_approvals(start(alice, agent, "delete a.txt"))
    assert approval.route_id is not None
    return approval


@pytest.mark.parametrize("effect", ["allow", "ask", "deny"])
def test_a_route_member_makes_no_rule_in_the_conversation_of_someone_whose_call_was_routed_to_them(
    alice, dana, routed, api_as, effect
):
    made = api_as(dana).post("rules", {
        "effect": effect, "tool": "write_file", "arguments": {}, "scope": "conversation", "conversation_id": str(routed.conversation_id),
    })
    simulated = api_as(dana).post("rules/simulate", {
        "effect": effect, "tool": "*", "arguments": {}, "scope": "conversation", "conversation_id": str(routed.conversation_id),
    })

    assert made.status_code in (403, 404), made.content
    assert simulated.status_code in (403, 404), simulated.content
    assert not Rule.objects.exists()


def test_the_owner_still_makes_rules_in_their_own_conversation(alice, routed, api_as):
    made = api_as(alice).post("rules", {
        "effect": "ask", "tool": "write_file", "arguments": {}, "scope": "conversation", "conversation_id": str(routed.conversation_id),
    })
    assert made.status_code == 201, made.content
