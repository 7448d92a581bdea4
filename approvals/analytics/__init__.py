"""How approvals are decided, over a window of days, for approvers: `selectors` (the figures,
aggregated in SQL), `chart` (their geometry), `api` (GET /api/analytics), `views` and `urls` (the
page at /approvals/analytics/). Reads only: may import approvals' models and permissions, nothing
that writes."""
