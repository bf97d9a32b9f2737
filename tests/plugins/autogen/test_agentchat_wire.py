"""Proof on the wire: AgentChat's own ``OpenAIChatCompletionClient``, governed, against a
recording chat-completions server on 127.0.0.1.

The request bodies as the server received them show the named ``tool_choice`` and
``parallel_tool_calls: false`` on a forced turn, ``tool_choice: "none"`` on a prose turn,
and, on a delegated turn, exactly the body the ungoverned agent sends (AgentChat's client
itself always sends ``tool_choice: "auto"`` with tools; the governed client adds nothing).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip(
    "autogen_ext.models.openai",
    reason='AgentChat is not installed: pip install "jevqueue[autogen]"',
)
from agentchat_kit import Kit
from autogen_agentchat.agents import AssistantAgent
from autogen_ext.models.openai import OpenAIChatCompletionClient
from autogen_kit import WEATHER, governor
from jevqueue import ProviderDisobeyedError
from jevqueue.plugins.autogen import GovernedChatCompletionClient

openai_plugin = pytest.importorskip("jevqueue.plugins.openai")

pytestmark = pytest.mark.network_allowed

MODEL = "gpt-4o-mini"
REPLY_MODEL = "gpt-4o-mini-2024-07-18"  # the name the client resolves MODEL to
TASK = "What is the weather in Lisbon?"


def openai_client(base_url: str) -> OpenAIChatCompletionClient:
    return OpenAIChatCompletionClient(
        model=MODEL, base_url=base_url, api_key="test-key-not-real", max_retries=0
    )


def run_agent(kit: Kit, client: Any, task: str = TASK) -> Any:
    assistant = AssistantAgent("assistant", model_client=client, workbench=kit.workbench())
    return asyncio.run(assistant.run(task=task))


def names(body: dict[str, Any]) -> list[str]:
    return [tool["function"]["name"] for tool in body.get("tools", [])]


def test_forced_turn_on_the_wire(workspace: Path) -> None:
    kit = Kit(workspace)
    reply = openai_plugin.tool_call_completion(
        "lookup_weather", {"city": "Lisbon"}, model=REPLY_MODEL
    )
    with openai_plugin.ScriptedChatServer(lambda body: reply) as server:
        client = GovernedChatCompletionClient(openai_client(server.base_url), governor(WEATHER))
        run_agent(kit, client)
    (body,) = server.requests
    assert body["tool_choice"] == {"type": "function", "function": {"name": "lookup_weather"}}
    assert body["parallel_tool_calls"] is False
    assert sorted(names(body)) == ["lookup_weather", "run_shell", "write_note"]
    assert body["messages"][-1]["role"] == "system"
    assert "lookup_weather" in body["messages"][-1]["content"]
    assert kit.ran.calls == [("lookup_weather", {"city": "Lisbon"})]


def test_prose_turn_on_the_wire(workspace: Path) -> None:
    kit = Kit(workspace)
    reply = openai_plugin.text_completion("Hello!", model=REPLY_MODEL)
    with openai_plugin.ScriptedChatServer(lambda body: reply) as server:
        client = GovernedChatCompletionClient(openai_client(server.base_url), governor({}))
        result = run_agent(kit, client, "Say hello.")
    (body,) = server.requests
    assert body["tool_choice"] == "none"
    assert "parallel_tool_calls" not in body
    assert body["messages"][-1]["role"] == "system"
    assert result.messages[-1].content == "Hello!"


def test_delegated_turn_is_the_ungoverned_body_byte_for_byte(workspace: Path) -> None:
    reply = openai_plugin.text_completion("Probably sunny.", model=REPLY_MODEL)
    bodies: list[dict[str, Any]] = []
    for governed in (False, True):
        kit = Kit(workspace)
        with openai_plugin.ScriptedChatServer(lambda body: reply) as server:
            inner = openai_client(server.base_url)
            client = (
                GovernedChatCompletionClient(inner, governor({"lookup_weather": 0.4}))
                if governed
                else inner
            )
            run_agent(kit, client)
        (body,) = server.requests
        bodies.append(body)
    ungoverned, governed_body = bodies
    assert governed_body == ungoverned
    assert governed_body["tool_choice"] == "auto"  # AgentChat's own, sent with or without us
    assert "parallel_tool_calls" not in governed_body
    assert all("Call the tool" not in str(m.get("content")) for m in governed_body["messages"])


def test_a_disobedient_reply_on_the_wire_runs_nothing(workspace: Path) -> None:
    kit = Kit(workspace)
    reply = openai_plugin.tool_call_completion(
        "run_shell", {"command": "ls", "cwd": str(workspace)}, model=REPLY_MODEL
    )
    with openai_plugin.ScriptedChatServer(lambda body: reply) as server:
        client = GovernedChatCompletionClient(openai_client(server.base_url), governor(WEATHER))
        with pytest.raises(ProviderDisobeyedError):
            run_agent(kit, client)
    assert len(server.requests) == 1
    assert kit.ran.calls == [] and kit.policy.audit.events == []
