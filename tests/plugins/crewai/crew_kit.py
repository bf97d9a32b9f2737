"""Shared test kit for the CrewAI plugin tests: real tools, a real PEP, a fixed ballot."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crewai import Agent, Crew, Task
from crewai.tools import BaseTool, tool
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from jevqueue.approvals import (
    ApprovalAuthority,
    MemoryConsumedApprovals,
    SignedApprovalVerifier,
)
from jevqueue.plugins.crewai import ToolGuard, tool_spec
from jevqueue.policy import (
    ExecutionContext,
    PolicyEnforcementPoint,
    ToolRegistry,
    create_default_policy_decision_point,
)
from jevqueue.testing.recording_audit import RecordingAuditSink
from pydantic import BaseModel, Field

GIT_SHA = "0123456789abcdef0123456789abcdef01234567"
APPROVER = "crew-approver"


class FixedBallot:
    """Scores set in advance, so the governor's path is known."""

    def __init__(self, scores: Mapping[str, float]) -> None:
        self.scores = dict(scores)

    def score(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]
    ) -> Mapping[str, float]:
        names = [t["function"]["name"] if "function" in t else t["name"] for t in tools]
        return {name: self.scores.get(name, 0.0) for name in names}


@dataclass
class Ran:
    """What the tools' bodies actually executed."""

    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def names(self) -> list[str]:
        return [name for name, _ in self.calls]


class WriteNoteInput(BaseModel):
    path: str = Field(description="Where to write, relative to the workspace.")
    text: str = Field(description="What to write.")


@dataclass
class Kit:
    """Real CrewAI tools, a real PEP over the default policy, and a guard."""

    ran: Ran
    tools: dict[str, BaseTool]
    registry: ToolRegistry
    audit: RecordingAuditSink
    pep: PolicyEnforcementPoint
    authority: ApprovalAuthority
    context: ExecutionContext
    workspace: Path

    def guard(self, **kwargs: Any) -> ToolGuard:
        return ToolGuard(self.pep, specs=self.registry, context=self.context, **kwargs)

    def results(self) -> list[tuple[str, str]]:
        return [(e["tool"], e["result"]) for e in self.audit.events]


def build_kit(workspace: Path) -> Kit:
    ran = Ran()

    @tool("lookup_weather")
    def lookup_weather(city: str) -> str:
        """Current weather forecast for a city: temperature, rain and wind."""
        ran.calls.append(("lookup_weather", {"city": city}))
        return f"Sunny and 24 C in {city}."

    class WriteNoteTool(BaseTool):
        name: str = "write_note"
        description: str = "Write a text note to a file in the workspace."
        args_schema: type[BaseModel] = WriteNoteInput

        def _run(self, path: str, text: str) -> str:
            ran.calls.append(("write_note", {"path": path, "text": text}))
            return f"wrote {len(text)} characters to {path}"

    @tool("run_shell")
    def run_shell(command: str, cwd: str) -> str:
        """Run a shell command in the workspace and return its output."""
        ran.calls.append(("run_shell", {"command": command, "cwd": cwd}))
        return f"$ {command}\nok"

    write_note = WriteNoteTool()
    registry = ToolRegistry()
    registry.register(tool_spec(lookup_weather, side_effects={"network"}))
    registry.register(tool_spec(write_note, side_effects={"file_write"}, path_fields=("path",)))
    registry.register(
        tool_spec(
            run_shell,
            side_effects={"shell_command"},
            cwd_field="cwd",
            required_path_fields=("cwd",),
        )
    )
    key = Ed25519PrivateKey.generate()
    authority = ApprovalAuthority(key, APPROVER)
    audit = RecordingAuditSink()
    pep = PolicyEnforcementPoint(
        create_default_policy_decision_point(registry=registry),
        audit_logger=audit,
        approval_verifier=SignedApprovalVerifier({APPROVER: key.public_key()}),
        consumed_approvals=MemoryConsumedApprovals(),
    )
    context = ExecutionContext(
        task_id="crew-task-1",
        actor_id="crew-agent",
        workspace=str(workspace),
        git_sha=GIT_SHA,
    )
    return Kit(
        ran=ran,
        tools={"lookup_weather": lookup_weather, "write_note": write_note, "run_shell": run_shell},
        registry=registry,
        audit=audit,
        pep=pep,
        authority=authority,
        context=context,
        workspace=workspace,
    )


def make_crew(llm: Any, tools: Sequence[BaseTool], request: str) -> Crew:
    """One agent with ``tools``, one task asking ``request``, in a real Crew."""
    agent = Agent(
        role="Assistant",
        goal="Help the user with their request",
        backstory="A careful assistant.",
        llm=llm,
        tools=list(tools),
        verbose=False,
        max_iter=4,
        allow_delegation=False,
    )
    task = Task(description=request, expected_output="A short answer.", agent=agent)
    return Crew(agents=[agent], tasks=[task], verbose=False)
