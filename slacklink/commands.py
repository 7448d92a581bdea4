"""The slash command `/hitl`: `link <code>` links the Slack user who sent it, `unlink` undoes it;
anything else is answered with how to use it. Its answer is ephemeral: only the sender sees it."""
from deliveries.models import LinkRefused

from . import accounts

USAGE = "Send /hitl link <code> with the code from your profile page on the site; /hitl unlink unlinks this Slack account."


def handle(form) -> str:
    """What to answer the command's sender with, from the signed form Slack posted."""
    team_id, slack_user_id = form.get("team_id", ""), form.get("user_id", "")
    word, _, rest = form.get("text", "").strip().partition(" ")
    if not team_id or not slack_user_id:
        return "This command came without a Slack user."
    if word.lower() == "link":
        if not rest.strip():
            return USAGE
        try:
            account = accounts.link(rest.strip(), team_id=team_id, slack_user_id=slack_user_id, slack_username=form.get("user_name", ""))
        except LinkRefused as exc:
            return str(exc)
        return f"Linked to {account.user.get_username()}. Requests that you may decide will come to your messages with this app."
    if word.lower() == "unlink":
        account = accounts.unlink_slack(team_id, slack_user_id)
        return f"Unlinked from {account.user.get_username()}." if account else "This Slack account is not linked."
    return USAGE
