"""Proof on the wire: CrewAI's own OpenAI provider, governed, against a server on 127.0.0.1.

What leaves the process shows both what the governed LLM does (the forced turn offers one
tool, the prose turn none, the passthrough all) and what CrewAI cannot do: its provider sends
``tool_choice: "auto"`` whenever tools are sent, so the narrowing plus the read-back is the
enforcement.
"""

from __future__ import annotations

from typing import Any

import pytest
from crew_kit import FixedBallot, Kit, make_crew
from jevqueue import Governor, Thresholds
from jevqueue.plugins.crewai import CrewProviderDisobeyedError, GovernedLLM

openai_plugin = pytest.importorskip("jevqueue.plugins.openai")
from crewai import LLM  # noqa: E402

pytestmark = pytest.mark.network_allowed

THRESHOLDS = Thresholds(confident=0.6, margin=0.25, floor=0.2)
MODEL = "gpt-4o-mini"


def native_llm(base_url: str) -> Any:
    return LLM(model=MODEL, base_url=base_url, api_key="test-key-not-real", max_retries=0)


def names(body: dict[str, Any]) -> list[str]:
    return [tool["function"]["name"] for tool in body.get("tools", [])]


def test_forced_turn_on_the_wire(kit: Kit, allow_loopback: Any) -> None:
    replies = [
        openai_plugin.tool_call_completion("lookup_weather", {"city": "Lisbon"}, model=MODEL),
        openai_plugin.text_completion("Sunny in Lisbon.", model=MODEL),
    ]
    with openai_plugin.ScriptedChatServer(lambda body: replies.pop(0)) as server:
        guard = kit.guard()
        scores = {"lookup_weather": 0.95, "write_note": 0.1, "run_shell": 0.05}
        llm = GovernedLLM(
            native_llm(server.base_url),
            Governor(FixedBallot(scores), thresholds=THRESHOLDS),
            guard=guard,
        )
        crew = make_crew(llm, guard.wrap(kit.tools.values()), "What is the weather in Lisbon?")
        assert crew.kickoff().raw == "Sunny in Lisbon."

    forced, passthrough = server.requests
    assert names(forced) == ["lookup_weather"], "only the forced tool may go out"
    assert forced["messages"][-1]["role"] == "system"
    assert "lookup_weather" in forced["messages"][-1]["content"]
    # CrewAI's provider cannot send a named tool_choice: it overwrites it with "auto".
    assert forced.get("tool_choice") == "auto"
    assert sorted(names(passthrough)) == ["lookup_weather", "run_shell", "write_note"]
    assert kit.ran.calls == [("lookup_weather", {"city": "Lisbon"})]


def test_prose_turn_sends_no_tools(kit: Kit, allow_loopback: Any) -> None:
    reply = openai_plugin.text_completion("Hello!", model=MODEL)
    with openai_plugin.ScriptedChatServer(lambda body: reply) as server:
        guard = kit.guard()
        llm = GovernedLLM(
            native_llm(server.base_url),
            Governor(FixedBallot({}), thresholds=THRESHOLDS),
            guard=guard,
        )
        crew = make_crew(llm, guard.wrap(kit.tools.values()), "Say hello.")
        assert crew.kickoff().raw == "Hello!"
    (body,) = server.requests
    assert "tools" not in body and "tool_choice" not in body


def test_a_disobedient_reply_on_the_wire_runs_nothing(kit: Kit, allow_loopback: Any) -> None:
    reply = openai_plugin.tool_call_completion(
        "run_shell", {"command": "ls", "cwd": str(kit.workspace)}, model=MODEL
    )
    with openai_plugin.ScriptedChatServer(lambda body: reply) as server:
        guard = kit.guard()
        scores = {"lookup_weather": 0.95, "write_note": 0.1, "run_shell": 0.05}
        llm = GovernedLLM(
            native_llm(server.base_url),
            Governor(FixedBallot(scores), thresholds=THRESHOLDS),
            guard=guard,
        )
        crew = make_crew(llm, guard.wrap(kit.tools.values()), "What is the weather in Lisbon?")
        with pytest.raises(CrewProviderDisobeyedError):
            crew.kickoff()
    assert len(server.requests) == 1 and kit.ran.calls == [] and kit.audit.events == []
