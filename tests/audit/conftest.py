"""Shared pieces for the audit tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest


def decision(n: int = 0, result: str = "ALLOW") -> dict[str, Any]:
    return {
        "action_digest": "sha256:" + f"{n:02x}" * 32,
        "tool": "write_to_file",
        "result": result,
        "reasons": ["the target stays inside the workspace"],
        "obligations": [],
        "rule_ids": ["workspace"],
        "policy_revision": "sha256:" + "ee" * 32,
        "task_id": "task-42",
        "actor_id": "coding-agent",
        "environment": "local",
    }


@pytest.fixture
def event() -> Callable[..., dict[str, Any]]:
    return decision
