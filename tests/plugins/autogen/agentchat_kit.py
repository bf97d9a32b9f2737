"""Shared pieces of the AgentChat tests: real FunctionTools, the suite's request view."""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any

from autogen_agentchat.messages import ToolCallSummaryMessage
from autogen_core.tools import FunctionTool, StaticWorkbench
from autogen_kit import DESCRIPTIONS, Bodies, Policy, Ran, build_policy
from jevqueue.plugins.autogen import PolicyWorkbench, tool_spec
from jevqueue.testing.conformance import ConformanceTool, ProviderReply, ProviderRequest


def function_tool(neutral: ConformanceTool) -> FunctionTool:
    """A real AgentChat FunctionTool whose body is the suite's tool (string parameters)."""

    def body(**kwargs: Any) -> str:
        return neutral.run(kwargs)

    names = list(neutral.parameters["properties"])
    body.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=str) for name in names],
        return_annotation=str,
    )
    body.__annotations__ = {**dict.fromkeys(names, str), "return": str}
    body.__name__ = neutral.name
    return FunctionTool(body, description=neutral.description, name=neutral.name)


def neutral_request(request: Any) -> ProviderRequest:
    """The suite's view of one AgentChat model request."""
    return ProviderRequest(
        forced_tool=request.forced_tool,
        tools_forbidden=request.tool_choice == "none",
        # "auto" is the interface's default: the agent passes no tool_choice at all.
        tool_choice_set=request.tool_choice != "auto",
        parallel_tool_calls=request.parallel_tool_calls,
        messages=request.openai,
        tools=request.tool_names,
        raw=request,
    )


def agentchat_step(reply: ProviderReply) -> Any:
    """A scripted step for the suite's reply."""
    from jevqueue.plugins.autogen.testing import tool_call

    if reply.tool_calls:
        return [tool_call(name, arguments) for name, arguments in reply.tool_calls]
    return reply.text


def calls_of(message: Any) -> tuple[tuple[str, dict[str, Any]], ...]:
    """The (name, arguments) calls a ToolCallSummaryMessage reports."""
    if not isinstance(message, ToolCallSummaryMessage):
        return ()
    return tuple((call.name, json.loads(call.arguments)) for call in message.tool_calls)


class Kit:
    """Three real FunctionTools, their specs, and a real PEP over the default policy."""

    def __init__(self, workspace: Path) -> None:
        self.ran = Ran()
        bodies = Bodies(self.ran)
        self.tools = [
            FunctionTool(bodies.lookup_weather, DESCRIPTIONS["lookup_weather"], "lookup_weather"),
            FunctionTool(bodies.write_note, DESCRIPTIONS["write_note"], "write_note"),
            FunctionTool(bodies.run_shell, DESCRIPTIONS["run_shell"], "run_shell"),
        ]
        weather, note, shell = self.tools
        self.specs = [
            tool_spec(weather, side_effects={"network"}),
            tool_spec(note, side_effects={"file_write"}, path_fields=["path"]),
            tool_spec(shell, side_effects={"shell_command"}, cwd_field="cwd"),
        ]
        self.policy: Policy = build_policy(workspace, self.specs)
        self.workspace = workspace

    def workbench(self, **kwargs: Any) -> PolicyWorkbench:
        return PolicyWorkbench(
            StaticWorkbench(self.tools),
            pep=self.policy.pep,
            specs=self.specs,
            context=self.policy.context,
            **kwargs,
        )
