"""`gate`: a decorator that asks before a function runs, runs it with what was approved, and says
how it went."""
from __future__ import annotations

import functools
import inspect
import json
import logging
from collections.abc import Callable, Mapping
from typing import Any, TypeVar, Union

from .client import AsyncClient, Client
from .decision import Decision
from .errors import HitlError

F = TypeVar("F", bound=Callable[..., Any])
Preview = Mapping[str, str]
log = logging.getLogger("hitl_client")


def gate(
    client: Client | AsyncClient,
    *,
    agent: str,
    tool: str | None = None,
    reason: str | None = None,
    risk: str | None = None,
    preview: Union[Preview, Callable[[dict[str, Any]], Preview], None] = None,
    thread: str | None = None,
    expires_in: int | None = None,
    timeout: float | None = None,
) -> Callable[[F], F]:
    """Gate a function (sync with a `Client`, async with an `AsyncClient`): each call asks `agent`'s
    approval for `tool` (the function's name by default) with the call's arguments by name, waits,
    and runs the function only if approved, with the approved arguments (a human may have edited
    them). It then reports `succeeded` with the result's text, or `failed` with the exception's
    (and re-raises it). Not approved: raises Rejected, Expired, Cancelled or StillPending (after
    `timeout`). `preview` may be a function of the arguments. Arguments must be JSON values."""

    def decorate(function: F) -> F:
        name = tool or function.__name__
        signature = inspect.signature(function)

        def ask(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
            arguments = arguments_of(signature, args, kwargs)
            shown = preview(arguments) if callable(preview) else preview
            return {
                "agent": agent, "tool": name, "arguments": arguments, "reason": reason, "risk": risk,
                "preview": shown, "thread": thread, "expires_in": expires_in, "timeout": timeout,
            }

        if inspect.iscoroutinefunction(function):
            if not isinstance(client, AsyncClient):
                raise TypeError(f"gate an async function ({name}) with an AsyncClient")
            async_client = client

            @functools.wraps(function)
            async def gated_async(*args: Any, **kwargs: Any) -> Any:
                decision = (await async_client.request_approval(**ask(args, kwargs))).raise_for_status()
                approved_args, approved_kwargs = call_of(signature, decision.arguments)
                try:
                    result = await function(*approved_args, **approved_kwargs)
                except Exception as error:
                    await _reported(async_client.report_outcome(decision, "failed", failure_text(error)), decision)
                    raise
                await _reported(async_client.report_outcome(decision, "succeeded", result_text(result)), decision)
                return result

            return gated_async  # type: ignore[return-value]

        if not isinstance(client, Client):
            raise TypeError(f"gate a plain function ({name}) with a Client, or make it async")
        sync_client = client

        @functools.wraps(function)
        def gated(*args: Any, **kwargs: Any) -> Any:
            decision = sync_client.request_approval(**ask(args, kwargs)).raise_for_status()
            approved_args, approved_kwargs = call_of(signature, decision.arguments)
            try:
                result = function(*approved_args, **approved_kwargs)
            except Exception as error:
                _report(lambda: sync_client.report_outcome(decision, "failed", failure_text(error)), decision)
                raise
            _report(lambda: sync_client.report_outcome(decision, "succeeded", result_text(result)), decision)
            return result

        return gated  # type: ignore[return-value]

    return decorate


def arguments_of(signature: inspect.Signature, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The call's arguments by name, defaults included; `**kwargs` flattened in, `*args` as a list."""
    bound = signature.bind(*args, **kwargs)
    bound.apply_defaults()
    arguments: dict[str, Any] = {}
    for name, value in bound.arguments.items():
        kind = signature.parameters[name].kind
        if kind is inspect.Parameter.VAR_KEYWORD:
            arguments.update(value)
        else:
            arguments[name] = list(value) if kind is inspect.Parameter.VAR_POSITIONAL else value
    return arguments


def call_of(signature: inspect.Signature, approved: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    """Positional and keyword arguments that call the function with the approved arguments: the
    inverse of `arguments_of`. An argument the approver removed takes its default."""
    rest = dict(approved)
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    parameters = signature.parameters.values()
    positional = any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in parameters)
    for parameter in parameters:
        kind = parameter.kind
        if kind is inspect.Parameter.VAR_KEYWORD or parameter.name not in rest:
            continue
        value = rest.pop(parameter.name)
        if kind is inspect.Parameter.VAR_POSITIONAL:
            args.extend(value)
        elif kind is inspect.Parameter.POSITIONAL_ONLY or (kind is inspect.Parameter.POSITIONAL_OR_KEYWORD and positional):
            args.append(value)
        else:
            kwargs[parameter.name] = value
    return args, kwargs | rest  # an argument the function does not take fails the call, as it would anyway


def result_text(result: Any) -> str:
    if result is None:
        return ""
    if isinstance(result, str):
        return result
    try:
        return json.dumps(result, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return repr(result)


def failure_text(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"


def _report(report: Callable[[], Decision], decision: Decision) -> None:
    """Report, but never turn a call that ran into an error: the caller must not run it again."""
    try:
        report()
    except HitlError as error:
        log.warning("Could not report the outcome of approval %s: %s", decision.id, error)


async def _reported(report: Any, decision: Decision) -> None:
    try:
        await report
    except HitlError as error:
        log.warning("Could not report the outcome of approval %s: %s", decision.id, error)
