"""A real workspace on disk, real tools behind a real adapter, and a way to prove they never ran.

Every attack goes through :class:`GuardedTools`, which calls the tool only when the
adapter says it may — exactly how an agent host wires jevqueue in. The tools have real
effects (files written, shell commands run), each counted in ``tools.ran``. An attack
is refused when the adapter raises (or returns False for a repair), the tool never ran,
nothing under the sandbox changed, and the refusal is in the audit log.

As a last line of defence for the machine running the tests, the tools themselves never
touch anything outside the pytest temporary directory: an escape is recorded in
``tools.escapes`` instead (and fails the test through ``tools.ran``).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from jevqueue.adapters import AntigravityAdapter
from jevqueue.approvals import ApprovalAuthority, SignedApprovalVerifier, SQLiteConsumedApprovals
from jevqueue.errors import JevError
from jevqueue.policy import PolicyEnforcementPoint, create_default_policy_decision_point
from jevqueue.testing.recording_audit import RecordingAuditSink

SHA = "0123456789abcdef0123456789abcdef01234567"
APPROVER = "alice@example.com"


@dataclass
class Sandbox:
    """``root`` holds everything: the workspace, a sibling ``ws-evil``, an ``outside`` dir."""

    root: Path

    @property
    def workspace(self) -> Path:
        return self.root / "ws"

    @property
    def outside(self) -> Path:
        return self.root / "outside"

    @property
    def sibling(self) -> Path:
        return self.root / "ws-evil"

    @property
    def state(self) -> Path:
        return self.root / "state"

    def context(self, **overrides: Any) -> dict[str, Any]:
        base: dict[str, Any] = {
            "task_id": "task-42",
            "actor_id": "coding-agent",
            "workspace": str(self.workspace),
            "git_sha": SHA,
            "environment": "local",
        }
        base.update(overrides)
        return base

    def snapshot(self) -> dict[str, str]:
        """Every file and link under the sandbox (state files excepted) with its content."""
        seen: dict[str, str] = {}
        for directory, subdirs, files in os.walk(self.root, followlinks=False):
            base = Path(directory)
            if base == self.state or self.state in base.parents:
                continue
            for name in [*files, *subdirs]:
                path = base / name
                key = str(path.relative_to(self.root))
                if path.is_symlink():
                    seen[key] = "link->" + os.readlink(path)
                elif path.is_file():
                    seen[key] = path.read_bytes().hex()
                else:
                    seen[key] = "dir"
        return seen


def _inside(path: str, root: Path) -> bool:
    real = os.path.realpath(path)
    base = os.path.realpath(root)
    return real == base or real.startswith(base + os.sep)


@dataclass
class GuardedTools:
    """Real tool implementations that run only when the adapter allows the call."""

    adapter: AntigravityAdapter
    sandbox: Sandbox
    ran: list[str] = field(default_factory=list)
    escapes: list[str] = field(default_factory=list)

    def call(
        self,
        tool: Any,
        arguments: Any,
        context: Any = None,
        approval_records: Sequence[Any] = (),
    ) -> Any:
        context = self.sandbox.context() if context is None else context
        if self.adapter.intercept_tool_call(tool, arguments, context, approval_records):
            return self._run(tool, arguments, context)
        return None

    # --- the tools, with real effects ---------------------------------------------------

    def _path(self, value: str, context: Mapping[str, Any]) -> str:
        expanded = os.path.expanduser(value)
        if not os.path.isabs(expanded):
            expanded = os.path.join(str(context["workspace"]), expanded)
        return expanded

    def _run(self, tool: str, arguments: Mapping[str, Any], context: Mapping[str, Any]) -> Any:
        self.ran.append(tool)
        if tool in ("write_to_file", "multi_replace_file_content"):
            target = self._path(arguments["TargetFile"], context)
            if not _inside(target, self.sandbox.root):
                self.escapes.append(target)
                return None
            if tool == "write_to_file":
                os.makedirs(os.path.dirname(target), exist_ok=True)
                with open(target, "w", encoding="utf-8") as handle:
                    handle.write(arguments.get("CodeContent", ""))
                return None
            text = Path(target).read_text("utf-8")
            for chunk in arguments.get("ReplacementChunks", []):
                text = text.replace(chunk["TargetContent"], chunk["ReplacementContent"])
            Path(target).write_text(text, "utf-8")
            return None
        if tool == "view_file":
            target = self._path(arguments["AbsolutePath"], context)
            if not _inside(target, self.sandbox.root):
                self.escapes.append(target)
                return None
            return Path(target).read_text("utf-8")
        if tool == "run_command":
            cwd = self._path(arguments["Cwd"], context)
            if not _inside(cwd, self.sandbox.root):
                self.escapes.append(cwd)
                return None
            done = subprocess.run(
                arguments["CommandLine"], shell=True, cwd=cwd, capture_output=True, timeout=20
            )
            return done.returncode
        raise AssertionError(f"no real implementation for {tool!r}")


def make_pep(
    authority: ApprovalAuthority,
    consumed_path: Path,
    audit: Any,
    *,
    policy_files: Sequence[Path] = (),
) -> PolicyEnforcementPoint:
    """A PEP as a careful integrator builds it: signed approvals, durable consumption."""
    return PolicyEnforcementPoint(
        create_default_policy_decision_point(policy_files=policy_files),
        audit_logger=audit,
        approval_verifier=SignedApprovalVerifier({APPROVER: authority.public_key}),
        consumed_approvals=SQLiteConsumedApprovals(consumed_path),
    )


def assert_refused(
    tools: GuardedTools,
    audit: RecordingAuditSink | None,
    tool: Any,
    arguments: Any,
    *,
    context: Any = None,
    records: Sequence[Any] = (),
    error: type[BaseException] | tuple[type[BaseException], ...] = JevError,
) -> BaseException:
    """The call raises ``error``; the tool never ran; nothing changed; the refusal is audited."""
    before = tools.sandbox.snapshot()
    audited_before = 0 if audit is None else len(audit)
    with pytest.raises(error) as caught:
        tools.call(tool, arguments, context, records)
    assert tools.ran == [], f"the tool ran: {tools.ran}"
    assert tools.escapes == []
    assert tools.sandbox.snapshot() == before, "something under the sandbox changed"
    if audit is not None:
        assert len(audit) == audited_before + 1, "the refusal was not audited"
        assert audit.events[-1]["allowed"] is False
    return caught.value
