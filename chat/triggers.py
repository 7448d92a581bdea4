"""A database trigger that keeps a finished tool call as it finished: no column of it changes and the
row is never deleted, even by raw SQL (SQLite and PostgreSQL); installed after every `migrate`.

Only finished calls: a call still pending approval, approved or running moves on by the loop's
conditional updates. Deleting is allowed while `approvals.audit.triggers.erasing()` (the test flush).
"""
from django.db import DEFAULT_DB_ALIAS

from approvals.audit.triggers import install

from .models import ToolCall

FINISHED = "OLD.status IN ({})".format(", ".join(f"'{status}'" for status in ToolCall.FINISHED))


def install_finished_is_final(using: str = DEFAULT_DB_ALIAS, **kwargs) -> None:
    install(
        using,
        table=ToolCall._meta.db_table,
        name="chat_finished_call",
        final=FINISHED,
        update_message="a finished tool call is final",
        delete_message="a finished tool call is never deleted",
    )
