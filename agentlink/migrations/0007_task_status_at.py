from django.db import migrations, models
from django.db.models import Max, OuterRef, Subquery


def settle_closed_tasks(apps, schema_editor):
    """A task closed before this field: its status time is its turn's last message (the nearest
    stored time to when its status last changed), no longer the conversation's."""
    Task = apps.get_model("agentlink", "Task")
    Message = apps.get_model("chat", "Message")
    last_of_turn = (
        Message.objects.filter(
            conversation_id=OuterRef("conversation_id"), position__gte=OuterRef("position"), position__lt=OuterRef("end_position")
        )
        .values("conversation_id")
        .annotate(last=Max("created_at"))
        .values("last")
    )
    Task.objects.filter(end_position__isnull=False, status_at__isnull=True).update(status_at=Subquery(last_of_turn))


class Migration(migrations.Migration):

    dependencies = [
        ('agentlink', '0006_task_hops'),
    ]

    operations = [
        migrations.AddField(
            model_name='task',
            name='status_at',
            field=models.DateTimeField(blank=True, help_text="Once over: when its status last changed (the conversation's updated_at as the next turn found it), its A2A status timestamp from then on, as the conversation moves on without it.", null=True),
        ),
        migrations.RunPython(settle_closed_tasks, migrations.RunPython.noop),
    ]
