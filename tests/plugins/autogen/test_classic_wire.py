"""Proof on the wire: classic AutoGen's own ``OpenAIWrapper``, governed, against a recording
chat-completions server on 127.0.0.1.

The bodies as the server received them show the named ``tool_choice`` and
``parallel_tool_calls: false`` on a forced turn, ``tool_choice: "none"`` on a prose turn,
and on a delegated turn exactly the body the ungoverned agent sends (no ``tool_choice``,
no ``parallel_tool_calls``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip(
    "autogen", reason='classic AutoGen is not installed: pip install "jevqueue[ag2]"'
)

from autogen import ConversableAgent, register_function
from autogen_kit import DESCRIPTIONS, WEATHER, governor
from classic_kit import Kit
from jevqueue import ProviderDisobeyedError
from jevqueue.plugins.autogen import GovernorCapability, PolicyCapability

openai_plugin = pytest.importorskip("jevqueue.plugins.openai")

pytestmark = pytest.mark.network_allowed

MODEL = "gpt-4o-mini"


def agents(kit: Kit, base_url: str, scores: Any) -> tuple[ConversableAgent, ConversableAgent]:
    llm_config = {
        "config_list": [{"model": MODEL, "api_key": "sk-test-key-not-real", "base_url": base_url}],
        "cache_seed": None,
    }
    assistant = ConversableAgent("assistant", llm_config=llm_config, human_input_mode="NEVER")
    executor = ConversableAgent("executor", llm_config=False, human_input_mode="NEVER")
    for name, function in kit.functions.items():
        register_function(
            function, caller=assistant, executor=executor, name=name, description=DESCRIPTIONS[name]
        )
    if scores is not None:
        GovernorCapability(governor(scores)).add_to_agent(assistant)
    PolicyCapability(kit.policy.pep, specs=kit.specs, context=kit.policy.context).add_to_agent(
        executor
    )
    return assistant, executor


def names(body: dict[str, Any]) -> list[str]:
    return [tool["function"]["name"] for tool in body.get("tools", [])]


def test_forced_turn_on_the_wire(workspace: Path) -> None:
    kit = Kit(workspace)
    replies = [
        openai_plugin.tool_call_completion("lookup_weather", {"city": "Lisbon"}, model=MODEL),
        openai_plugin.text_completion("Sunny in Lisbon.", model=MODEL),
    ]
    with openai_plugin.ScriptedChatServer(lambda body: replies.pop(0)) as server:
        assistant, executor = agents(kit, server.base_url, WEATHER)
        executor.initiate_chat(assistant, message="Weather in Lisbon?", max_turns=2, silent=True)
    forced, after = server.requests
    assert forced["tool_choice"] == {"type": "function", "function": {"name": "lookup_weather"}}
    assert forced["parallel_tool_calls"] is False
    assert sorted(names(forced)) == ["lookup_weather", "run_shell", "write_note"]
    assert forced["messages"][-1]["role"] == "system"
    assert "tool_choice" not in after and "parallel_tool_calls" not in after
    assert kit.ran.calls == [("lookup_weather", {"city": "Lisbon"})]


def test_prose_turn_on_the_wire(workspace: Path) -> None:
    kit = Kit(workspace)
    reply = openai_plugin.text_completion("Hello!", model=MODEL)
    with openai_plugin.ScriptedChatServer(lambda body: reply) as server:
        assistant, executor = agents(kit, server.base_url, {})
        executor.initiate_chat(assistant, message="Say hello.", max_turns=1, silent=True)
    (body,) = server.requests
    assert body["tool_choice"] == "none" and "parallel_tool_calls" not in body
    assert sorted(names(body)) == ["lookup_weather", "run_shell", "write_note"]


def test_delegated_turn_is_the_ungoverned_body(workspace: Path) -> None:
    reply = openai_plugin.text_completion("Probably sunny.", model=MODEL)
    bodies = []
    for scores in (None, {"lookup_weather": 0.4}):
        kit = Kit(workspace)
        with openai_plugin.ScriptedChatServer(lambda body: reply) as server:
            assistant, executor = agents(kit, server.base_url, scores)
            executor.initiate_chat(assistant, message="Weather?", max_turns=1, silent=True)
        (body,) = server.requests
        bodies.append(body)
    plain, governed = bodies
    assert governed == plain
    assert "tool_choice" not in governed and "parallel_tool_calls" not in governed


def test_a_disobedient_reply_on_the_wire_runs_nothing(workspace: Path) -> None:
    kit = Kit(workspace)
    reply = openai_plugin.tool_call_completion(
        "write_note", {"path": "a.txt", "text": "x"}, model=MODEL
    )
    with openai_plugin.ScriptedChatServer(lambda body: reply) as server:
        assistant, executor = agents(kit, server.base_url, WEATHER)
        with pytest.raises(ProviderDisobeyedError):
            executor.initiate_chat(assistant, message="Weather?", max_turns=2, silent=True)
    assert len(server.requests) == 1
    assert kit.ran.calls == [] and kit.policy.audit.events == []
