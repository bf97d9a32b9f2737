"""Helpers for the LangGraph plugin tests: tools that count their runs, a real PEP over the
default policy, an approval authority, and a fixed-score governor."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

pytest.importorskip(
    "langgraph", reason='the LangGraph extra is not installed: pip install "jevqueue[langgraph]"'
)

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from jevqueue import Governor, PolicyEnforcementPoint
from jevqueue.approvals import (
    ApprovalAuthority,
    MemoryConsumedApprovals,
    SignedApprovalVerifier,
)
from jevqueue.governor import Thresholds
from jevqueue.plugins.langgraph import tool_spec
from jevqueue.policy import create_default_policy_decision_point
from jevqueue.testing.recording_audit import RecordingAuditSink
from langchain_core.messages import AIMessage
from langchain_core.tools import StructuredTool

GIT_SHA = "0123456789abcdef0123456789abcdef01234567"


class FixedBallot:
    """The same scores every turn, so the governor's path is known in advance."""

    def __init__(self, scores: Mapping[str, float]) -> None:
        self.scores = dict(scores)

    def score(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]
    ) -> Mapping[str, float]:
        return dict(self.scores)


def unparsed_call(name: str) -> AIMessage:
    """A reply whose one call of ``name`` has arguments LangChain could not parse."""
    return AIMessage(
        content="",
        invalid_tool_calls=[
            {
                "name": name,
                "args": "{not json",
                "id": "c1",
                "error": "bad json",
                "type": "invalid_tool_call",
            }
        ],
    )


def fixed_governor(**scores: float) -> Governor:
    """A governor that forces a tool at >= 0.6 with a 0.2 lead, answers in prose below 0.2."""
    return Governor(
        FixedBallot(scores), thresholds=Thresholds(confident=0.6, margin=0.2, floor=0.2)
    )


@dataclass
class Toolbox:
    """Three LangChain tools that record every run, and their declarations."""

    runs: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    workspace: str = ""

    def __post_init__(self) -> None:
        def read_file(path: str) -> str:
            """Read a text file from the workspace and return its content."""
            self.runs.append(("read_file", {"path": path}))
            return f"content of {path}"

        def write_file(path: str, content: str) -> str:
            """Write text content to a file in the workspace, replacing it."""
            self.runs.append(("write_file", {"path": path, "content": content}))
            return f"wrote {path}"

        def run_command(command: str, cwd: str) -> str:
            """Run a shell command in a directory of the workspace and return its output."""
            self.runs.append(("run_command", {"command": command, "cwd": cwd}))
            return f"ran {command}"

        self.read_file = StructuredTool.from_function(read_file)
        self.write_file = StructuredTool.from_function(write_file)
        self.run_command = StructuredTool.from_function(run_command)
        self.tools = [self.read_file, self.write_file, self.run_command]
        self.specs = [
            tool_spec(self.read_file, side_effects={"file_read"}, path_fields=["path"]),
            tool_spec(
                self.write_file,
                side_effects={"file_write"},
                path_fields=["path"],
                content_fields=["content"],
            ),
            tool_spec(
                self.run_command,
                side_effects={"shell_command"},
                cwd_field="cwd",
                required_path_fields=["cwd"],
            ),
        ]

    def ran(self, name: str) -> list[dict[str, Any]]:
        """The arguments of every run of ``name``, paths shown relative to the workspace.

        The tools receive the resolved absolute paths the policy judged (``runs`` keeps
        them raw); a path that is not absolute inside the workspace is shown as received.
        """
        return [
            {key: self._relative(key, value) for key, value in arguments.items()}
            for tool, arguments in self.runs
            if tool == name
        ]

    def _relative(self, key: str, value: Any) -> Any:
        if key not in ("path", "cwd") or not self.workspace or not isinstance(value, str):
            return value
        if value == self.workspace:
            return "."
        if value.startswith(self.workspace + "/"):
            return value[len(self.workspace) + 1 :]
        return "<as written> " + value


@dataclass
class Policy:
    pep: PolicyEnforcementPoint
    audit: RecordingAuditSink
    authority: ApprovalAuthority
    context: dict[str, str]


def make_policy(workspace: str) -> Policy:
    """A PEP over the default policy, trusting one approver ("alice"), auditing to memory."""
    key = Ed25519PrivateKey.generate()
    audit = RecordingAuditSink()
    pep = PolicyEnforcementPoint(
        create_default_policy_decision_point(),
        audit_logger=audit,
        approval_verifier=SignedApprovalVerifier({"alice": key.public_key()}),
        consumed_approvals=MemoryConsumedApprovals(),
    )
    context = {
        "task_id": "task-42",
        "actor_id": "coding-agent",
        "workspace": workspace,
        "git_sha": GIT_SHA,
    }
    return Policy(pep, audit, ApprovalAuthority(key, "alice"), context)
