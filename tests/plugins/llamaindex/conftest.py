"""LlamaIndex plugin tests: real agents and workflows, only the model is scripted."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip(
    "llama_index.core", reason='LlamaIndex is not installed: pip install "jevqueue[llamaindex]"'
)

from llamaindex_kit import Kit, build_kit


@pytest.fixture
def kit(tmp_path: Path) -> Kit:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    return build_kit(workspace)
