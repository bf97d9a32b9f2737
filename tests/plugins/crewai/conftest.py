"""CrewAI plugin tests: a real CrewAI, no telemetry, no network, a real policy.

CrewAI reports telemetry and traces unless told not to; the variables below are set before
CrewAI is imported, and the suite-wide network guard turns anything that still reaches
out into a failure.
"""

from __future__ import annotations

import os
import tempfile

for _name in (
    "CREWAI_DISABLE_TELEMETRY",
    "CREWAI_DISABLE_TRACKING",
    "OTEL_SDK_DISABLED",
    "CREWAI_DISABLE_VERSION_CHECK",
):
    os.environ[_name] = "true"
os.environ["CREWAI_TRACING_ENABLED"] = "false"
os.environ.setdefault("CREWAI_STORAGE_DIR", tempfile.mkdtemp(prefix="jevqueue-crewai-"))

from collections.abc import Iterator  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

pytest.importorskip("crewai", reason='CrewAI is not installed: pip install "jevqueue[crewai]"')

from crew_kit import Kit, build_kit  # noqa: E402
from crewai.hooks.dispatch import InterceptionPoint, get_hooks  # noqa: E402


@pytest.fixture
def kit(tmp_path: Path) -> Kit:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    return build_kit(workspace)


@pytest.fixture(autouse=True)
def _no_hook_leaks() -> Iterator[None]:
    """A test that installs tool hooks must remove them: they are process-wide."""
    before = (
        len(get_hooks(InterceptionPoint.PRE_TOOL_CALL)),
        len(get_hooks(InterceptionPoint.POST_TOOL_CALL)),
    )
    yield
    after = (
        len(get_hooks(InterceptionPoint.PRE_TOOL_CALL)),
        len(get_hooks(InterceptionPoint.POST_TOOL_CALL)),
    )
    assert after == before, f"tool hooks leaked: {before} -> {after}"
