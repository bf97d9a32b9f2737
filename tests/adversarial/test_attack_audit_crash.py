"""A crash is not an attack, and an attack cannot pass for a crash.

Each crash here is real: a child process writes a log and is killed with SIGKILL at an exact
point of an append — a hook in the child kills it from inside the write it stops — and then
``jevqueue audit verify`` reads what it left, as an operator would after a power cut. A
crash leaves at most a torn last line, one record beyond the head anchor that chains from
it, or (signed) the one record its checkpoint announced: verify names it ``crash``, exits 3,
and the next open recovers it and writes a record saying so. Everything beyond that is an
edit of the files, and verify fails it (exit 1) while the writer refuses to open it.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from jevqueue.approvals import generate_key_pair
from jevqueue.audit import AuditChain, JsonlAuditLog, SQLiteAuditLog, verify_audit_log
from jevqueue.audit._jsonl_log import RECOVERY_RULE
from jevqueue.cli import main
from jevqueue.errors import AuditIntegrityError, AuditWriteError

# Writes `before` records, arms the hook named by `stop`, and appends one more: the hook
# kills the process inside that append, at exactly the point it names.
_CHILD = textwrap.dedent(
    """
    import os, signal, sys
    from jevqueue.audit import AuditChain, JsonlAuditLog, SQLiteAuditLog

    path, before, stop, key = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    log = SQLiteAuditLog(path) if path.endswith(".sqlite3") else JsonlAuditLog(path)
    chain = AuditChain(log, signing_key=key or None)


    def event(n):
        return {"tool": "write_to_file", "result": "DENY", "allowed": False,
                "reasons": [f"refusal {n}"], "environment": "local"}


    for n in range(before):
        chain.append(event(n))


    def die(*args):
        os.kill(os.getpid(), signal.SIGKILL)


    if stop == "before-anchor":  # the line is written and synced; its anchor is next
        os.pwrite = die
    elif stop == "torn-line":  # half of the line reaches the file
        write = os.write

        def torn(fd, data):
            write(fd, data[: len(data) // 2])
            die()

        os.write = torn
    elif stop == "before-record":  # (signed) announced in the checkpoint, not yet written
        os.write = die
    elif stop == "before-checkpoint":  # (signed) written and anchored, not yet signed
        replace, renames = os.replace, []

        def second_rename(*args):  # the first rename announces the record
            renames.append(args)
            if len(renames) == 2:
                die()
            replace(*args)

        os.replace = second_rename
    elif stop in ("after-row", "after-head"):  # inside the SQLite statement, before commit
        connection = log._connection
        connection.create_function("die", 0, die)
        table, change = ("audit_log", "INSERT") if stop == "after-row" else ("audit_head", "UPDATE")
        connection.execute(
            f"CREATE TEMP TRIGGER die AFTER {change} ON main.{table} BEGIN SELECT die(); END"
        )
    chain.append(event(before))
    sys.exit(3)  # not reached: the hook killed the process
    """
)


def crash(path: Path, stop: str, *, before: int = 3, key: Path | None = None) -> None:
    """Run a writer of ``path`` and kill it with SIGKILL at ``stop`` of its last append."""
    child = subprocess.run(
        [sys.executable, "-c", _CHILD, str(path), str(before), stop, str(key or "")],
        capture_output=True,
        timeout=120,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr.decode()


def verify(path: Path, *extra: str) -> Any:
    return CliRunner().invoke(main, ["audit", "verify", str(path), *extra])


def kinds(path: Path, **options: Any) -> list[str]:
    return [problem.kind for problem in verify_audit_log(path, **options).problems]


@pytest.fixture
def keys(tmp_path: Path) -> tuple[Path, Path]:
    return generate_key_pair(tmp_path / "keys" / "audit")


def event(n: int) -> dict[str, Any]:
    return {"tool": "t", "result": "DENY", "allowed": False, "reasons": [str(n)]}


# --- what a crash leaves: reported as a crash, recovered on the next open ---------------


def test_a_writer_killed_between_a_record_and_its_anchor_reads_as_a_crash(
    tmp_path: Path,
) -> None:
    path = tmp_path / "audit.jsonl"
    crash(path, "before-anchor")
    result = verify(path)
    assert result.exit_code == 3, result.output
    assert result.output.startswith("CRASH: 4 records")
    assert "crash: index 3" in result.output and "head anchor" in result.output
    assert "unanchored" not in result.output and "FAILED" not in result.output
    assert "the next open of the log recovers it" in result.output
    as_json = json.loads(verify(path, "--json").output)
    assert as_json["recoverable"] is True and as_json["ok"] is False
    assert [p["kind"] for p in as_json["problems"]] == ["crash"]

    with JsonlAuditLog(path) as log:
        records = list(log.records())
    # the crashed record is kept, and the recovery is a record of its own
    assert [r.reasons[0] for r in records[:4]] == [f"refusal {n}" for n in range(4)]
    assert records[4].rule_ids == (RECOVERY_RULE,) and records[4].allowed is False
    assert "stopped between record" in records[4].reasons[0]
    assert records[3].record_hash in records[4].reasons[0]
    assert verify(path).exit_code == 0


def test_a_writer_killed_before_its_first_anchor_reads_as_a_crash(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    crash(path, "before-anchor", before=0)
    assert Path(f"{path}.head").read_text() == ""
    assert kinds(path) == ["crash"]
    JsonlAuditLog(path).close()
    report = verify_audit_log(path)
    assert report.ok and report.count == 2, report.summary()


def test_a_writer_killed_mid_line_leaves_a_torn_line_that_reads_as_a_crash(
    tmp_path: Path,
) -> None:
    path = tmp_path / "audit.jsonl"
    crash(path, "torn-line")
    assert not path.read_bytes().endswith(b"\n")
    result = verify(path)
    assert result.exit_code == 3 and "crash: index 3" in result.output, result.output
    assert "incomplete" in result.output
    with JsonlAuditLog(path) as log:
        assert log.recovered > 0
        records = list(log.records())
    assert len(records) == 4 and records[3].rule_ids == (RECOVERY_RULE,)
    assert Path(f"{path}.torn").read_bytes().startswith(b'{"action_digest"')
    assert verify(path).exit_code == 0


def test_a_writer_that_finds_a_peer_crashed_recovers_before_its_own_record(
    tmp_path: Path,
) -> None:
    path = tmp_path / "audit.jsonl"
    with JsonlAuditLog(path) as log:
        log.append(event(0))
        crash(path, "before-anchor", before=1)  # another process, on the same file
        assert kinds(path) == ["crash"]
        mine = log.append(event(1))
        records = list(log.records())
    assert records[-1] == mine
    assert records[-2].rule_ids == (RECOVERY_RULE,)
    assert records[-2].record_hash == mine.prev_hash
    assert verify_audit_log(path).ok


@pytest.mark.parametrize("stop", ["after-row", "after-head"])
def test_sqlite_has_no_crash_state_a_killed_writer_leaves_the_last_commit(
    tmp_path: Path, stop: str
) -> None:
    path = tmp_path / "audit.sqlite3"
    crash(path, stop)  # killed inside the statement that stores the record and its head
    report = verify_audit_log(path)
    assert report.ok and report.count == 3, report.summary()
    with SQLiteAuditLog(path) as log:
        log.append(event(3))
    assert verify_audit_log(path).count == 4


# --- signed logs: the checkpoint tells the crash apart --------------------------------------


def test_a_signed_writer_killed_before_signing_its_record_reads_as_a_crash(
    tmp_path: Path, keys: tuple[Path, Path]
) -> None:
    private, public = keys
    path = tmp_path / "audit.jsonl"
    crash(path, "before-checkpoint", key=private)
    assert verify(path).exit_code == 0  # the record and its anchor were both written
    result = verify(path, "--key", str(public))
    assert result.exit_code == 3, result.output
    assert "crash: index 3" in result.output and "announced" in result.output
    with JsonlAuditLog(path) as log:
        AuditChain(log, signing_key=private)
        records = list(log.records())
    assert records[4].rule_ids == (RECOVERY_RULE,)
    assert "signed checkpoint" in records[4].reasons[0]
    assert verify(path, "--key", str(public)).exit_code == 0


def test_a_signed_writer_killed_before_its_anchor_is_recovered_by_both_halves(
    tmp_path: Path, keys: tuple[Path, Path]
) -> None:
    private, public = keys
    path = tmp_path / "audit.jsonl"
    crash(path, "before-anchor", key=private)
    report = verify_audit_log(path, public_key=private_public(public))
    assert report.recoverable and [p.kind for p in report.problems] == ["crash", "crash"]
    with JsonlAuditLog(path) as log:
        AuditChain(log, signing_key=private).append(event(9))
        rules = [record.rule_ids for record in log.records()]
    assert rules[4:6] == [(RECOVERY_RULE,), (RECOVERY_RULE,)]  # the anchor, then the signature
    assert verify(path, "--key", str(public)).exit_code == 0


def test_a_record_announced_but_never_written_is_a_note(
    tmp_path: Path, keys: tuple[Path, Path]
) -> None:
    private, public = keys
    path = tmp_path / "audit.jsonl"
    crash(path, "before-record", key=private)
    result = verify(path, "--key", str(public))
    assert result.exit_code == 0, result.output
    assert "never written" in result.output
    with JsonlAuditLog(path) as log:
        AuditChain(log, signing_key=private).append(event(3))
    assert verify(path, "--key", str(public)).exit_code == 0


def test_a_signed_sqlite_writer_killed_before_signing_its_commit_reads_as_a_crash(
    tmp_path: Path, keys: tuple[Path, Path]
) -> None:
    private, public = keys
    path = tmp_path / "audit.sqlite3"
    crash(path, "before-checkpoint", key=private)
    assert verify(path).exit_code == 0
    assert verify(path, "--key", str(public)).exit_code == 3
    with SQLiteAuditLog(path) as log:
        AuditChain(log, signing_key=private)
        assert list(log.records())[-1].rule_ids == (RECOVERY_RULE,)
    assert verify(path, "--key", str(public)).exit_code == 0


def private_public(public: Path) -> Any:
    from jevqueue.approvals import load_public_key

    return load_public_key(public)


# --- what no crash leaves: tampering, refused by the writer -------------------------------


def write_jsonl(path: Path, count: int = 4) -> list[str]:
    with JsonlAuditLog(path) as log:
        return [log.append(event(n)).record_hash for n in range(count)]


def test_two_records_beyond_the_anchor_are_not_a_crash(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    hashes = write_jsonl(path)
    Path(f"{path}.head").write_text(hashes[1] + "\n")
    result = verify(path)
    assert result.exit_code == 1 and "unanchored" in result.output
    assert "a crash leaves at most one" in result.output
    with pytest.raises(AuditIntegrityError, match="no crash leaves it so"):
        JsonlAuditLog(path)


def test_a_record_beyond_the_anchor_that_does_not_chain_from_it_is_not_a_crash(
    tmp_path: Path,
) -> None:
    path = tmp_path / "audit.jsonl"
    hashes = write_jsonl(path)
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join([*lines[:2], lines[3]]))  # index 2 deleted
    Path(f"{path}.head").write_text(hashes[1] + "\n")  # the anchor one behind
    assert "crash" not in kinds(path) and not verify_audit_log(path).recoverable
    with pytest.raises(AuditIntegrityError):
        JsonlAuditLog(path)


@pytest.mark.parametrize("cut", ["last-record", "every-record"])
def test_records_cut_below_the_anchor_are_refused_by_the_writer(tmp_path: Path, cut: str) -> None:
    path = tmp_path / "audit.jsonl"
    write_jsonl(path)
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:-1] if cut == "last-record" else []))
    assert verify(path).exit_code == 1
    with pytest.raises(AuditIntegrityError, match=r"removed|cut off"):
        JsonlAuditLog(path)
    # the refusal added nothing that would hide the cut
    assert len(path.read_bytes().splitlines()) == (3 if cut == "last-record" else 0)


def test_a_deleted_anchor_is_refused_by_the_writer(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    write_jsonl(path)
    Path(f"{path}.head").unlink()
    assert kinds(path) == ["unanchored"]
    with pytest.raises(AuditIntegrityError, match="missing"):
        JsonlAuditLog(path)


def test_a_log_cut_while_open_is_refused_for_appending(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    with JsonlAuditLog(path) as log:
        for n in range(4):
            log.append(event(n))
        lines = path.read_bytes().splitlines(keepends=True)
        path.write_bytes(b"".join(lines[:-1]))
        with pytest.raises(AuditWriteError, match="denied"):
            log.append(event(4))
    assert len(path.read_bytes().splitlines()) == 3


def test_one_record_cut_and_the_anchor_moved_back_is_caught_by_the_signature(
    tmp_path: Path, keys: tuple[Path, Path]
) -> None:
    """Without a key this is exactly what a crash leaves; with it, the checkpoint decides."""
    private, public = keys
    path = tmp_path / "audit.jsonl"
    with JsonlAuditLog(path) as log:
        chain = AuditChain(log, signing_key=private)
        hashes = [chain.append(event(n)).record_hash for n in range(4)]
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:3]))
    Path(f"{path}.head").write_text(hashes[1] + "\n")
    assert verify(path).exit_code == 3  # the anchor alone cannot tell
    result = verify(path, "--key", str(public))
    assert result.exit_code == 1, result.output
    assert "truncated" in result.output and "covers 4 records but the log holds 3" in result.output
    # The writer's log reads it as a crash and recovers it; its signing chain refuses, so
    # no new checkpoint vouches for the cut log.
    checkpoint = Path(f"{path}.checkpoint").read_bytes()
    with JsonlAuditLog(path) as log:
        assert log.recovery is not None
        with pytest.raises(AuditIntegrityError, match="cut off"):
            AuditChain(log, signing_key=private)
    assert Path(f"{path}.checkpoint").read_bytes() == checkpoint
    assert verify(path, "--key", str(public)).exit_code == 1
