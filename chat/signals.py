"""What the loop tells the apps that listen, never knowing who they are (as approvals.signals)."""
from django.dispatch import Signal

# A run ended: the conversation is idle (the agent answered) or failed (`conversation.error` says
# why). Sent once the status is committed. A chat channel (telegramlink, slacklink) relays the answer.
run_settled = Signal()  # conversation
