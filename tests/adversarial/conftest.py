"""Fixtures for the attacks: a sandbox on disk, a PEP with signed approvals, guarded tools."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from attack_harness import APPROVER, GuardedTools, Sandbox, make_pep
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from jevqueue.adapters import AntigravityAdapter
from jevqueue.approvals import ApprovalAuthority
from jevqueue.policy import PolicyEnforcementPoint
from jevqueue.testing.recording_audit import RecordingAuditSink


@pytest.fixture
def sandbox(tmp_path: Path) -> Sandbox:
    box = Sandbox(tmp_path)
    (box.workspace / "src").mkdir(parents=True)
    (box.workspace / "src" / "app.py").write_text("value = 1\n", "utf-8")
    (box.workspace / ".git" / "hooks").mkdir(parents=True)
    (box.workspace / ".git" / "config").write_text("[core]\n", "utf-8")
    (box.workspace / ".env.production").write_text("DB_PASSWORD=prod\n", "utf-8")
    box.outside.mkdir()
    (box.outside / "sentinel.txt").write_text("untouched\n", "utf-8")
    box.sibling.mkdir()
    (box.sibling / "sentinel.txt").write_text("untouched\n", "utf-8")
    box.state.mkdir()
    return box


@pytest.fixture
def audit() -> RecordingAuditSink:
    return RecordingAuditSink()


@pytest.fixture
def approver_key() -> Ed25519PrivateKey:
    return Ed25519PrivateKey.generate()


@pytest.fixture
def authority(approver_key: Ed25519PrivateKey) -> ApprovalAuthority:
    return ApprovalAuthority(approver_key, APPROVER, ttl=timedelta(minutes=5))


@pytest.fixture
def consumed_path(sandbox: Sandbox) -> Path:
    return sandbox.state / "consumed-approvals.sqlite3"


@pytest.fixture
def pep(
    authority: ApprovalAuthority, consumed_path: Path, audit: RecordingAuditSink
) -> Iterator[PolicyEnforcementPoint]:
    enforcement = make_pep(authority, consumed_path, audit)
    yield enforcement
    enforcement.consumed_approvals.close()


@pytest.fixture
def tools(pep: PolicyEnforcementPoint, sandbox: Sandbox) -> GuardedTools:
    return GuardedTools(AntigravityAdapter(pep), sandbox)
