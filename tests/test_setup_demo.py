"""The demo setup `make run` does before it starts Redis says nothing alarming (issue 23)."""
import io

import pytest
from django.core.management import call_command

pytestmark = pytest.mark.django_db(transaction=True)  # the pushes are sent on commit


def test_the_demo_setup_before_redis_is_up_logs_no_lost_push(settings, caplog):
    settings.CHANNEL_LAYERS = {
        "default": {"BACKEND": "channels_redis.core.RedisChannelLayer", "CONFIG": {"hosts": ["unix:///nonexistent/hitl-redis.sock"]}}
    }
    out = io.StringIO()

    call_command("setup_demo", stdout=out)
    call_command("setup_demo", stdout=out)  # again, as every `make run` does: users exist, groups re-added

    assert not [record.getMessage() for record in caplog.records if "lost" in record.getMessage()]
    assert "createsuperuser" in out.getvalue()
