"""Every notebook in examples/ runs from top to bottom without an error.

Each notebook is executed with nbclient on the ``python3`` kernel of the interpreter that
runs the tests, offline: the provider settings that would switch a notebook to a real
model are removed from the kernel's environment, and a first cell (added in memory, never
saved) installs jevqueue's network guard inside the kernel, so a notebook that reaches
for the network fails even when it swallows the error.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat", reason="nbformat is a dev dependency")
nbclient = pytest.importorskip("nbclient", reason="nbclient is a dev dependency")

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted(ROOT.joinpath("examples").glob("*.ipynb"))
CELL_TIMEOUT = 120
# Set, any of these would point a notebook at a real provider.
PROVIDER_VARIABLES = (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "OPENAI_API_BASE",
    "ANTHROPIC_API_KEY",
    "OPENROUTER_API_KEY",
)

GUARD_ON = """
from jevqueue.testing.network import NetworkGuard as _JevqueueNetworkGuard
_jevqueue_network_guard = _JevqueueNetworkGuard().install()
"""
GUARD_CHECK = """
_blocked = _jevqueue_network_guard.take_blocked()
assert not _blocked, f"the notebook reached for the network: {_blocked}"
"""


def test_examples_are_found() -> None:
    assert NOTEBOOKS, "examples/ holds no notebook"


@pytest.mark.network_allowed  # the kernel talks to this process over 127.0.0.1 (ZeroMQ)
@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda path: path.name)
def test_notebook_runs_without_error(
    notebook: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in PROVIDER_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    # The kernel is started from this interpreter, so it imports the jevqueue under test.
    monkeypatch.setenv("PATH", str(Path(sys.executable).parent) + os.pathsep + os.environ["PATH"])
    document = nbformat.read(notebook, as_version=4)
    document.cells.insert(0, nbformat.v4.new_code_cell(GUARD_ON))
    document.cells.append(nbformat.v4.new_code_cell(GUARD_CHECK))
    client = nbclient.NotebookClient(
        document,
        timeout=CELL_TIMEOUT,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    )
    try:
        client.execute()
    except nbclient.exceptions.CellExecutionError as error:
        pytest.fail(f"{notebook.name} failed:\n{error}", pytrace=False)
    errors = [
        output
        for cell in document.cells
        if cell.cell_type == "code"
        for output in cell.get("outputs", [])
        if output.get("output_type") == "error"
    ]
    assert not errors, f"{notebook.name} produced errors: {errors}"
