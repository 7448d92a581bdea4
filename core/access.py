"""Sockets outlive the checks made when they opened: who may still receive pushes. A change to a
user's access (logout, deactivation, groups, permissions) tells that user's sockets to check again;
each socket also checks again now and then, for what no signal reports (a session deleted or expired)."""
from importlib import import_module

from django.conf import settings
from django.contrib.auth import HASH_SESSION_KEY, SESSION_KEY, get_user_model
from django.contrib.auth.models import Group
from django.db import transaction
from django.utils.crypto import constant_time_compare

from . import live

ACCESS_CHANGED = "access.changed"


def user_group(user_id) -> str:
    return f"user.{user_id}"


def current_user(scope: dict):
    """The socket's user as the database says now, or None: logged out (the session is gone or names
    someone else), deactivated, or deleted, or their password changed since the session began."""
    user = scope.get("user")
    if user is None or not user.is_authenticated:
        return None
    fresh = get_user_model().objects.filter(pk=user.pk, is_active=True).first()
    session = scope.get("session")
    if fresh is None or session is None or not session.session_key:
        return fresh  # no session: a socket made in a test, or by an in-process caller
    stored = import_module(settings.SESSION_ENGINE).SessionStore(session.session_key)
    if str(stored.get(SESSION_KEY)) != str(fresh.pk):
        return None
    session_hash = stored.get(HASH_SESSION_KEY)
    if session_hash and not constant_time_compare(session_hash, fresh.get_session_auth_hash()):
        return None
    return fresh


def tell_access_changed(user_ids) -> None:
    """After the commit, tell each user's open sockets to check their access again (best effort:
    the sockets also check on their own every few pushes)."""
    user_ids = sorted(set(user_ids))
    if user_ids:
        transaction.on_commit(lambda: _send(user_ids), robust=True)


def _send(user_ids) -> None:
    for user_id in user_ids:
        live.send_now(user_group(user_id), {"type": ACCESS_CHANGED})


def on_logged_out(sender, request, user, **kwargs) -> None:
    if user is not None:
        tell_access_changed([user.pk])


def on_user_saved(sender, instance, created=False, update_fields=None, **kwargs) -> None:
    # A new user has no socket yet, and a login only stamps last_login.
    if created or (update_fields and set(update_fields) <= {"last_login"}):
        return
    tell_access_changed([instance.pk])


def on_user_access_changed(sender, instance, action, reverse, model, pk_set, **kwargs) -> None:
    """A user's groups or permissions, seen from either side of the relation."""
    if action in ("post_add", "post_remove", "post_clear") and (pk_set or action == "post_clear"):
        tell_access_changed((pk_set or []) if model is get_user_model() else [instance.pk])


def on_group_permissions_changed(sender, instance, action, reverse, model, pk_set, **kwargs) -> None:
    """A group's permissions: everyone in the group (or groups) concerned."""
    if action in ("post_add", "post_remove", "post_clear") and (pk_set or action == "post_clear"):
        groups = [instance.pk] if isinstance(instance, Group) else list(pk_set or [])
        tell_access_changed(get_user_model().objects.filter(groups__in=groups).values_list("pk", flat=True))
