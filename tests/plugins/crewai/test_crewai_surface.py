"""The plugin's public surface, its import error, and what a wrapped tool looks like."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import jevqueue.plugins.crewai as plugin
import pytest
from crew_kit import Kit
from crewai.utilities.agent_utils import convert_tools_to_openai_schema
from jevqueue.errors import ConfigurationError
from jevqueue.plugins.crewai import GovernedTool, tool_spec


def test_public_names_are_pinned() -> None:
    assert sorted(plugin.__all__) == sorted(
        [
            "DENIAL_CODE",
            "REACT_NOTE",
            "ApprovalCallback",
            "ApprovalRequest",
            "AuthorityApproval",
            "ConsoleApproval",
            "CrewProviderDisobeyedError",
            "CrewTurnHost",
            "CrewTurnInterruptedError",
            "ForcingUnavailableError",
            "GovernedLLM",
            "GovernedTool",
            "GovernedToolHooks",
            "GuardOutcome",
            "LocalText",
            "ToolConstraint",
            "ToolGuard",
            "TurnScope",
            "current_tool_constraint",
            "tool_spec",
        ]
    )
    for name in plugin.__all__:
        assert getattr(plugin, name) is not None


def test_without_crewai_the_import_error_names_the_extra() -> None:
    code = (
        "import sys; sys.modules['crewai'] = None\n"
        "try:\n"
        "    import jevqueue.plugins.crewai\n"
        "except ImportError as error:\n"
        "    print(error)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert 'pip install "jevqueue[crewai]"' in out.stdout


def test_a_wrapped_tool_offers_the_model_exactly_the_same_schema(kit: Kit) -> None:
    originals = list(kit.tools.values())
    wrapped = kit.guard().wrap(originals)
    assert all(isinstance(tool, GovernedTool) for tool in wrapped)
    before, _, _ = convert_tools_to_openai_schema(originals)
    after, _, _ = convert_tools_to_openai_schema(wrapped)
    assert after == before


def test_wrapping_twice_or_wrapping_a_non_tool_is_refused(kit: Kit) -> None:
    guard = kit.guard()
    (wrapped,) = guard.wrap([kit.tools["lookup_weather"]])
    with pytest.raises(ConfigurationError, match="already governed"):
        guard.wrap([wrapped])
    with pytest.raises(ConfigurationError, match="BaseTool"):
        guard.wrap([lambda city: city])  # type: ignore[list-item]


def test_tool_spec_uses_the_dispatch_name_and_the_tools_schema(kit: Kit) -> None:
    spec = tool_spec(kit.tools["write_note"], side_effects={"file_write"}, path_fields=("path",))
    assert spec.name == "write_note"
    assert spec.required_path_fields == ("path",)
    assert spec.schema is not None and set(spec.schema["properties"]) == {"path", "text"}


def test_an_unregistered_tool_is_refused_when_wrapped(kit: Kit) -> None:
    from crewai.tools import tool

    @tool("Send Email")
    def send_email(to: str) -> str:
        """Send an email."""
        kit.ran.calls.append(("send_email", {"to": to}))
        return "sent"

    with pytest.raises(ConfigurationError, match=r"\['send_email'\] have no policy declaration"):
        kit.guard().wrap([kit.tools["lookup_weather"], send_email])
    assert kit.ran.calls == []


class MutatingPolicy:
    """A policy decision point that edits the arguments it judges, then allows."""

    revision = "mutating-1"

    def evaluate(self, action: Any) -> Any:
        from jevqueue.policy import Verdict

        action.arguments["tags"].append("smuggled")
        return Verdict.allow("fine")


def test_the_tool_runs_with_the_arguments_as_judged_not_as_edited_by_the_policy(
    kit: Kit,
) -> None:
    from crewai.tools import tool
    from jevqueue.plugins.crewai import ToolGuard
    from jevqueue.policy import PolicyEnforcementPoint

    @tool("tag_items")
    def tag_items(tags: list[str]) -> str:
        """Tag the items."""
        kit.ran.calls.append(("tag_items", {"tags": list(tags)}))
        return "tagged"

    kit.registry.register(tool_spec(tag_items, side_effects={"network"}))
    guard = ToolGuard(
        PolicyEnforcementPoint(MutatingPolicy()), specs=kit.registry, context=kit.context
    )
    (governed,) = guard.wrap([tag_items])
    governed.run(tags=["a"])
    assert kit.ran.calls == [("tag_items", {"tags": ["a"]})]


def test_the_scripted_llm_fails_loudly_on_an_unexpected_or_unused_step(kit: Kit) -> None:
    from crew_kit import make_crew
    from jevqueue.plugins.crewai.testing import ScriptedLLM, UnexpectedModelCallError

    exhausted = ScriptedLLM([])
    with pytest.raises(UnexpectedModelCallError):
        exhausted.call([{"role": "user", "content": "hi"}])
    with pytest.raises(AssertionError, match="unexpected model call"):
        exhausted.assert_complete()

    # CrewAI catches and retries the error; the script still remembers the call.
    swallowed = ScriptedLLM([])
    with pytest.raises(UnexpectedModelCallError):
        make_crew(swallowed, [], "Hello?").kickoff()
    with pytest.raises(AssertionError, match="unexpected model call"):
        swallowed.assert_complete()

    unused = ScriptedLLM(["first", "never used"])
    assert unused.call("hi") == "first"
    with pytest.raises(AssertionError, match="never consumed"):
        unused.assert_complete()
