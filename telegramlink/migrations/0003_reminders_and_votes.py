"""Routed approvals on Telegram (issue 25): a request edited as votes come in (`votes_seen`), and one
reminder per sent request when its route's reminder is due (Reminder, an outbox like the messages)."""
import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('telegramlink', '0002_sent_versions'),
    ]

    operations = [
        migrations.AddField(
            model_name='approvalmessage',
            name='votes_seen',
            field=models.PositiveIntegerField(default=0, help_text='How many votes its approval had when its text was last written: fewer than now, and it is edited.'),
        ),
        migrations.CreateModel(
            name='Reminder',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('status', models.CharField(choices=[('queued', 'Queued'), ('sent', 'Sent'), ('closed', 'Closed'), ('failed', 'Failed')], default='queued', max_length=16)),
                ('attempts', models.PositiveIntegerField(default=0)),
                ('last_error', models.CharField(blank=True, max_length=500)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('updated_at', models.DateTimeField(auto_now=True)),
                ('message', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='reminder', to='telegramlink.approvalmessage')),
            ],
            options={
                'indexes': [models.Index(fields=['status', 'updated_at'], name='telegramlink_rem_status_upd')],
            },
        ),
    ]
