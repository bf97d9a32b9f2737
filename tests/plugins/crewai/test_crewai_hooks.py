"""The hook form: CrewAI's before/after tool-call hooks, fail-closed, in a real Crew."""

from __future__ import annotations

from typing import Any

from crew_kit import FixedBallot, Kit, make_crew
from crewai.hooks import register_before_tool_call_hook, unregister_before_tool_call_hook
from jevqueue import Governor, Thresholds
from jevqueue.plugins.crewai import GovernedLLM, ToolGuard
from jevqueue.plugins.crewai.testing import LLMRequest, ScriptedLLM, tool_call

UNSURE = {"lookup_weather": 0.4, "write_note": 0.3, "run_shell": 0.1}


def governed(inner: ScriptedLLM, guard: ToolGuard | None = None) -> GovernedLLM:
    ballot = FixedBallot(UNSURE)
    thresholds = Thresholds(confident=0.6, margin=0.25, floor=0.2)
    return GovernedLLM(inner, Governor(ballot, thresholds=thresholds), guard=guard)


def tool_messages(request: LLMRequest) -> list[str]:
    return [str(m.get("content")) for m in request.messages if m.get("role") == "tool"]


def test_hooks_block_a_denied_call_and_the_agent_reads_why(kit: Kit) -> None:
    guard = kit.guard()
    inner = ScriptedLLM(
        [
            [
                tool_call("lookup_weather", {"city": "Lisbon"}),
                tool_call("write_note", {"path": "../outside.txt", "text": "x"}),
            ],
            "Done.",
        ]
    )
    crew = make_crew(governed(inner, guard), list(kit.tools.values()), "Weather, then a note.")

    with guard.hooks().installed():
        crew.kickoff()

    inner.assert_complete()
    assert kit.ran.names() == ["lookup_weather"], "only the allowed call may run"
    weather, note = tool_messages(inner.requests[1])
    assert weather == "Sunny and 24 C in Lisbon."
    assert note.startswith("jevqueue denied the call to 'write_note'"), note
    assert "blocked by hook" not in note, "the agent must read the guard's reason"


def test_hooks_scoped_to_a_block_judge_calls_inside_it_only(kit: Kit) -> None:
    guard = kit.guard()
    inner = ScriptedLLM([tool_call("write_note", {"path": ".git/config", "text": "x"}), "No."])
    crew = make_crew(governed(inner), list(kit.tools.values()), "Write the note.")

    with guard.hooks().installed(scoped=True):
        crew.kickoff()

    assert kit.ran.calls == []
    assert [result for _, result in kit.results()] == ["DENY"]


class ExplodingRegistry:
    """A registry that fails on lookup: the check itself raises."""

    def get(self, name: str) -> Any:
        raise RuntimeError("registry backend unavailable")


def test_a_check_that_raises_blocks_the_call_instead_of_failing_open(kit: Kit) -> None:
    guard = kit.guard()
    guard.registry = ExplodingRegistry()  # type: ignore[assignment]
    inner = ScriptedLLM([tool_call("lookup_weather", {"city": "Lisbon"}), "No weather."])
    crew = make_crew(governed(inner), list(kit.tools.values()), "Weather?")

    with guard.hooks().installed():
        crew.kickoff()

    assert kit.ran.calls == [], "an exception inside the check must not let the call run"
    (message,) = tool_messages(inner.requests[1])
    assert "could not complete (RuntimeError: registry backend unavailable)" in message
    assert guard.last is not None and guard.last.error is not None


def test_control_crewai_runs_the_tool_when_a_plain_hook_raises(kit: Kit) -> None:
    """The fail-open behaviour the guard protects against, shown on CrewAI itself."""

    def careless(context: Any) -> bool:
        raise RuntimeError("a bug in a hook")

    inner = ScriptedLLM([tool_call("lookup_weather", {"city": "Lisbon"}), "Sunny."])
    crew = make_crew(governed(inner), list(kit.tools.values()), "Weather?")
    register_before_tool_call_hook(careless)
    try:
        crew.kickoff()
    finally:
        unregister_before_tool_call_hook(careless)
    assert kit.ran.names() == ["lookup_weather"]


def test_wrapped_tools_fail_closed_too(kit: Kit) -> None:
    guard = kit.guard()
    (weather,) = guard.wrap([kit.tools["lookup_weather"]])
    guard.registry = ExplodingRegistry()  # type: ignore[assignment]
    result = weather.run(city="Lisbon")
    assert kit.ran.calls == []
    assert result.code == "jevqueue_denied" and "RuntimeError" in result.message
