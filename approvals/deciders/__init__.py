"""Who may decide a gated call, and how many must: in an organisation's words.

- `routing`: routes (an agent's calls, by tool and risk, to approver groups; a quorum), who acts for
  whom, what an asking token may not do; `routemaking`, `route_api`: making and removing routes;
- `delegations`, `delegation_api`, `views`, `urls`: handing one's approvals to a colleague for a
  while (the page at /approvals/delegations/);
- `escalation`: reminders and escalation of routed calls nobody decided in time (run by beat);
- `votes`: how a quorum's votes read, for every surface.

May import: approvals' models, permissions, selectors, signals and audit; `approvals.policy`'s
versions and gate (a route's changes are policy versions), `approvals.announcements.webhooks`
(escalation's outbox); the ground (`hitl`). Never `approvals.services`."""
