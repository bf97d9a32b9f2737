"""Consumed approvals: single use survives a restart, and concurrent users get one win."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
from datetime import datetime
from pathlib import Path

import pytest
from jevqueue.approvals import (
    ApprovalAuthority,
    ConsumedApprovalStore,
    MemoryConsumedApprovals,
    SignedApprovalVerifier,
    SQLiteConsumedApprovals,
    check_approvals,
    default_consumed_approvals_path,
)
from jevqueue.errors import ConfigurationError
from jevqueue.policy import Action, Verdict

DIGEST = "sha256:" + "cd" * 32


def test_both_stores_satisfy_the_protocol(tmp_path: Path) -> None:
    assert isinstance(MemoryConsumedApprovals(), ConsumedApprovalStore)
    assert isinstance(SQLiteConsumedApprovals(tmp_path / "c.sqlite3"), ConsumedApprovalStore)


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_consume_is_true_once(tmp_path: Path, kind: str) -> None:
    store: ConsumedApprovalStore = (
        MemoryConsumedApprovals() if kind == "memory" else SQLiteConsumedApprovals(tmp_path / "c")
    )
    assert store.consume("apr-1", DIGEST) is True
    assert store.consume("apr-1", DIGEST) is False
    assert store.consume("apr-1", "sha256:" + "00" * 32) is False
    assert store.consume("apr-2", DIGEST) is True


def test_a_new_store_on_the_same_file_remembers(tmp_path: Path) -> None:
    path = tmp_path / "state" / "consumed.sqlite3"
    first = SQLiteConsumedApprovals(path)
    assert first.consume("apr-1", DIGEST)
    first.close()
    again = SQLiteConsumedApprovals(path)
    assert "apr-1" in again
    assert again.consume("apr-1", DIGEST) is False


def test_the_memory_store_forgets_on_restart() -> None:
    """Documented behaviour: the memory store is for tests, a new one has seen nothing."""
    assert MemoryConsumedApprovals().consume("apr-1", DIGEST)
    assert MemoryConsumedApprovals().consume("apr-1", DIGEST)


def test_replay_after_restart_is_refused(
    tmp_path: Path,
    verdict: Verdict,
    action: Action,
    authority: ApprovalAuthority,
    verifier: SignedApprovalVerifier,
    now: datetime,
) -> None:
    path = tmp_path / "consumed.sqlite3"
    record = authority.issue(action.digest, now=now)
    before = SQLiteConsumedApprovals(path)
    assert check_approvals(
        verdict, action, [record], verifier=verifier, consumed=before, now=now
    ).allowed
    before.close()
    after_restart = SQLiteConsumedApprovals(path)
    replay = check_approvals(
        verdict, action, [record], verifier=verifier, consumed=after_restart, now=now
    )
    assert not replay.allowed
    assert any("already used" in reason for reason in replay.reasons)


_CHILD = textwrap.dedent(
    """
    import json, sys
    from jevqueue.approvals import SQLiteConsumedApprovals
    store = SQLiteConsumedApprovals(sys.argv[1])
    results = [store.consume(approval_id, sys.argv[2]) for approval_id in sys.argv[3:]]
    print(json.dumps(results))
    """
)


def _consume_in_child(path: Path, *approval_ids: str) -> list[bool]:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(path), DIGEST, *approval_ids],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    results: list[bool] = json.loads(done.stdout)
    return results


def test_an_approval_used_in_another_process_stays_used(tmp_path: Path) -> None:
    path = tmp_path / "consumed.sqlite3"
    assert _consume_in_child(path, "apr-1") == [True]
    assert _consume_in_child(path, "apr-1", "apr-2") == [False, True]
    assert SQLiteConsumedApprovals(path).consume("apr-2", DIGEST) is False


def test_two_processes_racing_for_the_same_approvals_win_each_once(tmp_path: Path) -> None:
    path = tmp_path / "consumed.sqlite3"
    SQLiteConsumedApprovals(path).close()
    ids = [f"apr-{n}" for n in range(200)]
    children = [
        subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(path), DIGEST, *ids],
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outcomes = [json.loads(child.communicate(timeout=60)[0]) for child in children]
    assert all(child.returncode == 0 for child in children)
    wins = [a + b for a, b in zip(outcomes[0], outcomes[1], strict=True)]
    assert wins == [1] * len(ids)


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_threads_racing_for_one_approval_win_once(tmp_path: Path, kind: str) -> None:
    store: ConsumedApprovalStore = (
        MemoryConsumedApprovals() if kind == "memory" else SQLiteConsumedApprovals(tmp_path / "c")
    )
    barrier = threading.Barrier(8)
    results: list[bool] = []

    def race() -> None:
        barrier.wait()
        results.append(store.consume("apr-contested", DIGEST))

    threads = [threading.Thread(target=race) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == [False] * 7 + [True]


def test_an_unopenable_path_is_a_configuration_error(tmp_path: Path) -> None:
    (tmp_path / "a-directory").mkdir()
    with pytest.raises(ConfigurationError, match="consumed-approval store"):
        SQLiteConsumedApprovals(tmp_path / "a-directory")


def test_the_default_path_follows_the_state_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JEVQUEUE_STATE_DIR", str(tmp_path))
    assert default_consumed_approvals_path() == tmp_path / "consumed-approvals.sqlite3"
    monkeypatch.delenv("JEVQUEUE_STATE_DIR")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert default_consumed_approvals_path() == (
        tmp_path / "xdg" / "jevqueue" / "consumed-approvals.sqlite3"
    )
