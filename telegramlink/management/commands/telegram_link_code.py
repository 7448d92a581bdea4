from deliveries.commands import LinkCodeCommand
from telegramlink.accounts import issue_code


class Command(LinkCodeCommand):
    help = "Print a one-time code that links a Telegram account to the user (send /start <code> to the bot)."
    instructions = "Send to the bot: /start {code}"

    def issue(self, user) -> str:
        return issue_code(user)
