"""The AG-UI side of the site: an ASGI app that hitl.asgi routes `/agui/` to, beside Django.

- `POST /agui/<slug>/`: a `RunAgentInput` (JSON) answered with AG-UI events as server-sent events
  (the `ag-ui-protocol` package's types and EventEncoder): RUN_STARTED, then what the turn does
  (text messages, tool calls and their results, state snapshots), then RUN_FINISHED whose outcome is
  `success`, `interrupt` (the pending approvals, aguilink.interrupts) or `cancelled` (stopped), or
  RUN_ERROR. A run follows the conversation by listening to its channel-layer group and reading the
  rows again at least every second (pushes are best effort), as A2A does.
- `GET /agui/example/`: the example client (clients/agui-example/), which runs on the session of
  whoever is signed in to this site.

Input the run cannot read is a 4xx before the stream starts; what the run cannot do (an interrupt
decided already, a busy thread) is a RUN_ERROR with a code. An error of ours is "internal error"
with an id that the log carries next to the traceback."""
import logging
import re
import time
import uuid
from collections import Counter

from ag_ui.core import RunAgentInput, RunErrorEvent, RunStartedEvent
from ag_ui.encoder import EventEncoder
from csp.utils import build_policy
from django.conf import settings
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from core.inputs import NO_SURROGATES, BadInput, parse_json
from core.live import Listening, conversation_group
from hitl.mounted import Secure, allowed_hosts

from . import runs
from .access import Authenticate
from .pool import database

logger = logging.getLogger(__name__)

PATH = re.compile(r"/agui/(?P<slug>[-a-zA-Z0-9_]{1,50})/")
EXAMPLE_DIR = settings.BASE_DIR / "clients" / "agui-example"
MAX_BODY_BYTES = 1_000_000
MAX_DEPTH = 64  # JSON nesting: far more than a run needs, far less than what recursion in a check can take
RECHECK_SECONDS = 1.0
RUN_SECONDS = 3600  # a run still going after this ends with RUN_ERROR "still_running": run again to follow it
MAX_OPEN_RUNS = settings.HITL_AGUI_RUNS_PER_USER  # per user and daphne process, so one user cannot hold every database thread
PROTOCOL_VERSION = "1.0"

open_runs: Counter = Counter()


async def run(request: Request):
    user, agent = request.scope["hitl_user"], request.scope["hitl_agent"]
    content_type = request.headers.get("content-type", "application/json").split(";")[0].strip().lower()
    if content_type != "application/json":
        return JSONResponse({"detail": "POST the RunAgentInput as application/json."}, status_code=415)
    raw = await request.body()
    try:  # too deep, NaN, or no text (a lone surrogate can be neither stored nor sent back)
        body = parse_json(raw, most_bytes=len(raw), most_depth=MAX_DEPTH, text=NO_SURROGATES)  # a NUL: the field's RUN_ERROR
    except BadInput as exc:
        return JSONResponse({"detail": f"{exc} POST a RunAgentInput."}, status_code=400)
    try:
        run_input = RunAgentInput.model_validate(body)
    except ValidationError as exc:
        errors = [{"loc": list(error["loc"]), "msg": error["msg"]} for error in exc.errors(include_input=False)[:20]]
        return JSONResponse({"detail": "Not a RunAgentInput.", "errors": errors}, status_code=422)
    if open_runs[user.pk] >= MAX_OPEN_RUNS:
        return JSONResponse({"detail": f"You have {MAX_OPEN_RUNS} runs open already: close one, or retry in a second."},
                            status_code=429, headers={"retry-after": "1"})
    open_runs[user.pk] += 1  # now, before any await: runs started together are counted one by one
    return RunResponse(user.pk, stream(run_input, user, agent), media_type=EventEncoder().get_content_type(),
                       headers={"x-accel-buffering": "no"})


class RunResponse(StreamingResponse):
    """The run's stream, which gives its user's place back however it ends: done, failed, or its client gone."""

    def __init__(self, user_id: int, events, **kwargs):
        super().__init__(events, **kwargs)
        self.user_id = user_id

    async def __call__(self, scope, receive, send):
        try:
            await super().__call__(scope, receive, send)
        finally:
            open_runs[self.user_id] -= 1
            if open_runs[self.user_id] <= 0:
                del open_runs[self.user_id]


async def stream(run_input: RunAgentInput, user, agent):
    """The run's events, encoded: it starts, acts, and follows the thread until it pauses or is over."""
    encoder = EventEncoder()
    yield encoder.encode(RunStartedEvent(thread_id=run_input.thread_id, run_id=run_input.run_id, protocol_version=PROTOCOL_VERSION))
    try:
        cursor = await database(runs.begin)(user, agent, run_input)
    except runs.Refused as exc:
        yield encoder.encode(RunErrorEvent(message=exc.message, code=exc.code))
        return
    except Exception:
        yield encoder.encode(_internal_error(run_input, "start"))
        return
    deadline = time.monotonic() + RUN_SECONDS
    try:
        async with Listening(conversation_group(cursor.conversation_id)) as listening:
            while True:
                step = await database(runs.follow)(cursor)
                for event in step.events:
                    yield encoder.encode(event)
                if step.error:
                    yield encoder.encode(RunErrorEvent(message=step.error[0], code=step.error[1]))
                    return
                if step.finished:
                    yield encoder.encode(step.finished)
                    return
                if time.monotonic() >= deadline:
                    yield encoder.encode(RunErrorEvent(
                        message="The run is still going: run again without a new message to follow it.", code="still_running",
                    ))
                    return
                await listening.wait(min(RECHECK_SECONDS, deadline - time.monotonic()))
    except Exception:
        yield encoder.encode(_internal_error(run_input, "follow"))


def _internal_error(run_input: RunAgentInput, where: str) -> RunErrorEvent:
    error_id = uuid.uuid4().hex[:12]
    logger.exception("agui internal error %s (%s of thread %r)", error_id, where, run_input.thread_id[:200])
    return RunErrorEvent(message=f"internal error (id {error_id})", code="internal_error")


runs_app = Authenticate(Starlette(routes=[Route("/agui/{slug}/", run, methods=["POST"])]), path=PATH, database=database,
                        max_body=MAX_BODY_BYTES)
example_app = Starlette(routes=[Mount("/agui/example", StaticFiles(directory=EXAMPLE_DIR, html=True, check_dir=False))])
# The site's own policy, as django-csp gives the pages: the example's scripts are its own files only,
# so text from the agent that reached the DOM as HTML still could not run; and no other site frames it.
EXAMPLE_HEADERS = [(b"content-security-policy", build_policy().encode()), (b"x-frame-options", b"DENY")]


async def example(scope, receive, send):
    async def send_with_policy(message):
        if message["type"] == "http.response.start":
            message = message | {"headers": list(message.get("headers", [])) + EXAMPLE_HEADERS}
        await send(message)

    await example_app(scope, receive, send_with_policy)


async def dispatch(scope, receive, send):
    is_example = scope["path"] == "/agui/example" or scope["path"].startswith("/agui/example/")
    if is_example and scope["method"] in ("GET", "HEAD"):
        return await example(scope, receive, send)
    await runs_app(scope, receive, send)


application = Secure(TrustedHostMiddleware(dispatch, allowed_hosts=allowed_hosts()), name="AG-UI")
