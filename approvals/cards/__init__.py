"""What a decider is shown of a call, shared by the chat card, the dashboard and every channel:
`titles` (a call in words, "Delete notes.txt"), `hints` (what the tool's server says of it),
`fragments` (a card's decision controls and claim line). May import approvals' models only: what
Approve will do in words is approvals.summary, built on these."""
