"""Shared kit for the AutoGen tests of both worlds: real tools' bodies, a real PEP over the
default policy, an approval authority, and a fixed ballot."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from jevqueue import Governor, Thresholds
from jevqueue.approvals import ApprovalAuthority, MemoryConsumedApprovals, SignedApprovalVerifier
from jevqueue.policy import (
    ExecutionContext,
    PolicyEnforcementPoint,
    ToolRegistry,
    ToolSpec,
    create_default_policy_decision_point,
)
from jevqueue.testing.recording_audit import RecordingAuditSink

GIT_SHA = "0123456789abcdef0123456789abcdef01234567"
APPROVER = "autogen-approver"
THRESHOLDS = Thresholds(confident=0.6, margin=0.25, floor=0.2)
WEATHER = {"lookup_weather": 0.95, "write_note": 0.1, "run_shell": 0.05}


class FixedBallot:
    """Scores set in advance, so the governor's path is known."""

    def __init__(self, scores: Mapping[str, float]) -> None:
        self.scores = dict(scores)

    def score(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]
    ) -> Mapping[str, float]:
        names = [t["function"]["name"] if "function" in t else t["name"] for t in tools]
        return {name: self.scores.get(name, 0.0) for name in names}


def governor(scores: Mapping[str, float] | None = None) -> Governor:
    """A governor whose ballot gives ``scores`` (prose when empty)."""
    return Governor(FixedBallot(scores or {}), thresholds=THRESHOLDS)


@dataclass
class Ran:
    """What the tools' bodies actually executed."""

    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def names(self) -> list[str]:
        return [name for name, _ in self.calls]


@dataclass
class Bodies:
    """The three tools' bodies, recording every execution in ``ran``."""

    ran: Ran

    def lookup_weather(self, city: str) -> str:
        self.ran.calls.append(("lookup_weather", {"city": city}))
        return f"Sunny and 24 C in {city}."

    def write_note(self, path: str, text: str) -> str:
        self.ran.calls.append(("write_note", {"path": path, "text": text}))
        return f"wrote {len(text)} characters to {path}"

    def run_shell(self, command: str, cwd: str) -> str:
        self.ran.calls.append(("run_shell", {"command": command, "cwd": cwd}))
        return f"$ {command}\nok"


DESCRIPTIONS = {
    "lookup_weather": "Current weather forecast for a city: temperature, rain and wind.",
    "write_note": "Write a text note to a file in the workspace.",
    "run_shell": "Run a shell command in the workspace and return its output.",
}


@dataclass
class Policy:
    """A real PEP over the default policy, its audit sink, and a trusted approver."""

    pep: PolicyEnforcementPoint
    audit: RecordingAuditSink
    authority: ApprovalAuthority
    context: ExecutionContext
    workspace: Path

    def results(self) -> list[tuple[str, str]]:
        return [(e["tool"], e["result"]) for e in self.audit.events]


def build_policy(workspace: Path, specs: Sequence[ToolSpec]) -> Policy:
    key = Ed25519PrivateKey.generate()
    audit = RecordingAuditSink()
    pep = PolicyEnforcementPoint(
        create_default_policy_decision_point(registry=ToolRegistry(specs)),
        audit_logger=audit,
        approval_verifier=SignedApprovalVerifier({APPROVER: key.public_key()}),
        consumed_approvals=MemoryConsumedApprovals(),
    )
    context = ExecutionContext(
        task_id="autogen-task-1",
        actor_id="autogen-agent",
        workspace=str(workspace),
        git_sha=GIT_SHA,
    )
    return Policy(pep, audit, ApprovalAuthority(key, APPROVER), context, workspace)
