"""Several processes that create the same new SQLite log at the same moment.

Switching a new file to WAL mode takes a lock SQLite does not wait for, so without a
retry about one trial in twenty (and up to half on a busy machine) failed with "database
is locked". Each trial here starts the processes on a fresh path behind a barrier, so they
open it together; every one must open it, append, and leave one verified chain.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from jevqueue.audit import SQLiteAuditLog, verify_audit_log

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")


def _open_and_append(path: Path, record: dict[str, Any], barrier: Any, results: Any) -> None:
    barrier.wait()
    try:
        with SQLiteAuditLog(path) as log:
            log.append(record)
    except Exception as error:  # reported to the parent, which fails the test
        results.put(f"{type(error).__name__}: {error}")
    else:
        results.put("ok")


@pytest.mark.parametrize(("processes", "trials"), [(2, 25), (3, 25), (4, 40)])
def test_processes_creating_one_new_log_together_all_succeed(
    tmp_path: Path, processes: int, trials: int, event: Callable[..., dict[str, Any]]
) -> None:
    context = multiprocessing.get_context("fork")
    for trial in range(trials):
        path = tmp_path / f"trial-{trial}" / "audit.sqlite3"
        barrier = context.Barrier(processes)
        results = context.Queue()
        children = [
            context.Process(target=_open_and_append, args=(path, event(index), barrier, results))
            for index in range(processes)
        ]
        for child in children:
            child.start()
        outcomes = [results.get(timeout=30) for _ in children]
        for child in children:
            child.join(timeout=30)
        assert outcomes == ["ok"] * processes, f"trial {trial}: {outcomes}"
        report = verify_audit_log(path)
        assert report.ok and report.count == processes, f"trial {trial}: {report}"
