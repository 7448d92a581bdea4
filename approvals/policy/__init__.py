"""What decides whether a call needs a human, and how that is changed and checked.

- `gate`: the one pure decision (risk, four eyes, critical); `calls`: how an edited call is checked
  with its tool's schema and gate (chat registers the checker: approvals never imports chat);
- `rules`, `conditions`: deny, ask and allow rules and what their conditions mean; `rulemaking`:
  making and removing them; `simulate`: what a rule would have done; `explain`: each approval's
  decision path;
- `versions`, `files`, `admin`: numbered policy versions, the policy as a YAML file, the admin's history;
- `api`, `simulate_api`, `forms`, `views`, `urls`: the rules in the JSON API and the rules page (/rules/).

May import: approvals' models, permissions, signals and audit; `approvals.deciders` for routes
(a route is part of the policy document; deciders records its changes as policy versions); the
ground (`hitl`). Never `approvals.services`: the services apply the policy, not the other way."""
