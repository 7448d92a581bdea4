"""What the outside-attack tests (test_outside_*.py) share: the demo agent's deploy routed to the
release group (carol in it), and a member of it who is not a global approver."""
import pytest
from django.contrib.auth.models import Group, User

from approvals.models import Route


@pytest.fixture
def deploy_route(gated_deploy, carol):
    group = Group.objects.create(name="release")
    route = Route.objects.create(agent=gated_deploy, tool="deploy")
    route.approvers.add(group)
    carol.groups.add(group)
    return route


@pytest.fixture
def member(deploy_route):
    """A route member who is not a global approver."""
    user = User.objects.create_user("dora", password="dora-password")
    user.groups.add(Group.objects.get(name="release"))
    return user
