"""Shared fixtures for the policy-layer tests."""

from __future__ import annotations

from typing import Any

import pytest
from jevqueue.policy import ExecutionContext

WORKSPACE = "/workspace/project"
SHA = "0123456789abcdef0123456789abcdef01234567"


def context_mapping(**changes: Any) -> dict[str, Any]:
    """The seed's context, with ``changes`` applied."""
    base: dict[str, Any] = {
        "task_id": "task-42",
        "actor_id": "coding-agent",
        "workspace": WORKSPACE,
        "git_sha": SHA,
        "environment": "local",
    }
    base.update(changes)
    return base


@pytest.fixture
def context() -> ExecutionContext:
    return ExecutionContext.coerce(context_mapping())
