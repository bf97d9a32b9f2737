"""Proof on the wire: ``llama_index.llms.openai.OpenAI`` against a recording server on
127.0.0.1.

The server keeps every request body, so the tests read what the integration actually
sent: the forced step carries the named ``tool_choice`` and ``parallel_tool_calls: false``,
the prose step ``tool_choice: "none"``, and the delegated step exactly the body the stock
``FunctionAgent`` sends (the integration's own ``"auto"``; jevqueue adds neither a
choice nor a directive). A disobeying reply raises and nothing runs — through a
``FunctionAgent`` and through an ``AgentWorkflow``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

pytest.importorskip("llama_index.llms.openai", reason="llama-index-llms-openai is not installed")

from jevqueue import ProviderDisobeyedError
from jevqueue.plugins.llamaindex import GovernedFunctionAgent
from jevqueue.plugins.openai import (
    ScriptedChatServer,
    text_completion,
    tool_call_completion,
    tool_calls_completion,
)
from llama_index.core.agent.workflow import AgentWorkflow, FunctionAgent
from llama_index.llms.openai import OpenAI
from llamaindex_kit import DELEGATE, FORCE_WEATHER, PROSE, Kit, fixed_governor, run

pytestmark = pytest.mark.network_allowed


def scripted(*bodies: dict[str, Any]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    queue = list(bodies)

    def respond(body: dict[str, Any]) -> dict[str, Any]:
        if not queue:
            raise AssertionError(f"unexpected request: {body.get('tool_choice')!r}")
        return queue.pop(0)

    return respond


@pytest.fixture
def serve() -> Iterator[Callable[..., tuple[ScriptedChatServer, OpenAI]]]:
    servers: list[ScriptedChatServer] = []

    def start(*bodies: dict[str, Any]) -> tuple[ScriptedChatServer, OpenAI]:
        server = ScriptedChatServer(scripted(*bodies)).__enter__()
        servers.append(server)
        llm = OpenAI(
            model="gpt-4.1-mini", api_key="sk-test", api_base=server.base_url, max_retries=0
        )
        return server, llm

    yield start
    for server in servers:
        server.__exit__(None, None, None)


def test_forced_step_sends_the_named_choice_and_no_parallel_calls(kit: Kit, serve: Any) -> None:
    server, llm = serve(
        tool_call_completion("get_weather", {"city": "Oslo"}, model="gpt-4.1-mini"),
        text_completion("Sunny in Oslo.", model="gpt-4.1-mini"),
    )
    agent = GovernedFunctionAgent(
        llm=llm, governor=fixed_governor(FORCE_WEATHER), tools=kit.tools, streaming=False
    )
    result = run(lambda: agent.run(user_msg="What is the weather in Oslo?"))
    assert str(result) == "Sunny in Oslo."
    forced, after = server.requests
    assert forced["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    assert forced["parallel_tool_calls"] is False
    assert forced["messages"][-1]["role"] == "system"
    # The next step (after the tool result) is not forced: forcing is per turn.
    assert after["tool_choice"] == "auto"
    assert after["parallel_tool_calls"] is True
    assert kit.runs == [("get_weather", {"city": "Oslo"})]


def test_prose_step_sends_none(kit: Kit, serve: Any) -> None:
    server, llm = serve(text_completion("Hello!", model="gpt-4.1-mini"))
    agent = GovernedFunctionAgent(
        llm=llm, governor=fixed_governor(PROSE), tools=kit.tools, streaming=False
    )
    run(lambda: agent.run(user_msg="Hi"))
    (body,) = server.requests
    assert body["tool_choice"] == "none"
    assert body["messages"][-1]["role"] == "system"


def test_delegated_step_sends_the_stock_request_body(kit: Kit, serve: Any) -> None:
    server, llm = serve(
        text_completion("Hello!", model="gpt-4.1-mini"),
        text_completion("Hello!", model="gpt-4.1-mini"),
    )
    stock = FunctionAgent(llm=llm, tools=kit.tools, streaming=False)
    run(lambda: stock.run(user_msg="What is the weather in Oslo?"))
    governed = GovernedFunctionAgent(
        llm=llm, governor=fixed_governor(DELEGATE), tools=kit.tools, streaming=False
    )
    run(lambda: governed.run(user_msg="What is the weather in Oslo?"))
    stock_body, governed_body = server.requests
    assert governed_body == stock_body
    assert governed.decisions[-1].path.value == "delegate"
    assert all(m["role"] != "system" for m in governed_body["messages"])


def test_two_calls_on_the_wire_raise_and_nothing_runs(kit: Kit, serve: Any) -> None:
    server, llm = serve(
        tool_calls_completion(
            [("delete_file", {"path": "notes.txt"}), ("get_weather", {"city": "Oslo"})],
            model="gpt-4.1-mini",
        )
    )
    agent = GovernedFunctionAgent(
        llm=llm, governor=fixed_governor(FORCE_WEATHER), tools=kit.tools, streaming=False
    )
    with pytest.raises(ProviderDisobeyedError) as raised:
        run(lambda: agent.run(user_msg="What is the weather in Oslo?"))
    assert raised.value.called == ["delete_file", "get_weather"]
    assert len(server.requests) == 1
    assert kit.runs == []


def test_disobedience_through_an_agent_workflow_raises_and_nothing_runs(
    kit: Kit, serve: Any
) -> None:
    server, llm = serve(
        tool_call_completion("delete_file", {"path": "notes.txt"}, model="gpt-4.1-mini")
    )
    agent = GovernedFunctionAgent(
        name="weather",
        description="Answers weather questions",
        llm=llm,
        governor=fixed_governor(FORCE_WEATHER),
        tools=kit.tools,
        streaming=False,
    )
    workflow = AgentWorkflow(agents=[agent], root_agent="weather")
    with pytest.raises(ProviderDisobeyedError):
        run(lambda: workflow.run(user_msg="What is the weather in Oslo?"))
    assert server.requests[0]["tool_choice"]["function"]["name"] == "get_weather"
    assert kit.runs == []
