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

from crewai import Agent, Crew, Task
from crewai.events.event_listener import event_listener
from crewai.tools import BaseTool
from crewai.utilities.agent_utils import (
    convert_tools_to_openai_schema,
    execute_single_native_tool_call,
    extract_tool_call_info,
)
from jevqueue.errors import ConfigurationError
from jevqueue.plugins.crewai import GovernedLLM, ToolGuard
from jevqueue.plugins.crewai.testing import LLMRequest, ScriptedLLM, tool_call
from jevqueue.testing.conformance import (
    ConformanceTool,
    PluginConformance,
    PolicyHarness,
    ProviderReply,
    ProviderRequest,
    RouteAttempt,
    ToolBatchScenario,
    ToolCallOutcome,
    ToolCallScenario,
    ToolConversationScenario,
    TurnOutcome,
    TurnScenario,
)
from pydantic import BaseModel, Field, create_model


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
    """Every conformance check with the tool wrappers (``GovernedTool``)."""

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
        guard = ToolGuard(call.pep, specs=call.specs, context=call.context, approver=call.approver)
        tools = self.enforce(guard, [crewai_tool(t) for t in call.tools])
        with self.installed(guard):
            (message,) = run_calls(
                [tool_call(call.tool.name, call.arguments, call_id=call.call_id)], tools
            )
        assert guard.last is not None
        return ToolCallOutcome(
            message=message,
            is_error=not guard.last.allowed,
            approval_requested=call.approver.asked,
        )

    def run_tool_batch(self, batch: ToolBatchScenario) -> list[ToolCallOutcome]:
        """One model message with three native calls, run by a real Crew's executor.

        CrewAI has no native pause: the approver is asked inline, while the executor runs
        the batch, and nothing is re-executed.
        """
        guard = ToolGuard(
            batch.pep, specs=batch.specs, context=batch.context, approver=batch.approver
        )
        tools = self.enforce(guard, [crewai_tool(t) for t in batch.tools])
        message = [tool_call(name, arguments, call_id=cid) for name, arguments, cid in batch.calls]
        llm = ScriptedLLM([message, "Done."])
        with self.installed(guard), quiet_console():
            crew(llm, tools).kickoff()
        llm.assert_complete()
        results = {
            m.get("tool_call_id"): str(m.get("content"))
            for m in llm.requests[1].messages
            if m.get("role") == "tool"
        }
        judged = {j.tool: j for j in guard.judgements}
        return [
            ToolCallOutcome(
                message=results[cid],
                is_error=not judged[name].allowed,
                approval_requested=judged[name].approval_requested,
            )
            for name, _, cid in batch.calls
        ]

    def run_tool_conversation(
        self, conversation: ToolConversationScenario
    ) -> list[list[ToolCallOutcome]]:
        """A real Crew: the user's request is the task's description, and each model
        message is one reply of the agent's model, run by CrewAI's executor."""
        guard = ToolGuard(
            conversation.pep,
            specs=conversation.specs,
            context=conversation.context,
            approver=conversation.approver,
        )
        tools = self.enforce(guard, [crewai_tool(t) for t in conversation.tools])
        replies = [
            [tool_call(name, arguments, call_id=cid) for name, arguments, cid in message]
            for message in conversation.messages
        ]
        model = ScriptedLLM([*replies, "Done."])
        one = agent(guard, tools, reply=model, max_iter=len(replies) + 2)
        task = Task(description=conversation.user_request, expected_output="Done.", agent=one)
        with self.installed(guard), quiet_console():
            Crew(agents=[one], tasks=[task], verbose=False).kickoff()
        model.assert_complete()
        judged = {j.call_id: j for j in guard.judgements if j.call_id is not None}
        outcomes = []
        for index, message in enumerate(conversation.messages):
            results = {
                m.get("tool_call_id"): str(m.get("content"))
                for m in model.requests[index + 1].messages
                if m.get("role") == "tool"
            }
            outcomes.append(
                [
                    ToolCallOutcome(
                        message=results[cid],
                        is_error=not judged[cid].allowed,
                        approval_requested=judged[cid].approval_requested,
                    )
                    for _, _, cid in message
                ]
            )
        return outcomes

    def routes_around_the_guard(self, policy: PolicyHarness) -> list[RouteAttempt]:
        tools = [crewai_tool(t) for t in conformance_tools_of(policy)]
        guard = ToolGuard(policy.pep, specs=policy.specs, context=policy.context)
        wrapped = self.enforce(guard, tools)
        undeclared = undeclared_tool()
        with self.installed(guard):
            return [
                self.undeclared_route(guard, undeclared, policy),
                attempt(
                    "code execution (allow_code_execution=True)",
                    lambda: kickoff(guard, wrapped, allow_code_execution=True),
                    undeclared,
                ),
                self.delegation_route(guard, wrapped, undeclared, policy),
                *self.unwrapped_routes(guard, wrapped, undeclared),
            ]

    def undeclared_route(
        self, guard: ToolGuard, undeclared: BaseTool, policy: PolicyHarness
    ) -> RouteAttempt:
        return attempt("undeclared tool", lambda: guard.wrap([undeclared]), undeclared)

    def delegation_route(
        self,
        guard: ToolGuard,
        wrapped: list[BaseTool],
        undeclared: BaseTool,
        policy: PolicyHarness,
    ) -> RouteAttempt:
        return attempt(
            DELEGATION,
            lambda: kickoff(guard, wrapped, allow_delegation=True, coworker=True),
            undeclared,
        )

    def unwrapped_routes(
        self, guard: ToolGuard, wrapped: list[BaseTool], undeclared: BaseTool
    ) -> list[RouteAttempt]:
        """Tools that never pass through a wrapper; refused while no hooks judge them."""
        return [
            attempt(
                "a plain tool added to the agent after wrapping",
                lambda: kickoff(guard, wrapped, added=undeclared),
                undeclared,
            ),
            attempt(
                "MCP tools (mcps=)",
                lambda: first_turn(guard, wrapped, mcps=["https://mcp.example.com/sse"]),
                undeclared,
            ),
            attempt(
                "CrewAI platform apps (apps=)",
                lambda: first_turn(guard, wrapped, apps=["gmail"]),
                undeclared,
            ),
            attempt(
                "a hooks guard built but never installed",
                lambda: (guard.hooks(), kickoff(guard, [*wrapped, undeclared]))[1],
                undeclared,
            ),
        ]

    # The enforcement form under test: wrappers here, hooks in the subclass.
    def enforce(self, guard: ToolGuard, tools: list[BaseTool]) -> list[BaseTool]:
        return list(guard.wrap(tools))

    @contextmanager
    def installed(self, guard: ToolGuard) -> Iterator[None]:
        yield


class TestCrewAIHookConformance(TestCrewAIConformance):
    """The same checks with the hook form (``before_tool_call`` / ``after_tool_call``)."""

    def enforce(self, guard: ToolGuard, tools: list[BaseTool]) -> list[BaseTool]:
        return tools

    @contextmanager
    def installed(self, guard: ToolGuard) -> Iterator[None]:
        with guard.hooks().installed(scoped=True):
            yield

    def undeclared_route(
        self, guard: ToolGuard, undeclared: BaseTool, policy: PolicyHarness
    ) -> RouteAttempt:
        """Under the hooks an undeclared tool is judged when called: refused, audited."""
        (message,) = run_calls([tool_call(undeclared.name, {"path": "x"})], [undeclared])
        assert "no policy declaration" in message or "not registered" in message, message
        return RouteAttempt(
            "undeclared tool",
            refused=False,
            ran=bool(undeclared.ran),  # type: ignore[attr-defined]
            audited=audited(policy, undeclared.name),
        )

    def delegation_route(
        self,
        guard: ToolGuard,
        wrapped: list[BaseTool],
        undeclared: BaseTool,
        policy: PolicyHarness,
    ) -> RouteAttempt:
        """Under the hooks CrewAI's delegation tool is judged when the model calls it."""
        delegate = tool_call(
            "delegate_work_to_coworker",
            {"task": "Erase the disk.", "context": "Now.", "coworker": "Coworker"},
        )
        coworker = kickoff(guard, wrapped, allow_delegation=True, coworker=True, reply=delegate)
        return RouteAttempt(
            DELEGATION,
            refused=False,
            ran=bool(coworker.requests),
            audited=audited(policy, "delegate_work_to_coworker"),
        )

    def unwrapped_routes(
        self, guard: ToolGuard, wrapped: list[BaseTool], undeclared: BaseTool
    ) -> list[RouteAttempt]:
        return []  # under the hooks no tool passes around them: each is judged when called


# --- a crew for the batch and the routes ------------------------------------------------------


def crew(llm: Any, tools: list[BaseTool]) -> Crew:
    """One real agent over the scripted model, holding ``tools``, with one task."""
    one = Agent(
        role="Assistant",
        goal="Help",
        backstory="Careful.",
        llm=llm,
        tools=list(tools),
        verbose=False,
        max_iter=2,
        allow_delegation=False,
    )
    task = Task(description="Do the three things.", expected_output="Done.", agent=one)
    return Crew(agents=[one], tasks=[task], verbose=False)


# --- routes around the guard -----------------------------------------------------------------

DELEGATION = "delegation tools CrewAI adds (allow_delegation=True, two agents)"


def conformance_tools_of(policy: PolicyHarness) -> list[ConformanceTool]:
    from jevqueue.testing.conformance import conformance_tools

    declared = {spec.name for spec in policy.specs}
    return [t for t in conformance_tools() if t.name in declared]


def undeclared_tool() -> BaseTool:
    """A real tool with no declaration; ``.ran`` records whether its body ran."""

    class EraseDisk(BaseTool):
        name: str = "erase_disk"
        description: str = "Erase a disk."
        ran: list[str] = Field(default_factory=list)

        def _run(self, path: str) -> str:
            self.ran.append(path)
            return "erased"

    return EraseDisk()


def audited(policy: PolicyHarness, tool: str) -> bool:
    return any(event["tool"] == tool for event in policy.audit.events)


def attempt(route: str, build: Any, undeclared: BaseTool) -> RouteAttempt:
    """Take ``route``; a ConfigurationError is a refusal (nothing may have run)."""
    try:
        build()
    except ConfigurationError as refused:
        ran = bool(undeclared.ran)  # type: ignore[attr-defined]
        return RouteAttempt(route, refused=True, ran=ran, error=str(refused))
    return RouteAttempt(route, refused=False, ran=bool(undeclared.ran))  # type: ignore[attr-defined]


class Unsure:
    """A ballot that never picks a tool: every turn is delegated to the model unchanged."""

    def score(self, messages: Any, tools: Any) -> dict[str, float]:
        return {t["function"]["name"]: 0.4 for t in tools}


def agent(
    guard: ToolGuard,
    tools: list[BaseTool],
    *,
    reply: Any = None,
    role: str = "Assistant",
    **options: Any,
) -> Agent:
    """A real agent whose governed model calls ``reply`` (default: the undeclared tool), or
    answers from ``reply`` when it is a whole script."""
    from jevqueue import Governor, Thresholds

    script = (
        reply
        if isinstance(reply, ScriptedLLM)
        else ScriptedLLM([reply or tool_call("erase_disk", {"path": "/"}), "Done."])
    )
    governor = Governor(Unsure(), thresholds=Thresholds(confident=0.6, margin=0.25, floor=0.2))
    return Agent(
        role=role,
        goal="Help",
        backstory="Careful.",
        llm=GovernedLLM(script, governor, guard=guard),
        tools=list(tools),
        verbose=False,
        **{"max_iter": 2, **options},
    )


def kickoff(
    guard: ToolGuard,
    tools: list[BaseTool],
    *,
    added: BaseTool | None = None,
    coworker: bool = False,
    **options: Any,
) -> ScriptedLLM:
    """Build a real crew whose agent takes the route and run it; return the coworker's
    model (its requests show whether a delegation reached it)."""
    first = agent(guard, tools, **options)
    if added is not None:
        first.tools.append(added)
    second = agent(guard, tools, role="Coworker", allow_delegation=False)
    task = Task(description="Erase the disk.", expected_output="Done.", agent=first)
    with quiet_console():
        Crew(agents=[first, second] if coworker else [first], tasks=[task]).kickoff()
    return second.llm.inner


def first_turn(guard: ToolGuard, tools: list[BaseTool], **options: Any) -> None:
    """The agent's first model turn, as CrewAI's executor makes it (the route's tools are
    fetched from a server when the task runs, which this offline test does not reach)."""
    governed = agent(guard, tools, **options)
    schemas, _, _ = convert_tools_to_openai_schema(tools)
    messages = [{"role": "user", "content": "Erase the disk."}]
    governed.llm.call(messages, tools=schemas, from_agent=governed)
