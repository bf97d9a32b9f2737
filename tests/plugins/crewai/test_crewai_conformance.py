"""The shared plugin conformance suite, run through the CrewAI plugin.

The glue drives CrewAI's own pieces: the governed LLM is called exactly as CrewAI's
executor calls an LLM (``call(messages, tools=<CrewAI's schemas>)``), and the tool step is
CrewAI's ``execute_single_native_tool_call`` — the native executor's dispatch, hooks
included — over tools converted by CrewAI's ``convert_tools_to_openai_schema``.

How a CrewAI request maps onto the suite's neutral request: ``BaseLLM.call`` has no
``tool_choice``, so a forced turn is reported as forced only when both levers were pulled —
the tools passed on were narrowed to exactly the chosen one *and* the published
:class:`~jevqueue.plugins.crewai.ToolConstraint` names it (with parallel calls off). A
prose turn counts as forbidding tools only when no tools were passed on.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from crewai.events.event_listener import event_listener
from crewai.tools import BaseTool
from crewai.utilities.agent_utils import (
    convert_tools_to_openai_schema,
    execute_single_native_tool_call,
    extract_tool_call_info,
)
from jevqueue.plugins.crewai import ApprovalRequest, GovernedLLM, ToolGuard
from jevqueue.plugins.crewai.testing import LLMRequest, ScriptedLLM, tool_call
from jevqueue.testing.conformance import (
    ConformanceTool,
    PluginConformance,
    ProviderReply,
    ProviderRequest,
    ToolCallOutcome,
    ToolCallScenario,
    TurnOutcome,
    TurnScenario,
)
from pydantic import BaseModel, create_model


def crewai_tool(neutral: ConformanceTool) -> BaseTool:
    """A real CrewAI tool whose body is the suite's tool."""
    fields: dict[str, Any] = {name: (str, ...) for name in neutral.parameters["properties"]}
    schema = create_model(f"{neutral.name.title().replace('_', '')}Args", **fields)

    class ConformanceCrewTool(BaseTool):
        name: str = neutral.name
        description: str = neutral.description
        args_schema: type[BaseModel] = schema

        def _run(self, **kwargs: Any) -> str:
            return neutral.run(kwargs)

    return ConformanceCrewTool()


def neutral_request(request: LLMRequest) -> ProviderRequest:
    constraint = request.constraint
    forced = None
    if (
        constraint is not None
        and constraint.force_tool is not None
        and request.tool_names == (constraint.force_tool,)
    ):
        forced = constraint.force_tool
    forbidden = bool(constraint is not None and constraint.forbid_tools and not request.tools)
    return ProviderRequest(
        forced_tool=forced,
        tools_forbidden=forbidden,
        tool_choice_set=constraint is not None,
        parallel_tool_calls=None if constraint is None else constraint.parallel_tool_calls,
        messages=tuple(request.messages),
        tools=request.tool_names,
        raw=request,
    )


def crewai_reply(reply: ProviderReply) -> Any:
    if reply.tool_calls:
        return [tool_call(name, arguments) for name, arguments in reply.tool_calls]
    return reply.text


class ApprovalDesk:
    """The approval callback the glue installs: shows the digest, hands over the records."""

    def __init__(self, records: tuple[Any, ...]) -> None:
        self.records = records
        self.asked: str | None = None

    def __call__(self, request: ApprovalRequest) -> Any:
        self.asked = request.action_digest
        return self.records or None


@contextmanager
def quiet_console() -> Iterator[None]:
    """No crew sets CrewAI's console verbosity here; keep its tool panels off the terminal."""
    formatter = event_listener.formatter
    verbose = formatter.verbose
    formatter.verbose = False
    try:
        yield
    finally:
        formatter.verbose = verbose


def run_calls(response: Any, tools: list[BaseTool]) -> list[str]:
    """CrewAI's native executor step over the reply's tool calls."""
    if not isinstance(response, list):
        return []
    _, available, _ = convert_tools_to_openai_schema(tools)
    with quiet_console():
        return [_run_one(call, available, tools) for call in response]


def _run_one(call: Any, available: dict[str, Any], tools: list[BaseTool]) -> str:
    outcome = execute_single_native_tool_call(
        call,
        available_functions=available,
        original_tools=tools,
        structured_tools=None,
        tools_handler=None,
        agent=None,
        task=None,
        crew=None,
        event_source=object(),
    )
    return outcome.result


class TestCrewAIConformance(PluginConformance):
    """The seven checks with the tool wrappers (``GovernedTool``)."""

    def run_turn(self, turn: TurnScenario) -> TurnOutcome:
        guard = ToolGuard(turn.pep, specs=turn.specs, context=turn.context)
        tools = self.enforce(guard, [crewai_tool(t) for t in turn.tools])
        schemas, _, _ = convert_tools_to_openai_schema(tools)

        def answer(request: LLMRequest) -> Any:
            return crewai_reply(turn.provider.respond(neutral_request(request)))

        llm = GovernedLLM(ScriptedLLM([answer] * 3), turn.governor, guard=guard)
        with self.installed(guard):
            response = llm.call(list(turn.messages), tools=schemas)
            run_calls(response, tools)
        calls: list[tuple[str, dict[str, Any]]] = []
        if isinstance(response, list):
            for call in response:
                info = extract_tool_call_info(call)
                assert info is not None
                arguments = info[2] if isinstance(info[2], dict) else json.loads(info[2])
                calls.append((info[1], arguments))
            model = response[0].get("model") if response else None
        else:
            model = getattr(response, "model", None)
        return TurnOutcome(
            text=response if isinstance(response, str) else "",
            tool_calls=tuple(calls),
            model_id=model,
        )

    def run_tool_call(self, call: ToolCallScenario) -> ToolCallOutcome:
        desk = ApprovalDesk(call.approvals)
        guard = ToolGuard(call.pep, specs=call.specs, context=call.context, approvals=desk)
        tools = self.enforce(guard, [crewai_tool(t) for t in call.tools])
        with self.installed(guard):
            (message,) = run_calls([tool_call(call.tool.name, call.arguments)], tools)
        assert guard.last is not None
        return ToolCallOutcome(
            message=message, is_error=not guard.last.allowed, approval_requested=desk.asked
        )

    # The enforcement form under test: wrappers here, hooks in the subclass.
    def enforce(self, guard: ToolGuard, tools: list[BaseTool]) -> list[BaseTool]:
        return list(guard.wrap(tools))

    @contextmanager
    def installed(self, guard: ToolGuard) -> Iterator[None]:
        yield


class TestCrewAIHookConformance(TestCrewAIConformance):
    """The same seven checks with the hook form (``before_tool_call`` / ``after_tool_call``)."""

    def enforce(self, guard: ToolGuard, tools: list[BaseTool]) -> list[BaseTool]:
        return tools

    @contextmanager
    def installed(self, guard: ToolGuard) -> Iterator[None]:
        with guard.hooks().installed(scoped=True):
            yield
