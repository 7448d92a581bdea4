"""Issue 35 item 5: Telegram's outbox on the deliveries base. A message now stores with it what its
last send showed (shown_hash, complete) and the deadline its reader was warned of (warned_for):
filled for the messages already sent from their newest SentVersion and newest ExpiryWarning, so
the sweep neither rewrites nor warns them again."""
from django.db import migrations, models
from django.db.models import OuterRef, Subquery


def fill_from_versions_and_warnings(apps, schema_editor):
    ApprovalMessage = apps.get_model("telegramlink", "ApprovalMessage")
    SentVersion = apps.get_model("telegramlink", "SentVersion")
    ExpiryWarning = apps.get_model("telegramlink", "ExpiryWarning")
    newest = SentVersion.objects.filter(message=OuterRef("pk")).order_by("-pk")
    warned = ExpiryWarning.objects.filter(message=OuterRef("pk")).order_by("-expires_at")
    ApprovalMessage.objects.filter(versions__isnull=False).update(
        shown_hash=Subquery(newest.values("shown_hash")[:1]), complete=Subquery(newest.values("complete")[:1])
    )
    ApprovalMessage.objects.filter(warnings__isnull=False).update(warned_for=Subquery(warned.values("expires_at")[:1]))


class Migration(migrations.Migration):

    dependencies = [
        ('approvals', '0025_expiry_warnings_and_shown_whole'),
        ('telegramlink', '0004_complete_and_warnings'),
    ]

    operations = [
        migrations.AddField(
            model_name='approvalmessage',
            name='complete',
            field=models.BooleanField(default=False, help_text='Whether its last send showed the whole call: only then could it approve (else reject only).'),
        ),
        migrations.AddField(
            model_name='approvalmessage',
            name='shown_hash',
            field=models.CharField(blank=True, help_text='The version its last send showed.', max_length=64),
        ),
        migrations.AddField(
            model_name='approvalmessage',
            name='warned_for',
            field=models.DateTimeField(blank=True, help_text='The deadline its reader was warned of.', null=True),
        ),
        migrations.AddConstraint(
            model_name='approvalmessage',
            constraint=models.CheckConstraint(condition=models.Q(('status__in', ['queued', 'sent', 'closed', 'failed'])), name='telegramlink_message_status_valid'),
        ),
        migrations.RunPython(fill_from_versions_and_warnings, migrations.RunPython.noop),
    ]
