"""What the approvals tests share: people in groups, as routes name their deciders."""
from django.contrib.auth.models import Group, User


def member(name: str, *groups: str) -> User:
    """A user in `groups` (made when missing), no global approver permission."""
    user = User.objects.create_user(name, password=f"{name}-password")
    for group in groups:
        user.groups.add(Group.objects.get_or_create(name=group)[0])
    return User.objects.get(pk=user.pk)
