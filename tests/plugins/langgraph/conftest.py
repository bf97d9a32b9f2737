"""Fixtures for the LangGraph plugin tests (the helpers live in langgraph_support.py)."""

from __future__ import annotations

import os
from typing import Any

import pytest

pytest.importorskip(
    "langgraph", reason='the LangGraph extra is not installed: pip install "jevqueue[langgraph]"'
)

from langgraph_support import Policy, Toolbox, make_policy


@pytest.fixture
def toolbox(tmp_path: Any) -> Toolbox:
    return Toolbox(workspace=os.path.realpath(tmp_path))


@pytest.fixture
def policy(tmp_path: Any) -> Policy:
    return make_policy(str(tmp_path))
