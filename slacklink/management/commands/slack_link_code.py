from deliveries.commands import LinkCodeCommand
from slacklink.accounts import issue_code


class Command(LinkCodeCommand):
    help = "Print a one-time code that links a Slack account to the user (send /hitl link <code> in Slack)."
    instructions = "Send in Slack: /hitl link {code}"

    def issue(self, user) -> str:
        return issue_code(user)
