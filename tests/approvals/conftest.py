"""Shared pieces for the approval tests: a real action, its verdict, a signing authority."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import datetime, timezone

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from jevqueue.approvals import (
    ApprovalAuthority,
    MemoryConsumedApprovals,
    SignedApprovalVerifier,
)
from jevqueue.policy import Action, Verdict, generic_registry

CONTEXT = {
    "task_id": "task-42",
    "actor_id": "coding-agent",
    "workspace": "/workspace/project",
    "git_sha": "0123456789abcdef0123456789abcdef01234567",
    "environment": "local",
}
NOW = datetime(2026, 1, 31, 12, 0, 0, tzinfo=timezone.utc)


def build_action(command: str = "make test") -> Action:
    return Action.build(
        generic_registry(),
        "run_command",
        {"CommandLine": command, "Cwd": "/workspace/project"},
        CONTEXT,
    )


def obligation_verdict(action: Action) -> Verdict:
    verdict = Verdict.allow_with_obligations(
        ["explicit_approval"], "run_command needs explicit approval", rule_ids=("shell",)
    )
    return dataclasses.replace(verdict, action_digest=action.digest)


@pytest.fixture
def make_action() -> Callable[[str], Action]:
    return build_action


@pytest.fixture
def action() -> Action:
    return build_action()


@pytest.fixture
def now() -> datetime:
    return NOW


@pytest.fixture
def verdict(action: Action) -> Verdict:
    return obligation_verdict(action)


@pytest.fixture
def authority() -> ApprovalAuthority:
    return ApprovalAuthority(Ed25519PrivateKey.generate(), "alice@example.com")


@pytest.fixture
def verifier(authority: ApprovalAuthority) -> SignedApprovalVerifier:
    return SignedApprovalVerifier({"alice@example.com": authority.public_key})


@pytest.fixture
def consumed() -> MemoryConsumedApprovals:
    return MemoryConsumedApprovals()
