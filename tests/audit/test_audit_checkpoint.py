"""Signed checkpoints: the file, how a log stands to it, and the chain that keeps it."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from jevqueue.audit import (
    GENESIS_HASH,
    AuditChain,
    JsonlAuditLog,
    SQLiteAuditLog,
    verify_audit_log,
)
from jevqueue.audit._checkpoint import (
    Checkpoint,
    LegacyCheckpoint,
    LogEnds,
    checkpoint_fit,
    checkpoint_path,
    read_checkpoint,
    sign_checkpoint,
    write_checkpoint,
)
from jevqueue.errors import AuditReadError, AuditWriteError, ConfigurationError

Event = Callable[..., dict[str, Any]]


def h(n: int) -> str:
    return "sha256:" + f"{n:064x}"


@pytest.fixture
def key() -> Ed25519PrivateKey:
    return Ed25519PrivateKey.generate()


def test_a_checkpoint_signs_the_log_the_count_and_the_head(
    tmp_path: Path, key: Ed25519PrivateKey
) -> None:
    path = tmp_path / "audit.jsonl.checkpoint"
    written = sign_checkpoint(key, h(1), 3, h(3), h(4))
    write_checkpoint(path, written, sync=True, sync_directory=True)
    read = read_checkpoint(path)
    assert read == written and isinstance(read, Checkpoint)
    assert read.verify(key.public_key())
    assert not read.verify(Ed25519PrivateKey.generate().public_key())
    data = json.loads(path.read_text())
    for change in ({"log_id": h(2)}, {"count": 2}, {"head": h(2)}, {"pending": ""}):
        forged = {**data, **change}
        path.write_text(json.dumps(forged))
        again = read_checkpoint(path)
        assert again is not None and not again.verify(key.public_key()), change
    assert not (tmp_path / "audit.jsonl.checkpoint.partial").exists()


def test_a_checkpoint_of_the_first_format_reads_as_such(tmp_path: Path) -> None:
    path = tmp_path / "log.checkpoint"
    path.write_text(json.dumps({"head": h(1), "signature": "AAAA"}))
    assert read_checkpoint(path) == LegacyCheckpoint(h(1), "AAAA")
    assert read_checkpoint(tmp_path / "missing") is None


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        "[]",
        '{"format": 2}',
        '{"format": 2, "log_id": "", "count": -1, "head": "", "pending": "", "signature": ""}',
        '{"head": 1, "signature": "x"}',
    ],
)
def test_a_malformed_checkpoint_is_an_audit_read_error(tmp_path: Path, text: str) -> None:
    path = tmp_path / "log.checkpoint"
    path.write_text(text)
    with pytest.raises(AuditReadError, match="checkpoint"):
        read_checkpoint(path)


def _fit(checkpoint: Checkpoint, hashes: list[str]) -> str:
    return checkpoint_fit(checkpoint, LogEnds.of(_records(hashes), checkpoint.count))


def _records(hashes: list[str]) -> list[Any]:
    class Stub:
        def __init__(self, value: str) -> None:
            self.record_hash = value

    return [Stub(value) for value in hashes]


@pytest.mark.parametrize(
    ("hashes", "fit"),
    [
        ([h(1), h(2), h(3)], "announced"),  # the announced record was never written
        ([h(1), h(2), h(3), h(4)], "crash"),  # the announced record, not yet signed
        ([h(1), h(2), h(3), h(9)], "beyond"),  # another record than the announced one
        ([h(1), h(2), h(3), h(4), h(5)], "beyond"),  # more than a crash leaves
        ([h(1), h(2)], "truncated"),
        ([], "truncated"),
        ([h(1), h(2), h(8)], "rewritten"),
        ([h(7), h(2), h(3)], "foreign"),
    ],
)
def test_how_a_log_stands_to_its_checkpoint(
    key: Ed25519PrivateKey, hashes: list[str], fit: str
) -> None:
    assert _fit(sign_checkpoint(key, h(1), 3, h(3), h(4)), hashes) == fit


def test_a_checkpoint_without_an_announcement_covers_nothing_beyond(
    key: Ed25519PrivateKey,
) -> None:
    checkpoint = sign_checkpoint(key, h(1), 2, h(2))
    assert _fit(checkpoint, [h(1), h(2)]) == "covered"
    assert _fit(checkpoint, [h(1), h(2), h(3)]) == "beyond"
    first = sign_checkpoint(key, h(1), 0, GENESIS_HASH, h(1))  # before the first record
    assert _fit(first, []) == "announced"
    assert _fit(first, [h(1)]) == "crash"
    assert _fit(first, [h(5)]) == "beyond"


# --- the signing chain --------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["sqlite", "jsonl"])
def test_threads_appending_to_a_signed_log_leave_it_signed_to_its_end(
    kind: str, tmp_path: Path, key: Ed25519PrivateKey, event: Event
) -> None:
    path = tmp_path / ("audit.sqlite3" if kind == "sqlite" else "audit.jsonl")
    log = SQLiteAuditLog(path) if kind == "sqlite" else JsonlAuditLog(path, fsync=False)
    chain = AuditChain(log, signing_key=key)
    threads = [
        threading.Thread(target=lambda n=n: [chain.append(event(n)) for _ in range(25)])
        for n in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    log.close()
    report = verify_audit_log(path, public_key=key.public_key())
    assert report.ok and report.count == 100, report.summary()
    checkpoint = read_checkpoint(checkpoint_path(path))
    assert isinstance(checkpoint, Checkpoint)
    assert (checkpoint.log_id, checkpoint.count, checkpoint.head, checkpoint.pending) == (
        report.log_id,
        100,
        report.head_hash,
        "",
    )


def test_a_signed_chain_stops_when_another_writer_appends(
    tmp_path: Path, key: Ed25519PrivateKey, event: Event
) -> None:
    path = tmp_path / "audit.jsonl"
    with JsonlAuditLog(path) as log, JsonlAuditLog(path) as intruder:
        chain = AuditChain(log, signing_key=key)
        chain.append(event(1))
        intruder.append(event(2))
        for n in (3, 4):
            with pytest.raises(AuditWriteError, match="another writer"):
                chain.append(event(n))
    assert not verify_audit_log(path, public_key=key.public_key()).ok


def test_a_signing_key_needs_a_log_file(key: Ed25519PrivateKey) -> None:
    class Sink:
        path = "postgresql://db/agents"

        def append(self, event: Any) -> None:
            pass

    with pytest.raises(ConfigurationError, match="log file"):
        AuditChain(Sink(), signing_key=key)


def test_a_malformed_event_on_a_signed_chain_writes_nothing(
    tmp_path: Path, key: Ed25519PrivateKey, event: Event
) -> None:
    path = tmp_path / "audit.sqlite3"
    with SQLiteAuditLog(path) as log:
        chain = AuditChain(log, signing_key=key)
        chain.append(event(1))
        before = checkpoint_path(path).read_bytes()
        with pytest.raises(AuditWriteError):
            chain.append({"tool": "t"})  # no result
        assert checkpoint_path(path).read_bytes() == before
        chain.append(event(2))
    assert verify_audit_log(path, public_key=key.public_key()).ok
