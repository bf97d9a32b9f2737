"""One governed agent, rebuilt the same way in two processes: the one that pauses for an
approval and the one that resumes from the serialized context.

Everything durable lives in files under one folder: the tools' run log, the SQLite audit
log, the SQLite consumed-approval store and the approver's key. Run as a script, it is the
second process: it resumes the paused run and answers the approval.

    python resume_agent.py <folder>
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
    load_pem_private_key,
)
from jevqueue import ExecutionContext, PolicyEnforcementPoint
from jevqueue.approvals import (
    ApprovalAuthority,
    SignedApprovalVerifier,
    SQLiteConsumedApprovals,
)
from jevqueue.audit import SQLiteAuditLog
from jevqueue.governor import Thresholds
from jevqueue.plugins.llamaindex import (
    ApprovalResponseEvent,
    GovernedFunctionAgent,
    tool_spec,
)
from jevqueue.plugins.llamaindex.testing import ScriptedFunctionCallingLLM
from jevqueue.policy import create_default_policy_decision_point
from llama_index.core.tools import FunctionTool
from llama_index.core.workflow import Context

APPROVER = "resume-approver"
GIT_SHA = "0123456789abcdef0123456789abcdef01234567"


class Delegating:
    """A ballot that scores every tool in the middle band: every step delegates."""

    def score(self, messages: Any, tools: Any) -> dict[str, float]:
        return {tool["function"]["name"]: 0.4 for tool in tools}


def authority(folder: Path) -> ApprovalAuthority:
    """The approver, with a key kept in the folder (created on first use)."""
    path = folder / "approver.pem"
    if not path.exists():
        key = Ed25519PrivateKey.generate()
        path.write_bytes(key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()))
    key = load_pem_private_key(path.read_bytes(), password=None)
    assert isinstance(key, Ed25519PrivateKey)
    return ApprovalAuthority(key, APPROVER)


def build_agent(folder: Path, steps: list[Any]) -> tuple[GovernedFunctionAgent, Any]:
    """The agent over durable files; ``steps`` script the model for this process."""
    from jevqueue import Governor

    runs = folder / "runs.jsonl"
    workspace = folder / "workspace"
    workspace.mkdir(exist_ok=True)

    def log(name: str, arguments: dict[str, Any]) -> None:
        with runs.open("a") as handle:
            handle.write(json.dumps([name, arguments]) + "\n")

    def get_weather(city: str) -> str:
        """Current weather forecast for a city."""
        log("get_weather", {"city": city})
        return f"Sunny in {city}; the week's forecasts are in ./forecasts/{city.lower()}"

    def run_command(command: str, cwd: str) -> str:
        """Run a shell command in the workspace."""
        log("run_command", {"command": command, "cwd": cwd})
        return f"ran {command}"

    tools = [FunctionTool.from_defaults(get_weather), FunctionTool.from_defaults(run_command)]
    pep = PolicyEnforcementPoint(
        create_default_policy_decision_point(),
        audit_logger=SQLiteAuditLog(folder / "audit.sqlite"),
        approval_verifier=SignedApprovalVerifier({APPROVER: authority(folder).public_key}),
        consumed_approvals=SQLiteConsumedApprovals(folder / "consumed.sqlite"),
    )
    llm = ScriptedFunctionCallingLLM(steps=steps)
    agent = GovernedFunctionAgent(
        llm=llm,
        governor=Governor(
            Delegating(), thresholds=Thresholds(confident=0.6, margin=0.25, floor=0.2)
        ),
        tools=tools,
        pep=pep,
        specs=[
            tool_spec(tools[0], side_effects={"network"}),
            tool_spec(tools[1], side_effects={"shell_command"}, cwd_field="cwd"),
        ],
        context=ExecutionContext(
            task_id="resume-task",
            actor_id="resume-agent",
            workspace=str(workspace),
            git_sha=GIT_SHA,
        ),
        streaming=False,
    )
    return agent, llm


def runs(folder: Path) -> list[list[Any]]:
    """Every tool run, in both processes, in order."""
    path = folder / "runs.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


async def resume(folder: Path) -> str:
    """The second process: resume the paused run, approve, finish."""
    agent, llm = build_agent(folder, ["Listed the files and checked the weather."])
    data = json.loads((folder / "context.json").read_text())
    digest = (folder / "digest.txt").read_text().strip()
    ctx = Context.from_dict(agent, data)
    handler = agent.run(ctx=ctx)
    record = authority(folder).issue(digest)
    handler.ctx.send_event(ApprovalResponseEvent.approve(record))
    result = await handler
    llm.assert_complete()
    return str(result)


if __name__ == "__main__":
    print(asyncio.run(resume(Path(sys.argv[1]))))
