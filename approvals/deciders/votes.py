"""How an approval's votes read, for every surface: the API, webhooks, cards, Telegram."""
from ..models import Approval, Vote


def counted(approval: Approval) -> list[Vote]:
    """The votes that count toward the quorum now: those cast on the version the approval shows
    (an edit since makes earlier votes moot). Uses `approval.votes` as prefetched, if it was."""
    return [vote for vote in approval.votes.all() if vote.shown_hash == approval.shown_hash]


def as_dicts(approval: Approval) -> list[dict]:
    """`[{"user", "decided_at", "via", "comment", "on_behalf_of"}]`, oldest first: the votes counted
    (none, and no query, for an approval that needs one person)."""
    if approval.quorum <= 1:
        return []
    return [
        {
            "user": vote.user.get_username(),
            "decided_at": vote.decided_at,
            "via": vote.via,
            "comment": vote.comment,
            "on_behalf_of": vote.on_behalf_of.get_username() if vote.on_behalf_of_id else None,
        }
        for vote in sorted(counted(approval), key=lambda vote: (vote.decided_at, vote.pk))
    ]


def summary(approval: Approval) -> str:
    """"1 of 2 approvals: bob" for a call that needs several; "" for one that needs one person."""
    if approval.quorum <= 1:
        return ""
    names = [vote.user.get_username() + (f" for {vote.on_behalf_of.get_username()}" if vote.on_behalf_of_id else "") for vote in counted(approval)]
    text = f"{len(names)} of {approval.quorum} approvals"
    return f"{text}: {', '.join(names)}" if names else text
