"""A press decides the version its own message showed (SentVersion), not the one stored per person:
each message's token and shown hash move to a SentVersion, so buttons sent before still work."""
import django.db.models.deletion
from django.db import migrations, models

import telegramlink.models


def keep_sent_tokens(apps, schema_editor):
    ApprovalMessage = apps.get_model("telegramlink", "ApprovalMessage")
    SentVersion = apps.get_model("telegramlink", "SentVersion")
    SentVersion.objects.bulk_create(
        SentVersion(message_id=pk, token=token, shown_hash=shown_hash)
        for pk, token, shown_hash in ApprovalMessage.objects.values_list("pk", "token", "shown_hash").iterator()
    )


class Migration(migrations.Migration):

    dependencies = [
        ('telegramlink', '0001_initial'),
    ]

    operations = [
        migrations.CreateModel(
            name='SentVersion',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('token', models.CharField(default=telegramlink.models.new_token, help_text='What its buttons carry.', max_length=32, unique=True)),
                ('shown_hash', models.CharField(blank=True, help_text='Approval.shown_hash as the text rendered it.', max_length=64)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('message', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='versions', to='telegramlink.approvalmessage')),
            ],
        ),
        migrations.RunPython(keep_sent_tokens, migrations.RunPython.noop),
        migrations.RemoveField(
            model_name='approvalmessage',
            name='shown_hash',
        ),
        migrations.RemoveField(
            model_name='approvalmessage',
            name='token',
        ),
        migrations.AddField(
            model_name='telegramaccount',
            name='awaiting_shown_hash',
            field=models.CharField(blank=True, max_length=64),
        ),
        migrations.AlterField(
            model_name='approvalmessage',
            name='message_id',
            field=models.BigIntegerField(blank=True, help_text='The newest delivered copy, edited to the outcome.', null=True),
        ),
    ]
