"""AutoGen plugin tests: a real AgentChat and a real classic AutoGen (ag2), no network.

Each test module skips on its own when its world's extra is missing: AgentChat is
``jevqueue[autogen]``, classic AutoGen ``jevqueue[ag2]``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# ag2 and AgentChat report nothing by default; make sure of it for any version.
os.environ.setdefault("AUTOGEN_USE_DOCKER", "False")


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "workspace"
    root.mkdir()
    return root
