"""The README's quick starts run as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)


def test_the_readme_has_both_quick_starts() -> None:
    assert len(BLOCKS) == 2


@pytest.mark.parametrize("block", BLOCKS, ids=["govern-a-turn", "judge-a-tool-call"])
def test_quick_start_runs(block: str, tmp_path: Path) -> None:
    script = tmp_path / "quick_start.py"
    script.write_text(block, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path, timeout=120
    )
    assert done.returncode == 0, done.stderr


def test_governed_turn_forces_the_weather_tool(tmp_path: Path) -> None:
    script = tmp_path / "quick_start.py"
    script.write_text(BLOCKS[0], encoding="utf-8")
    out = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, check=True, timeout=120
    ).stdout
    assert "generate get_weather" in out
    assert out.splitlines()[-1].startswith("tool get_weather")


def test_approval_flow_leaves_two_verified_decisions(tmp_path: Path) -> None:
    script = tmp_path / "quick_start.py"
    script.write_text(BLOCKS[1], encoding="utf-8")
    out = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, check=True, timeout=120
    ).stdout
    assert "count=2" in out and "problems=()" in out
