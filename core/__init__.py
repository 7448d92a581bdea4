"""The ground every app of hitl stands on: pushing HTML to live pages and the sockets that receive
it (`live`, `consumers`, `access`), database connections for threads that wait (`db`, the SQLite
backend), reading untrusted input alike on every surface (`inputs`, `visible`), masking tokens in
logs and traces (`masking`), OpenTelemetry (`telemetry`), the middleware and the template filters
every page uses. It imports no other app of the project; the composition that does (settings, URLs,
ASGI, the JSON API, the Celery app) is `hitl/`."""
