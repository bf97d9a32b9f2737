"""Helpers for the LlamaIndex plugin tests: tools that count their runs, a real PEP over
the default policy with a signed-approval verifier, and a fixed-score governor."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest

pytest.importorskip(
    "llama_index.core", reason='LlamaIndex is not installed: pip install "jevqueue[llamaindex]"'
)

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from jevqueue import ExecutionContext, Governor, PolicyEnforcementPoint
from jevqueue.approvals import (
    ApprovalAuthority,
    MemoryConsumedApprovals,
    SignedApprovalVerifier,
)
from jevqueue.governor import Thresholds
from jevqueue.plugins.llamaindex import tool_spec
from jevqueue.policy import create_default_policy_decision_point
from jevqueue.testing.recording_audit import RecordingAuditSink
from llama_index.core.tools import FunctionTool

GIT_SHA = "0123456789abcdef0123456789abcdef01234567"
APPROVER = "kit-approver"

T = TypeVar("T")


def run(work: Coroutine[Any, Any, T] | Callable[[], Awaitable[T]]) -> T:
    """Run a coroutine, or a callable that returns an awaitable *inside* the loop (a
    workflow's ``run()`` needs a running loop), on a fresh event loop."""

    async def main() -> T:
        return await (work() if callable(work) else work)

    return asyncio.run(main())


class FixedBallot:
    """Scores set in advance, so the governor's path is known."""

    def __init__(self, scores: Mapping[str, float]) -> None:
        self.scores = dict(scores)

    def score(self, messages: Sequence[Any], tools: Sequence[Any]) -> dict[str, float]:
        names = [tool["function"]["name"] for tool in tools]
        return {name: self.scores.get(name, 0.0) for name in names}


def fixed_governor(scores: Mapping[str, float]) -> Governor:
    """Tool at >= 0.6 with a 0.25 lead, prose below 0.2, delegate in between."""
    return Governor(
        FixedBallot(scores), thresholds=Thresholds(confident=0.6, margin=0.25, floor=0.2)
    )


FORCE_WEATHER = {"get_weather": 0.95, "delete_file": 0.05, "run_command": 0.05}
DELEGATE = {"get_weather": 0.4, "delete_file": 0.05, "run_command": 0.05}
PROSE = {"get_weather": 0.05, "delete_file": 0.05, "run_command": 0.05}


@dataclass
class Kit:
    """Tools that record their runs, the PEP they are judged by, and the approver."""

    workspace: Path
    context: ExecutionContext
    pep: PolicyEnforcementPoint
    audit: RecordingAuditSink
    authority: ApprovalAuthority
    runs: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    tools: list[FunctionTool] = field(default_factory=list)

    def specs(self) -> list[Any]:
        by_name = {tool.metadata.name: tool for tool in self.tools}
        return [
            tool_spec(by_name["get_weather"], side_effects={"network"}),
            tool_spec(by_name["delete_file"], side_effects={"file_delete"}, path_fields=["path"]),
            tool_spec(by_name["read_file"], side_effects={"file_read"}, path_fields=["path"]),
            tool_spec(by_name["run_command"], side_effects={"shell_command"}, cwd_field="cwd"),
        ]

    def names_run(self) -> list[str]:
        return [name for name, _ in self.runs]

    def results(self) -> list[str]:
        return [str(event.get("result")) for event in self.audit.events]


def build_kit(workspace: Path) -> Kit:
    context = ExecutionContext(
        task_id="llamaindex-task",
        actor_id="llamaindex-agent",
        workspace=str(workspace),
        git_sha=GIT_SHA,
    )
    key = Ed25519PrivateKey.generate()
    audit = RecordingAuditSink()
    pep = PolicyEnforcementPoint(
        create_default_policy_decision_point(),
        audit_logger=audit,
        approval_verifier=SignedApprovalVerifier({APPROVER: key.public_key()}),
        consumed_approvals=MemoryConsumedApprovals(),
    )
    kit = Kit(workspace, context, pep, audit, ApprovalAuthority(key, APPROVER))

    def get_weather(city: str) -> str:
        """Current weather forecast for a city: temperature, rain and wind."""
        kit.runs.append(("get_weather", {"city": city}))
        return f"Sunny in {city}, 21 C"

    def delete_file(path: str) -> str:
        """Delete a file from the workspace permanently."""
        kit.runs.append(("delete_file", {"path": path}))
        return f"deleted {path}"

    def read_file(path: str) -> str:
        """Read a text file from the workspace."""
        kit.runs.append(("read_file", {"path": path}))
        return Path(path).read_text() if Path(path).is_absolute() else f"relative {path}"

    def run_command(command: str, cwd: str) -> str:
        """Run a shell command in the workspace and return its output."""
        kit.runs.append(("run_command", {"command": command, "cwd": cwd}))
        return f"ran {command}"

    kit.tools = [
        FunctionTool.from_defaults(fn) for fn in (get_weather, delete_file, read_file, run_command)
    ]
    return kit
