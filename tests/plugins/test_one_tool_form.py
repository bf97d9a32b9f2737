"""Every plugin declares tools one way: its ``tool_spec(tool, ...)``, passed as ``specs=``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from jevqueue import (
    ConfigurationError,
    ExecutionContext,
    PolicyEnforcementPoint,
    ToolRegistry,
    ToolSpec,
    create_default_policy_decision_point,
    load_tools_file,
)
from jevqueue.testing import RecordingAuditSink


def _pep() -> PolicyEnforcementPoint:
    return PolicyEnforcementPoint(
        create_default_policy_decision_point(), audit_logger=RecordingAuditSink()
    )


def _context(tmp_path: Path) -> ExecutionContext:
    return ExecutionContext(
        task_id="t", actor_id="a", workspace=str(tmp_path), git_sha="0123456789abcdef"
    )


def _langgraph() -> dict[str, Any]:
    pytest.importorskip("langgraph")
    from jevqueue.plugins.langgraph import policy_tool_node, tool_spec
    from langchain_core.tools import tool

    @tool
    def run_shell(command: str, cwd: str) -> str:
        """Run a shell command in a directory."""
        return command

    def build(specs: Any = (), **old: Any) -> Any:
        return policy_tool_node([run_shell], pep=_pep(), specs=specs, **old)

    return {"tool": run_shell, "tool_spec": tool_spec, "build": build}


def _crewai() -> dict[str, Any]:
    pytest.importorskip("crewai")
    from crewai.tools import tool
    from jevqueue.plugins.crewai import ToolGuard, tool_spec

    @tool("run_shell")
    def run_shell(command: str, cwd: str) -> str:
        """Run a shell command in a directory."""
        return command

    def build(specs: Any = (), **old: Any) -> Any:
        context = ExecutionContext(
            task_id="t", actor_id="a", workspace="/workspace/x", git_sha="0123456789abcdef"
        )
        guard = ToolGuard(_pep(), specs=specs, context=context, **old)
        return guard.wrap([run_shell])

    return {"tool": run_shell, "tool_spec": tool_spec, "build": build}


def _openai() -> dict[str, Any]:
    pytest.importorskip("httpx")
    from jevqueue.plugins.openai import PolicyToolRunner, tool_spec

    schema = {
        "type": "function",
        "function": {
            "name": "run_shell",
            "description": "Run a shell command in a directory.",
            "parameters": {
                "type": "object",
                "properties": {"command": {"type": "string"}, "cwd": {"type": "string"}},
                "required": ["command", "cwd"],
            },
        },
    }

    def build(specs: Any = (), **old: Any) -> Any:
        context = ExecutionContext(
            task_id="t", actor_id="a", workspace="/workspace/x", git_sha="0123456789abcdef"
        )
        return PolicyToolRunner(
            {"run_shell": lambda **_: ""}, pep=_pep(), specs=specs, context=context, **old
        )

    return {"tool": schema, "tool_spec": tool_spec, "build": build}


PLUGINS: list[Callable[[], dict[str, Any]]] = [_langgraph, _crewai, _openai]
IDS = ["langgraph", "crewai", "openai"]


@pytest.mark.parametrize("plugin", PLUGINS, ids=IDS)
def test_tool_spec_reads_name_and_schema_from_the_framework_tool(plugin: Any) -> None:
    kit = plugin()
    spec = kit["tool_spec"](kit["tool"], side_effects={"shell_command"}, cwd_field="cwd")
    assert isinstance(spec, ToolSpec)
    assert spec.name == "run_shell"
    assert spec.side_effects == frozenset({"shell_command"})
    assert spec.required_path_fields == ("cwd",)  # the working directory is required
    assert spec.schema is not None and set(spec.schema["properties"]) == {"command", "cwd"}


@pytest.mark.parametrize("plugin", PLUGINS, ids=IDS)
def test_tool_spec_refuses_a_string_of_side_effects(plugin: Any) -> None:
    kit = plugin()
    with pytest.raises(ConfigurationError, match="not the string 'shell_command'"):
        kit["tool_spec"](kit["tool"], side_effects="shell_command")


@pytest.mark.parametrize("plugin", PLUGINS, ids=IDS)
def test_specs_is_the_keyword_everywhere(plugin: Any) -> None:
    kit = plugin()
    kit["build"](specs=[kit["tool_spec"](kit["tool"], side_effects={"shell_command"})])


@pytest.mark.parametrize("plugin", PLUGINS, ids=IDS)
def test_a_tools_file_feeds_specs_too(plugin: Any, tmp_path: Path) -> None:
    kit = plugin()
    path = tmp_path / "tools.toml"
    path.write_text(
        '[[tool]]\nname = "run_shell"\nside_effects = ["shell_command"]\ncwd_field = "cwd"\n',
        encoding="utf-8",
    )
    kit["build"](specs=load_tools_file(path))


@pytest.mark.parametrize("plugin", PLUGINS, ids=IDS)
def test_an_undeclared_tool_is_refused_when_built(plugin: Any) -> None:
    kit = plugin()
    with pytest.raises(ConfigurationError):
        kit["build"](specs=[])


@pytest.mark.parametrize("plugin", PLUGINS, ids=IDS)
def test_the_old_registry_keyword_still_works_and_warns(plugin: Any) -> None:
    kit = plugin()
    registry = ToolRegistry([kit["tool_spec"](kit["tool"], side_effects={"shell_command"})])
    with pytest.warns(DeprecationWarning, match="registry= is deprecated"):
        kit["build"](registry=registry)
