"""One conformance suite for the durable consumed-approval stores: SQLite and PostgreSQL.

Single use must hold across threads, processes, restarts and — for PostgreSQL — hosts:
whatever the concurrency, exactly one consumer of an approval wins.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from jevqueue.approvals import (
    ApprovalAuthority,
    ConsumedApprovalStore,
    SignedApprovalVerifier,
    SQLiteConsumedApprovals,
    check_approvals,
)
from jevqueue.errors import ConfigurationError
from jevqueue.policy import Action, Verdict

pytestmark = pytest.mark.network_allowed  # the PostgreSQL server listens on 127.0.0.1

DIGEST = "sha256:" + "cd" * 32


@dataclass
class Store:
    kind: str
    target: str
    schema: str
    open: Callable[[], Any]


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    opened: list[Any] = []
    if request.param == "sqlite":
        path = tmp_path / "consumed.sqlite3"

        def open_sqlite() -> Any:
            opened.append(SQLiteConsumedApprovals(path))
            return opened[-1]

        yield Store("sqlite", str(path), "", open_sqlite)
    else:
        url, schema = request.getfixturevalue("postgres_schema")
        from jevqueue.approvals import PostgresConsumedApprovals

        def open_postgres() -> Any:
            opened.append(PostgresConsumedApprovals(url, schema=schema))
            return opened[-1]

        yield Store("postgresql", url, schema, open_postgres)
    for each in opened:
        each.close()


def test_the_store_satisfies_the_protocol(store: Store) -> None:
    assert isinstance(store.open(), ConsumedApprovalStore)


def test_consume_is_true_once(store: Store) -> None:
    consumed = store.open()
    assert consumed.consume("apr-1", DIGEST) is True
    assert consumed.consume("apr-1", DIGEST) is False
    assert consumed.consume("apr-1", "sha256:" + "00" * 32) is False
    assert consumed.consume("apr-2", DIGEST) is True
    assert "apr-1" in consumed and "apr-3" not in consumed


def test_a_new_store_on_the_same_database_remembers(store: Store) -> None:
    first = store.open()
    assert first.consume("apr-1", DIGEST)
    first.close()
    again = store.open()
    assert "apr-1" in again
    assert again.consume("apr-1", DIGEST) is False


def test_a_replay_after_a_restart_is_refused(
    store: Store,
    verdict: Verdict,
    action: Action,
    authority: ApprovalAuthority,
    verifier: SignedApprovalVerifier,
    now: datetime,
) -> None:
    record = authority.issue(action.digest, now=now)
    before = store.open()
    assert check_approvals(
        verdict, action, [record], verifier=verifier, consumed=before, now=now
    ).allowed
    before.close()
    replay = check_approvals(
        verdict, action, [record], verifier=verifier, consumed=store.open(), now=now
    )
    assert not replay.allowed
    assert any("already used" in reason for reason in replay.reasons)


def test_threads_racing_for_one_approval_win_once(store: Store) -> None:
    consumed = store.open()
    barrier = threading.Barrier(8)
    results: list[bool] = []

    def race() -> None:
        barrier.wait()
        results.append(consumed.consume("apr-contested", DIGEST))

    threads = [threading.Thread(target=race) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == [False] * 7 + [True]


_CHILD = textwrap.dedent(
    """
    import json, sys
    from jevqueue.approvals import PostgresConsumedApprovals, SQLiteConsumedApprovals
    target, schema, digest, ids = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    if target.startswith("postgresql://"):
        store = PostgresConsumedApprovals(target, schema=schema)
    else:
        store = SQLiteConsumedApprovals(target)
    sys.stdin.readline()  # start together
    print(json.dumps([store.consume(approval_id, digest) for approval_id in ids]))
    """
)


def test_processes_racing_for_the_same_approvals_win_each_exactly_once(store: Store) -> None:
    """Four workers, each its own process and connection, all replaying 300 approvals."""
    store.open().close()
    ids = [f"apr-{n}" for n in range(300)]
    children = [
        subprocess.Popen(
            [sys.executable, "-c", _CHILD, store.target, store.schema, DIGEST, *ids],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    for child in children:
        assert child.stdin is not None
        child.stdin.write("go\n")
        child.stdin.flush()
    outcomes = [json.loads(child.communicate(timeout=120)[0]) for child in children]
    assert all(child.returncode == 0 for child in children)
    wins = [sum(column) for column in zip(*outcomes, strict=True)]
    assert wins == [1] * len(ids)


# --- pruning (PostgreSQL) ---------------------------------------------------------------


@pytest.fixture
def postgres_store(postgres_schema: tuple[str, str]) -> Iterator[Any]:
    from jevqueue.approvals import PostgresConsumedApprovals

    url, schema = postgres_schema
    consumed = PostgresConsumedApprovals(url, schema=schema)
    yield consumed
    consumed.close()


def _age(postgres_schema: tuple[str, str], approval_id: str, age: timedelta) -> None:
    import psycopg

    url, schema = postgres_schema
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(
            f'UPDATE "{schema}".consumed_approvals SET consumed_at = now() - %s '
            "WHERE approval_id = %s",
            (age, approval_id),
        )


def test_pruning_forgets_only_approvals_past_the_freshness_window(
    postgres_store: Any, postgres_schema: tuple[str, str]
) -> None:
    from jevqueue.approvals import MINIMUM_RETENTION

    for approval_id in ("old", "edge", "fresh"):
        assert postgres_store.consume(approval_id, DIGEST)
    _age(postgres_schema, "old", MINIMUM_RETENTION + timedelta(minutes=1))
    _age(postgres_schema, "edge", MINIMUM_RETENTION - timedelta(seconds=5))
    assert postgres_store.prune() == 1
    assert "old" not in postgres_store
    # Within the window a used approval stays used: a replay is still refused.
    assert postgres_store.consume("edge", DIGEST) is False
    assert postgres_store.consume("fresh", DIGEST) is False


@pytest.mark.parametrize("retention", [timedelta(minutes=1), timedelta(0), "10 minutes"])
def test_pruning_inside_the_freshness_window_is_refused(
    postgres_store: Any, retention: Any
) -> None:
    assert postgres_store.consume("apr-1", DIGEST)
    with pytest.raises(ConfigurationError, match="may still be fresh"):
        postgres_store.prune(retention)
    assert postgres_store.consume("apr-1", DIGEST) is False


def test_a_pruned_approval_is_stale_for_every_verifier(
    postgres_store: Any,
    postgres_schema: tuple[str, str],
    verdict: Verdict,
    action: Action,
    authority: ApprovalAuthority,
    verifier: SignedApprovalVerifier,
) -> None:
    """What pruning forgets can no longer pass the freshness check anyway."""
    from jevqueue.approvals import MINIMUM_RETENTION

    issued = datetime.now().astimezone()
    record = authority.issue(action.digest, now=issued)
    assert check_approvals(
        verdict, action, [record], verifier=verifier, consumed=postgres_store, now=issued
    ).allowed
    _age(postgres_schema, record.approval_id, MINIMUM_RETENTION + timedelta(seconds=1))
    assert postgres_store.prune() == 1
    later = issued + MINIMUM_RETENTION + timedelta(seconds=1)
    replay = check_approvals(
        verdict, action, [record], verifier=verifier, consumed=postgres_store, now=later
    )
    assert not replay.allowed
    assert any("stale" in reason or "expired" in reason for reason in replay.reasons)
    assert record.approval_id not in postgres_store  # refused without being consumed again
