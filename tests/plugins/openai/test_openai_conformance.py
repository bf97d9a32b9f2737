"""The OpenAI-compatible plugin passes the shared plugin conformance suite.

The glue puts the suite's scripted provider behind the real host at the HTTP boundary
(an in-process transport translates each request body into the suite's neutral
``ProviderRequest``), and runs tool calls through :class:`PolicyToolRunner` with the
scenario's approver as ``approver=``. A batch pauses the runner's way: built without an
approver, the runner leaves the gated call unrun with its ApprovalRequest; the glue answers
it with the scenario's approver and runs the same response again with the records. A
conversation is the caller's loop: one list of messages, starting with the user's request,
sent by the host and given to the runner as ``messages=``; each response's assistant
message and then its ``tool`` messages are appended to it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest

pytest.importorskip("httpx", reason='the openai plugin needs pip install "jevqueue[openai]"')

from jevqueue.errors import ConfigurationError
from jevqueue.plugins.openai import (
    OpenAIChatHost,
    PolicyToolRunner,
    ScriptedChatTransport,
    text_completion,
    tool_call_completion,
    tool_calls_completion,
)
from jevqueue.policy import approval_records
from jevqueue.testing.conformance import (
    ConformanceTool,
    PluginConformance,
    PolicyHarness,
    ProviderReply,
    ProviderRequest,
    RouteAttempt,
    ScriptedProvider,
    ToolBatchScenario,
    ToolCallOutcome,
    ToolCallScenario,
    ToolConversationScenario,
    TurnOutcome,
    TurnScenario,
    conformance_tools,
)


def _provider_model(provider: ScriptedProvider) -> Any:
    def respond(body: dict[str, Any]) -> dict[str, Any]:
        choice = body.get("tool_choice")
        forced = choice["function"]["name"] if isinstance(choice, dict) else None
        request = ProviderRequest(
            forced_tool=forced,
            tools_forbidden=choice == "none",
            tool_choice_set="tool_choice" in body,
            parallel_tool_calls=body.get("parallel_tool_calls"),
            messages=tuple(body["messages"]),
            tools=tuple(tool["function"]["name"] for tool in body.get("tools", [])),
            raw=body,
        )
        reply: ProviderReply = provider.respond(request)
        if reply.tool_calls:
            return tool_calls_completion(reply.tool_calls, model=body["model"])
        return text_completion(reply.text, model=body["model"])

    return respond


def _functions(tools: list[ConformanceTool]) -> dict[str, Any]:
    def bind(tool: ConformanceTool) -> Any:
        return lambda **arguments: tool.run(arguments)

    return {tool.name: bind(tool) for tool in tools}


class TestOpenAIConformance(PluginConformance):
    def run_turn(self, turn: TurnScenario) -> TurnOutcome:
        host = OpenAIChatHost(
            model="conformance-model",
            messages=turn.messages,
            tools=[tool.openai_schema() for tool in turn.tools],
            base_url="http://provider.test/v1",
            transport=ScriptedChatTransport(_provider_model(turn.provider)),
        )
        response = turn.governor.step(host)
        PolicyToolRunner(
            _functions(turn.tools), pep=turn.pep, specs=turn.specs, context=turn.context
        ).run(response)
        message = response["choices"][0]["message"]
        calls = tuple(
            (call["function"]["name"], call["function"]["arguments"])
            for call in message.get("tool_calls") or ()
        )
        return TurnOutcome(
            text=message.get("content") or "",
            tool_calls=tuple((name, _json(arguments)) for name, arguments in calls),
            model_id=response.get("model"),
        )

    def run_tool_call(self, call: ToolCallScenario) -> ToolCallOutcome:
        runner = PolicyToolRunner(
            _functions(call.tools),
            pep=call.pep,
            specs=call.specs,
            context=call.context,
            approver=call.approver,
        )
        result = runner.run_call(call.tool.name, call.arguments, call_id=call.call_id)
        return _outcome(result)

    def run_tool_batch(self, batch: ToolBatchScenario) -> Sequence[ToolCallOutcome]:
        # No approver: the gated call pauses (not run, its ApprovalRequest on the result).
        runner = PolicyToolRunner(
            _functions(batch.tools), pep=batch.pep, specs=batch.specs, context=batch.context
        )
        response = _response(batch.calls)
        first = runner.run(response)
        paused = [result for result in first if result.pending]
        assert paused, f"the gated call did not pause: {first}"
        records = [
            record
            for result in paused
            if result.judgement is not None and result.judgement.request is not None
            for record in approval_records(batch.approver(result.judgement.request))
        ]
        # Resume: the same response again, with the records; what ran does not run again.
        return [_outcome(result) for result in runner.run(response, approval_records=records)]

    def run_tool_conversation(
        self, conversation: ToolConversationScenario
    ) -> Sequence[Sequence[ToolCallOutcome]]:
        messages: list[dict[str, Any]] = [{"role": "user", "content": conversation.user_request}]
        script = iter(conversation.messages)
        host = OpenAIChatHost(
            model="conformance-model",
            messages=messages,
            tools=[tool.openai_schema() for tool in conversation.tools],
            base_url="http://provider.test/v1",
            transport=ScriptedChatTransport(lambda body: _response(next(script))),
        )
        # No approver: a gated call pauses, as in run_tool_batch.
        runner = PolicyToolRunner(
            _functions(conversation.tools),
            pep=conversation.pep,
            specs=conversation.specs,
            context=conversation.context,
            messages=messages,
        )
        outcomes = []
        for _ in conversation.messages:
            response = host.generate(force_tool=None, directive="")
            messages.append(response["choices"][0]["message"])
            results = runner.run(response)
            records = [
                record
                for result in results
                if result.pending and result.judgement and result.judgement.request
                for record in approval_records(conversation.approver(result.judgement.request))
            ]
            if records:
                results = runner.run(response, approval_records=records)
            messages.extend(result.message() for result in results)
            outcomes.append([_outcome(result) for result in results])
        return outcomes

    def routes_around_the_guard(self, policy: PolicyHarness) -> Sequence[RouteAttempt]:
        attempts = [
            _build_route(policy, "undeclared tool", {"ghost_tool": lambda **_: "ghost ran"}),
            _build_route(
                policy,
                "a function keyed by another spelling of a declared name",
                {"Get_Weather": lambda **_: "ran"},
            ),
            _build_route(policy, "a function keyed by a non-string", {("get_weather",): print}),
        ]
        for route, keep, run in _CALL_ROUTES:
            tools = conformance_tools()
            functions = {
                name: function for name, function in _functions(tools).items() if name in keep
            }
            runner = PolicyToolRunner(
                functions, pep=policy.pep, specs=policy.specs, context=policy.context
            )
            before = len(policy.audit.events)
            results = run(runner, functions)
            attempts.append(
                RouteAttempt(
                    route=route,
                    refused=False,
                    ran=any(tool.calls for tool in tools)
                    or any(result.executed for result in results),
                    audited=len(policy.audit.events) > before,
                )
            )
        return attempts


def _outcome(result: Any) -> ToolCallOutcome:
    return ToolCallOutcome(
        message=result.content,
        is_error=result.is_error,
        approval_requested=result.approval_requested,
    )


def _response(calls: Sequence[tuple[str, dict[str, Any], str]]) -> dict[str, Any]:
    """One assistant message calling each (name, arguments) under its own call id."""
    response = tool_calls_completion([(name, arguments) for name, arguments, _ in calls])
    for call, (_, _, call_id) in zip(
        response["choices"][0]["message"]["tool_calls"], calls, strict=True
    ):
        call["id"] = call_id
    return response


def _build_route(policy: PolicyHarness, route: str, functions: dict[Any, Any]) -> RouteAttempt:
    try:
        PolicyToolRunner(functions, pep=policy.pep, specs=policy.specs, context=policy.context)
    except ConfigurationError as refused:
        return RouteAttempt(route=route, refused=True, error=str(refused))
    return RouteAttempt(route=route, refused=False)


def _two_choices(runner: PolicyToolRunner, functions: dict[str, Any]) -> list[Any]:
    first = tool_call_completion("get_weather", {"city": "Lisbon"})
    second = tool_call_completion("delete_file", {"path": "notes.txt"})
    body = {**first, "choices": [first["choices"][0], {**second["choices"][0], "index": 1}]}
    return runner.run(body)


def _unnamed(runner: PolicyToolRunner, functions: dict[str, Any]) -> list[Any]:
    response = tool_call_completion("delete_file", {"path": "notes.txt"})
    call = response["choices"][0]["message"]["tool_calls"][0]
    call["type"] = "custom"
    call["custom"] = {"name": "get_weather", "input": ""}
    return runner.run(response)


def _legacy(runner: PolicyToolRunner, functions: dict[str, Any]) -> list[Any]:
    body = {
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": None,
                    "function_call": {"name": "delete_file", "arguments": '{"path": "a.txt"}'},
                },
            }
        ]
    }
    return runner.run(body)


def _changed_after_build(runner: PolicyToolRunner, functions: dict[str, Any]) -> list[Any]:
    functions["ghost_tool"] = functions["delete_file"]  # the caller's mapping, not the runner's
    return runner.run(tool_call_completion("ghost_tool", {"path": "notes.txt"}))


def _direct(runner: PolicyToolRunner, functions: dict[str, Any]) -> list[Any]:
    return [runner.run_call("delete_file", {"path": "notes.txt"}, call_id="call-direct")]


def _no_function(runner: PolicyToolRunner, functions: dict[str, Any]) -> list[Any]:
    return runner.run(tool_call_completion("run_command", {"command": "ls"}))


_ALL = frozenset({"get_weather", "delete_file", "run_command"})
_CALL_ROUTES: list[tuple[str, frozenset[str], Callable[..., list[Any]]]] = [
    ("a response with several choices", _ALL, _two_choices),
    ("a call naming a tool outside function.name", _ALL, _unnamed),
    ("a legacy function_call", _ALL, _legacy),
    ("a function added to the mapping after the runner was built", _ALL, _changed_after_build),
    ("a direct run_call", _ALL, _direct),
    ("a declared tool the runner has no function for", frozenset({"get_weather"}), _no_function),
]


def _json(text: str) -> dict[str, Any]:
    import json

    value = json.loads(text)
    assert isinstance(value, dict)
    return value
