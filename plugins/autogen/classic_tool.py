"""``governed_tool``: a classic AutoGen tool whose body runs only after the policy allowed it.

For executors you do not own — a group chat's, or the temporary executor ``run()`` builds
— wrap each function (or ``autogen.tools.Tool``) before you register it::

    weather = governed_tool(lookup_weather, pep=pep, specs=specs, context=context)
    weather.register_for_llm(assistant)      # the model sees the same name and schema
    weather.register_for_execution(executor) # any executor runs the governed body

Each call is judged on its own (there is no batch to see), with the arguments AutoGen
parsed from the model's JSON; a refusal is returned as the tool's result, so the model
reads it and the chat goes on. Prefer :class:`~.classic_policy.PolicyCapability` where you
own the executor: it judges a whole batch before any call of it runs.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from jevqueue.errors import ConfigurationError
from jevqueue.plugins.autogen._classic_framework import Tool
from jevqueue.plugins.autogen.approval import ApprovalFunc
from jevqueue.plugins.autogen.policy_judge import PolicyJudge
from jevqueue.policy import ExecutionContext, ToolSpec

__all__ = ["governed_tool"]


def governed_tool(
    tool: Tool | Callable[..., Any],
    *,
    pep: Any,
    specs: Iterable[ToolSpec],
    context: ExecutionContext | Mapping[str, Any],
    approval: ApprovalFunc | None = None,
    name: str | None = None,
    description: str | None = None,
) -> Tool:
    """Wrap a function or ``autogen.tools.Tool`` so each call is judged before it runs.

    Args:
        tool: The function (plain or ``async``) or tool.
        pep: The policy enforcement point.
        specs: The tools' declarations; one must name this tool.
        context: The execution context, validated now.
        approval: The approval function (plain or ``async``) for calls that need one.
        name: The tool's name, when wrapping a function (default: the function's name).
        description: Its description, when wrapping a function (default: its docstring).

    Returns:
        An ``autogen.tools.Tool`` with the same name, description and parameters.

    Raises:
        ConfigurationError: ``tool`` is neither a function nor a tool, or no spec names it.
    """
    if isinstance(tool, Tool):
        base = tool
    elif inspect.isfunction(tool) or inspect.ismethod(tool):
        base = Tool(func_or_tool=tool, name=name, description=description)
    else:
        raise ConfigurationError(
            f"governed_tool wraps a function or an autogen.tools.Tool, not {type(tool).__name__}"
        )
    judge = PolicyJudge(pep, specs=specs, context=context, approval=approval)
    if not judge.declared(base.name):
        raise ConfigurationError(
            f"tool {base.name!r} has no policy declaration: add "
            f"tool_spec(tool, side_effects={{...}}) for it to specs"
        )
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
            outcome = await judge.ajudge(base.name, judged)
            if not outcome.allowed:
                return outcome.message
            return await inner(**rebuilt(outcome.run_arguments(), models), **context_args)

    else:

        @functools.wraps(inner)
        def body(**kwargs: Any) -> Any:
            judged, context_args, models = split(kwargs)
            outcome = judge.judge(base.name, judged)
            if not outcome.allowed:
                return outcome.message
            return inner(**rebuilt(outcome.run_arguments(), models), **context_args)

    governed = Tool(func_or_tool=body, name=base.name, description=base.description)
    governed.judge = judge  # type: ignore[attr-defined]  (its judgements, for inspection)
    return governed
