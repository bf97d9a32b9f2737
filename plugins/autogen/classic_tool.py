"""``governed_tool``: a classic AutoGen tool whose body runs only after the policy allowed it.

For executors you do not own — a group chat's, or the temporary executor ``run()`` builds
— wrap each function (or ``autogen.tools.Tool``) before you register it::

    weather = governed_tool(lookup_weather, pep=pep, specs=specs, context=context,
                            approver=approver)
    weather.register_for_llm(assistant)      # the model sees the same name and schema
    weather.register_for_execution(executor) # any executor runs the governed body

Each call is judged on its own by :meth:`jevqueue.policy.Guard.check` (``acheck`` for an
``async`` tool; there is no batch to see), with the arguments AutoGen parsed from the
model's JSON, and the body runs through :meth:`~jevqueue.policy.Guard.run` with the
arguments that were judged; a refusal is the guard's message, returned as the tool's
result, so the model reads it and the chat goes on. A tool without a declaration is
refused when it is wrapped, and ``tool.register_for_execution(executor)`` (as ``run()``
and ``register_tool`` use it) refuses an executor that also runs code blocks
(``code_execution_config``, a ``UserProxyAgent``'s default), which no policy would judge.
Prefer :class:`~.classic_policy.PolicyCapability` where you own the executor: it judges a
whole batch before any call of it runs.

What the agent read: a tool body sees its arguments, never the chat. ``guard.run``
records each output in the guard's transcript, so give an agent's governed tools one
:class:`~jevqueue.policy.Guard` (``guard=``) and what one tool returned labels the
arguments of another's calls. Record what the user wrote yourself
(``guard.record_user(message)`` before ``run()``); without it a value the user named that
an output also shows is labelled as read in that output, and needs the approval an
untrusted value needs.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from jevqueue.errors import ConfigurationError
from jevqueue.plugins.autogen._classic_framework import Tool
from jevqueue.plugins.autogen.classic_policy import refuse_code_execution
from jevqueue.policy import Approver, ExecutionContext, Guard, ToolSpec
from jevqueue.policy._approval_request import deprecated_approver

__all__ = ["governed_tool"]


def governed_tool(
    tool: Tool | Callable[..., Any],
    *,
    pep: Any = None,
    specs: Iterable[ToolSpec] | None = None,
    context: ExecutionContext | Mapping[str, Any] | None = None,
    approver: Approver | None = None,
    approval: Approver | None = None,
    name: str | None = None,
    description: str | None = None,
    guard: Guard | None = None,
) -> Tool:
    """Wrap a function or ``autogen.tools.Tool`` so each call is judged before it runs.

    Args:
        tool: The function (plain or ``async``) or tool.
        pep: The policy enforcement point.
        specs: The tools' declarations; one must name this tool.
        context: The execution context, validated now.
        approver: Asked for approval records when a call needs an explicit approval
            (:class:`jevqueue.policy.Approver`, plain or ``async``; raise
            ``ApprovalDeclinedError(reason)`` to decline).
        approval: The former name of ``approver`` (deprecated).
        name: The tool's name, when wrapping a function (default: the function's name).
        description: Its description, when wrapping a function (default: its docstring).
        guard: Instead of ``pep``, ``specs``, ``context`` and ``approver``: a
            :class:`~jevqueue.policy.Guard` shared by the agent's governed tools, so what
            one returned labels the arguments of another's calls (provenance).

    Returns:
        An ``autogen.tools.Tool`` with the same name, description and parameters.

    Raises:
        ConfigurationError: ``tool`` is neither a function nor a tool, no spec names it,
            the approver is not callable or is given under two keywords, or ``guard`` is
            given with (or without) ``pep``, ``specs`` and ``context``.
    """
    if isinstance(tool, Tool):
        base = tool
    elif inspect.isfunction(tool) or inspect.ismethod(tool):
        base = Tool(func_or_tool=tool, name=name, description=description)
    else:
        raise ConfigurationError(
            f"governed_tool wraps a function or an autogen.tools.Tool, not {type(tool).__name__}"
        )
    guard = _guard(guard, pep, specs, context, approver, approval)
    guard.require_declared([base.name])
    inner = base.func
    passed_through = set(getattr(base, "_chat_context_param_names", ()))

    def split(kwargs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], dict[str, type]]:
        judged: dict[str, Any] = {}
        context_args: dict[str, Any] = {}
        models: dict[str, type] = {}
        for key, value in kwargs.items():
            if key in passed_through:
                context_args[key] = value  # AutoGen's injected ChatContext, not an argument
            elif hasattr(value, "model_dump") and hasattr(type(value), "model_validate"):
                judged[key] = value.model_dump(mode="json")
                models[key] = type(value)
            else:
                judged[key] = value
        return judged, context_args, models

    def rebuilt(run: dict[str, Any], models: dict[str, type]) -> dict[str, Any]:
        for key, model in models.items():
            run[key] = model.model_validate(run[key])  # type: ignore[attr-defined]
        return run

    if inspect.iscoroutinefunction(inner):

        @functools.wraps(inner)
        async def body(**kwargs: Any) -> Any:
            judged, context_args, models = split(kwargs)
            judgement = await guard.acheck(base.name, judged)
            if not judgement.allowed:
                return judgement.message

            async def execute(run: dict[str, Any]) -> Any:
                return await inner(**rebuilt(run, models), **context_args)

            return await guard.arun(judgement, execute)

    else:

        @functools.wraps(inner)
        def body(**kwargs: Any) -> Any:
            judged, context_args, models = split(kwargs)
            judgement = guard.check(base.name, judged)
            if not judgement.allowed:
                return judgement.message
            return guard.run(judgement, lambda run: inner(**rebuilt(run, models), **context_args))

    governed = _GovernedTool(func_or_tool=body, name=base.name, description=base.description)
    governed.guard = guard  # its judgements, for inspection
    governed.judge = guard  # the former name
    return governed


def _guard(
    guard: Guard | None,
    pep: Any,
    specs: Iterable[ToolSpec] | None,
    context: ExecutionContext | Mapping[str, Any] | None,
    approver: Approver | None,
    approval: Approver | None,
) -> Guard:
    """The guard given, or one built from the PEP, the declarations and the context."""
    given = [
        keyword
        for keyword, value in (
            ("pep", pep),
            ("specs", specs),
            ("context", context),
            ("approver", approver),
            ("approval", approval),
        )
        if value is not None
    ]
    if guard is not None:
        if not isinstance(guard, Guard):
            raise ConfigurationError(
                f"governed_tool(guard=...) takes a jevqueue Guard, not {type(guard).__name__}"
            )
        if given:
            raise ConfigurationError(
                f"governed_tool takes guard= or pep=, specs= and context=, not both: the "
                f"guard already holds them (also given: {given})"
            )
        return guard
    if pep is None or specs is None or context is None:
        raise ConfigurationError(
            "governed_tool needs pep=, specs= and context= (or guard=, a jevqueue Guard "
            "shared by the agent's governed tools)"
        )
    return Guard(
        pep,
        specs=specs,
        context=context,
        approver=deprecated_approver(approver, "governed_tool", approval=approval),
        owner="governed_tool",
    )


class _GovernedTool(Tool):  # type: ignore[misc]
    """A governed tool: registered for execution only on an executor that runs no code."""

    guard: Guard
    judge: Guard

    def register_for_execution(self, agent: Any) -> None:
        """Register on ``agent``, unless it also executes code blocks (refused: unjudged).

        Raises:
            ConfigurationError: ``agent`` has ``code_execution_config`` set.
        """
        refuse_code_execution(agent)
        super().register_for_execution(agent)
