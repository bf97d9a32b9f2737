"""A bounded, seeded run of every fuzz harness: part of the suite, so a regression that the
seed corpus or a short mutation run reaches fails ``make test``.

Each harness runs in a process of its own (atheris takes over the process), from its seed
corpus under ``corpus/<name>/``, for a fixed number of inputs with a fixed libFuzzer seed
and hash seed, so a run tries the same inputs every time. ``make fuzz`` runs them far
longer. New inputs and crash files go to the test's temporary directory, never into the
corpus.
"""

from __future__ import annotations

import base64
import importlib.util
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "corpus"
SEED = 1

# Inputs per harness: a few seconds each, well under two minutes in all on a loaded machine.
RUNS = {
    "canonical_json": 2000,
    "action_build": 2000,
    "policy_file": 200,
    "tools_file": 300,
    "approval_record": 2000,
    "audit_verify": 200,
    "cli": 100,
    "mcp_proxy": 150,
}


def _atheris_installable() -> bool:
    """Where the dev extra installs atheris (its wheels: Linux x86_64, CPython 3.11-3.13)."""
    return (
        sys.platform == "linux"
        and platform.machine() == "x86_64"
        and (3, 11) <= sys.version_info[:2] < (3, 14)
    )


def _require_atheris() -> None:
    if importlib.util.find_spec("atheris") is not None:
        return
    if _atheris_installable():
        pytest.fail(
            'atheris is missing: install the dev extra (pip install -e ".[dev]"), as make '
            "test does",
            pytrace=False,
        )
    pytest.skip("atheris has no wheel for this platform or Python (Linux x86_64, 3.11-3.13)")


def test_every_harness_has_a_seed_corpus_and_a_bounded_run() -> None:
    harnesses = {path.stem.removeprefix("fuzz_") for path in HERE.glob("fuzz_*.py")}
    harnesses.discard("main")  # fuzz_main.py runs harnesses, it is none
    assert harnesses == set(RUNS)
    for name in RUNS:
        seeds = list((CORPUS / name).iterdir())
        assert seeds and all(seed.stat().st_size <= 64 * 1024 for seed in seeds), name


@pytest.mark.parametrize("name", sorted(RUNS))
def test_a_bounded_fuzz_run_finds_nothing(name: str, tmp_path: Path) -> None:
    _require_atheris()
    if name == "mcp_proxy" and importlib.util.find_spec("mcp") is None:
        pytest.skip('the MCP proxy needs the mcp extra: pip install "jevqueue[mcp]"')
    found = tmp_path / "found"
    found.mkdir()
    command = [
        sys.executable,
        str(HERE / f"fuzz_{name}.py"),
        f"-runs={RUNS[name]}",
        f"-seed={SEED}",
        "-timeout=120",
        f"-artifact_prefix={tmp_path}/",
        "-print_final_stats=1",
        str(found),
        str(CORPUS / name),
    ]
    environment = {
        **os.environ,
        "PYTHONHASHSEED": "0",
        "JEVQUEUE_STATE_DIR": str(tmp_path / "state"),
    }
    done = subprocess.run(
        command,
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        errors="replace",
        timeout=900,
    )
    crashes = sorted(tmp_path.glob("crash-*")) + sorted(tmp_path.glob("timeout-*"))
    found_inputs = "".join(
        f"\n{crash.name}: {base64.b64encode(crash.read_bytes()[:2000]).decode()}"
        for crash in crashes
    )
    assert done.returncode == 0 and not crashes, (
        f"fuzz_{name}.py exited {done.returncode}; the input (base64):{found_inputs}\n"
        f"{done.stderr[-6000:]}"
    )
    assert f"Done {RUNS[name]} runs" in done.stderr, done.stderr[-3000:]
