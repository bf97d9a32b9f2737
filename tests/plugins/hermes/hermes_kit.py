"""What the Hermes tests share: suite tools registered with Hermes, a real agent, and the
model message that calls tools under the ids given."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from jevqueue.plugins.hermes import tool_spec
from jevqueue.testing.conformance import ConformanceTool
from run_agent import AIAgent
from tools.registry import registry

TOOLSET = "jevqueue_tests"


def register_tools(tools: Sequence[ConformanceTool]) -> list[Any]:
    """Register each suite tool with Hermes' tool registry, alone in the test toolset (a
    tool an earlier test registered there is removed); return their declarations."""
    names = {tool.name for tool in tools}
    for stale in registry.get_tool_names_for_toolset(TOOLSET):
        if stale not in names:
            registry.deregister(stale)
    for tool in tools:

        def handler(args: dict[str, Any], _tool: ConformanceTool = tool, **_: Any) -> str:
            return json.dumps({"result": _tool.run(args)})

        schema = {"name": tool.name, "description": tool.description, "parameters": tool.parameters}
        registry.register(
            name=tool.name, toolset=TOOLSET, schema=schema, handler=handler, override=True
        )
    return [
        tool_spec(tool.name, side_effects=tool.side_effects, path_fields=tool.path_fields)
        for tool in tools
    ]


def hermes_agent(base_url: str, **options: Any) -> AIAgent:
    """A real Hermes agent, quiet, no memory or context files; on the test toolset only
    unless ``enabled_toolsets`` says otherwise."""
    options.setdefault("enabled_toolsets", [TOOLSET])
    options.setdefault("max_iterations", 4)
    return AIAgent(
        base_url=base_url,
        api_key="test-key",
        model="test-model",
        quiet_mode=True,
        skip_context_files=True,
        skip_memory=True,
        tool_delay=0,
        **options,
    )


def calls_reply(calls: list[tuple[str, dict[str, Any], str]]) -> dict[str, Any]:
    """An assistant message calling ``(name, arguments, id)`` each, with the ids given."""
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
            for name, args, call_id in calls
        ],
    }
