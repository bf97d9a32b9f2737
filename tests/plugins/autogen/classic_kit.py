"""Shared pieces of the classic AutoGen tests: real ConversableAgents and registered tools."""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from autogen import ConversableAgent, register_function
from autogen_kit import DESCRIPTIONS, Bodies, Policy, Ran, build_policy
from jevqueue.plugins.autogen import GovernorCapability, PolicyCapability, tool_spec
from jevqueue.plugins.autogen.testing import ScriptedModel
from jevqueue.testing.conformance import ConformanceTool, ProviderRequest


def neutral_function(neutral: ConformanceTool) -> Callable[..., str]:
    """A plain function with the suite tool's string parameters, whose body is the tool."""

    def body(**kwargs: Any) -> str:
        return neutral.run(kwargs)

    names = list(neutral.parameters["properties"])
    body.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=str) for name in names],
        return_annotation=str,
    )
    body.__annotations__ = {**dict.fromkeys(names, str), "return": str}
    body.__name__ = neutral.name
    body.__doc__ = neutral.description
    return body


def neutral_request(request: Any) -> ProviderRequest:
    """The suite's view of one request that reached the provider boundary."""
    return ProviderRequest(
        forced_tool=request.forced_tool,
        tools_forbidden=request.tool_choice == "none",
        tool_choice_set=request.tool_choice is not None,
        parallel_tool_calls=request.parallel_tool_calls,
        messages=request.messages,
        tools=request.tool_names,
        raw=request,
    )


def reply_calls(reply: Any) -> tuple[tuple[str, dict[str, Any]], ...]:
    if not isinstance(reply, dict):
        return ()
    return tuple(
        (call["function"]["name"], json.loads(call["function"]["arguments"]))
        for call in reply.get("tool_calls") or ()
    )


def pair(
    model: ScriptedModel,
    functions: dict[str, Callable[..., Any]],
    *,
    system_message: str = "You are a helpful assistant.",
) -> tuple[ConversableAgent, ConversableAgent]:
    """An assistant answered by ``model`` and an executor, with ``functions`` registered."""
    assistant = ConversableAgent(
        "assistant",
        system_message=system_message,
        llm_config=model.llm_config(),
        human_input_mode="NEVER",
    )
    executor = ConversableAgent(
        "executor", llm_config=False, human_input_mode="NEVER", default_auto_reply="done"
    )
    for name, function in functions.items():
        register_function(
            function,
            caller=assistant,
            executor=executor,
            name=name,
            description=DESCRIPTIONS.get(name) or function.__doc__ or name,
        )
    model.install(assistant)  # after the tools: registering one rebuilds the client
    return assistant, executor


class Kit:
    """The three tools' bodies, their specs, and a real PEP over the default policy."""

    def __init__(self, workspace: Path) -> None:
        self.ran = Ran()
        bodies = Bodies(self.ran)

        # AutoGen registers functions, not bound methods: one plain function per body.
        def lookup_weather(city: str) -> str:
            return bodies.lookup_weather(city)

        def write_note(path: str, text: str) -> str:
            return bodies.write_note(path, text)

        def run_shell(command: str, cwd: str) -> str:
            return bodies.run_shell(command, cwd)

        self.functions: dict[str, Callable[..., Any]] = {
            "lookup_weather": lookup_weather,
            "write_note": write_note,
            "run_shell": run_shell,
        }
        from autogen.tools import Tool

        tools = {n: Tool(func_or_tool=f, name=n) for n, f in self.functions.items()}
        self.specs = [
            tool_spec(tools["lookup_weather"], side_effects={"network"}),
            tool_spec(tools["write_note"], side_effects={"file_write"}, path_fields=["path"]),
            tool_spec(tools["run_shell"], side_effects={"shell_command"}, cwd_field="cwd"),
        ]
        self.policy: Policy = build_policy(workspace, self.specs)
        self.workspace = workspace

    def agents(
        self, model: ScriptedModel, governor: Any = None, **policy: Any
    ) -> tuple[ConversableAgent, ConversableAgent, GovernorCapability | None, PolicyCapability]:
        assistant, executor = pair(model, self.functions)
        governed = None
        if governor is not None:
            governed = GovernorCapability(governor, **policy.pop("governor_options", {}))
            governed.add_to_agent(assistant)
        capability = PolicyCapability(
            self.policy.pep, specs=self.specs, context=self.policy.context, **policy
        )
        capability.add_to_agent(executor)
        return assistant, executor, governed, capability
