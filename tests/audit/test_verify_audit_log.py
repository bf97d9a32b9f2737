"""verify_audit_log and `jevqueue audit verify`: every kind of tampering, named and located."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from jevqueue.audit import (
    AuditRecord,
    JsonlAuditLog,
    SQLiteAuditLog,
    VerificationReport,
    verify_audit_log,
)
from jevqueue.audit._sqlite_log import COLUMNS
from jevqueue.cli import main
from jevqueue.errors import AuditIntegrityError, AuditReadError

Event = Callable[..., dict[str, Any]]


def write_log(kind: str, tmp_path: Path, event: Event, count: int = 6) -> tuple[Path, list[str]]:
    path = tmp_path / ("audit.sqlite3" if kind == "sqlite" else "audit.jsonl")
    log = SQLiteAuditLog(path) if kind == "sqlite" else JsonlAuditLog(path, fsync=False)
    ids = [log.append(event(n)).decision_id for n in range(count)]
    log.close()
    return path, ids


def kinds(report: VerificationReport) -> list[str]:
    return [problem.kind for problem in report.problems]


# --- the SQLite log -----------------------------------------------------------------------


def _sql(path: Path, *statements: str) -> None:
    connection = sqlite3.connect(path)
    for statement in statements:
        connection.execute(statement)
    connection.commit()
    connection.close()


def test_sqlite_edit_is_found_with_its_decision_id(tmp_path: Path, event: Event) -> None:
    path, ids = write_log("sqlite", tmp_path, event)
    _sql(path, "UPDATE audit_log SET result = 'ALLOW', reasons = '[]' WHERE seq = 2")
    report = verify_audit_log(path)
    assert kinds(report) == ["edited"]
    assert (report.problems[0].index, report.problems[0].decision_id) == (2, ids[2])


def test_sqlite_deletion_is_found(tmp_path: Path, event: Event) -> None:
    path, ids = write_log("sqlite", tmp_path, event)
    _sql(path, "DELETE FROM audit_log WHERE seq = 2")
    report = verify_audit_log(path)
    assert "deleted" in kinds(report)
    deleted = next(p for p in report.problems if p.kind == "deleted" and p.index is not None)
    assert (deleted.index, deleted.decision_id) == (2, ids[3])


def test_sqlite_reordering_is_found(tmp_path: Path, event: Event) -> None:
    path, ids = write_log("sqlite", tmp_path, event)
    columns = [name for name in COLUMNS if name != "seq"]
    connection = sqlite3.connect(path)
    select = f"SELECT {', '.join(columns)} FROM audit_log WHERE seq = ?"
    one, two = (connection.execute(select, (seq,)).fetchone() for seq in (1, 2))
    update = f"UPDATE audit_log SET {', '.join(f'{c} = ?' for c in columns)} WHERE seq = ?"
    connection.execute(update, (*two, 1))
    connection.execute(update, (*one, 2))
    connection.commit()
    connection.close()
    report = verify_audit_log(path)
    assert set(kinds(report)) == {"reordered"}
    assert report.problems[0].index == 1 and report.problems[0].decision_id == ids[2]


def test_sqlite_tail_truncation_is_found(tmp_path: Path, event: Event) -> None:
    path, _ = write_log("sqlite", tmp_path, event)
    _sql(path, "DELETE FROM audit_log WHERE seq >= 4")
    report = verify_audit_log(path)
    assert kinds(report) == ["truncated"]
    assert "2 record(s) were cut off after index 3" in report.problems[0].message


def test_sqlite_truncation_with_a_forged_head_needs_an_external_anchor(
    tmp_path: Path, event: Event
) -> None:
    path, _ = write_log("sqlite", tmp_path, event)
    head = verify_audit_log(path).head_hash
    connection = sqlite3.connect(path)
    previous = connection.execute("SELECT record_hash FROM audit_log WHERE seq = 4").fetchone()[0]
    connection.execute("DELETE FROM audit_log WHERE seq = 5")
    connection.execute("UPDATE audit_head SET count = 5, record_hash = ?", (previous,))
    connection.commit()
    connection.close()
    assert verify_audit_log(path).ok  # the limit of any unanchored hash chain
    anchored = verify_audit_log(path, expected_head=head, expected_count=6)
    assert kinds(anchored) == ["truncated", "truncated"]


def test_sqlite_rows_added_outside_the_log_are_found(tmp_path: Path, event: Event) -> None:
    path, _ = write_log("sqlite", tmp_path, event)
    _sql(path, "UPDATE audit_head SET count = 4")
    assert kinds(verify_audit_log(path)) == ["inserted"]


def test_sqlite_unreadable_rows_are_malformed_not_crashes(tmp_path: Path, event: Event) -> None:
    path, _ = write_log("sqlite", tmp_path, event)
    _sql(path, "UPDATE audit_log SET reasons = 'not json' WHERE seq = 1")
    report = verify_audit_log(path)
    assert kinds(report)[0] == "malformed" and report.problems[0].index == 1


# --- the JSONL log ------------------------------------------------------------------------


def _rewrite(path: Path, change: Callable[[list[bytes]], list[bytes]]) -> None:
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(change(lines)))


def _edited(line: bytes) -> bytes:
    data = json.loads(line)
    data["result"] = "ALLOW" if data["result"] != "ALLOW" else "DENY"
    return json.dumps(data).encode() + b"\n"


def test_jsonl_edit_is_found(tmp_path: Path, event: Event) -> None:
    path, ids = write_log("jsonl", tmp_path, event)
    _rewrite(path, lambda lines: [*lines[:3], _edited(lines[3]), *lines[4:]])
    report = verify_audit_log(path)
    assert kinds(report) == ["edited"]
    assert (report.problems[0].index, report.problems[0].decision_id) == (3, ids[3])


def test_jsonl_edit_with_a_recomputed_hash_breaks_the_next_link(
    tmp_path: Path, event: Event
) -> None:
    path, ids = write_log("jsonl", tmp_path, event)

    def forge(lines: list[bytes]) -> list[bytes]:
        data = json.loads(lines[3])
        data["result"] = "ALLOW"
        data["reasons"] = []
        data["record_hash"] = AuditRecord.from_dict(data).computed_hash()
        return [*lines[:3], json.dumps(data).encode() + b"\n", *lines[4:]]

    _rewrite(path, forge)
    report = verify_audit_log(path)
    assert kinds(report) == ["deleted"]
    assert (report.problems[0].index, report.problems[0].decision_id) == (4, ids[4])
    assert "rewritten" in report.problems[0].message


def test_jsonl_deletion_is_found(tmp_path: Path, event: Event) -> None:
    path, ids = write_log("jsonl", tmp_path, event)
    _rewrite(path, lambda lines: [*lines[:2], *lines[3:]])
    report = verify_audit_log(path)
    assert kinds(report) == ["deleted"]
    assert (report.problems[0].index, report.problems[0].decision_id) == (2, ids[3])


def test_jsonl_deleting_the_first_record_is_found(tmp_path: Path, event: Event) -> None:
    path, ids = write_log("jsonl", tmp_path, event)
    _rewrite(path, lambda lines: lines[1:])
    report = verify_audit_log(path)
    assert kinds(report) == ["deleted"]
    assert report.problems[0].decision_id == ids[1]


def test_jsonl_reordering_is_found(tmp_path: Path, event: Event) -> None:
    path, ids = write_log("jsonl", tmp_path, event)
    _rewrite(path, lambda lines: [lines[0], lines[2], lines[1], *lines[3:]])
    report = verify_audit_log(path)
    assert set(kinds(report)) == {"reordered"}
    assert report.problems[0].index == 1 and report.problems[0].decision_id == ids[2]


def test_jsonl_tail_truncation_is_found(tmp_path: Path, event: Event) -> None:
    path, _ = write_log("jsonl", tmp_path, event)
    _rewrite(path, lambda lines: lines[:-2])
    report = verify_audit_log(path)
    assert kinds(report) == ["truncated"]
    assert report.problems[0].index == 4


def test_jsonl_torn_last_line_is_found(tmp_path: Path, event: Event) -> None:
    path, _ = write_log("jsonl", tmp_path, event)
    _rewrite(path, lambda lines: [*lines[:-1], lines[-1][:40]])
    assert "truncated" in kinds(verify_audit_log(path))


def test_jsonl_garbage_and_duplicates_are_reported(tmp_path: Path, event: Event) -> None:
    path, _ = write_log("jsonl", tmp_path, event)
    _rewrite(path, lambda lines: [*lines[:2], b"{not json}\n", *lines[2:]])
    assert kinds(verify_audit_log(path))[0] == "malformed"
    path, _ = write_log("jsonl", tmp_path / "dup", event)
    _rewrite(path, lambda lines: [*lines, lines[-1]])
    assert "duplicated" in kinds(verify_audit_log(path))


def _with_extra_keys(line: bytes) -> bytes:
    data = json.loads(line)
    data["approved_by"] = "ciso@example.com"
    data["note"] = "executed with break-glass override"
    return json.dumps(data, sort_keys=True, separators=(",", ":")).encode() + b"\n"


def test_jsonl_keys_outside_the_record_are_malformed(tmp_path: Path, event: Event) -> None:
    path, ids = write_log("jsonl", tmp_path, event)
    _rewrite(path, lambda lines: [*lines[:2], _with_extra_keys(lines[2]), *lines[3:]])
    report = verify_audit_log(path)
    assert kinds(report) == ["malformed"]  # the chain itself is intact: hashes still match
    problem = report.problems[0]
    assert (problem.index, problem.decision_id) == (2, ids[2])
    assert "'approved_by'" in problem.message and "'note'" in problem.message
    assert "ciso@example.com" not in report.summary()
    assert "break-glass" not in report.summary()
    assert report.count == 6 and report.head_hash == verify_audit_log(path).head_hash


def test_jsonl_duplicate_key_with_differing_values_is_malformed(
    tmp_path: Path, event: Event
) -> None:
    path, ids = write_log("jsonl", tmp_path, lambda n: event(n, result="DENY"))

    def two_results(line: bytes) -> bytes:
        # json.loads keeps the last "result" (the hashed DENY); a first-wins parser reads ALLOW.
        assert line.startswith(b"{")
        return b'{"result":"ALLOW",' + line[1:]

    _rewrite(path, lambda lines: [*lines[:4], two_results(lines[4]), *lines[5:]])
    assert json.loads(path.read_bytes().splitlines()[4])["result"] == "DENY"
    report = verify_audit_log(path)
    assert kinds(report) == ["malformed"]
    problem = report.problems[0]
    assert (problem.index, problem.decision_id) == (4, ids[4])
    assert "more than once" in problem.message and "'result'" in problem.message
    assert "ALLOW" not in problem.message and "DENY" not in problem.message


def test_jsonl_key_names_are_escaped_and_shortened(tmp_path: Path, event: Event) -> None:
    path, _ = write_log("jsonl", tmp_path, event, count=2)

    def odd_keys(line: bytes) -> bytes:
        data = json.loads(line)
        data["\x1b[2Jline\nbreak"] = "v"
        data["k" * 500] = "v"
        data.update({f"extra{n}": "v" for n in range(10)})
        return json.dumps(data).encode() + b"\n"

    _rewrite(path, lambda lines: [lines[0], odd_keys(lines[1])])
    message = verify_audit_log(path).problems[0].message
    assert "\x1b" not in message and "\n" not in message
    assert "\\x1b[2Jline\\nbreak" in message
    assert "k" * 41 not in message
    assert "more" in message


def test_jsonl_malformed_record_does_not_hide_an_edit(tmp_path: Path, event: Event) -> None:
    path, ids = write_log("jsonl", tmp_path, event)
    _rewrite(path, lambda lines: [*lines[:3], _with_extra_keys(_edited(lines[3])), *lines[4:]])
    report = verify_audit_log(path)
    assert kinds(report) == ["malformed", "edited"]
    assert {problem.decision_id for problem in report.problems} == {ids[3]}


def test_jsonl_logs_written_and_resumed_verify_clean(tmp_path: Path, event: Event) -> None:
    path, _ = write_log("jsonl", tmp_path, event, count=3)
    with JsonlAuditLog(path, fsync=False) as log:
        log.append(event(3))
        assert len(list(log.records())) == 4
    report = verify_audit_log(path)
    assert report.ok, report.summary()
    assert report.count == 4


def test_jsonl_without_its_head_anchor_fails(tmp_path: Path, event: Event) -> None:
    path, _ = write_log("jsonl", tmp_path, event)
    Path(f"{path}.head").unlink()
    report = verify_audit_log(path)
    assert not report.ok
    assert [p.kind for p in report.problems] == ["unanchored"]
    assert "missing" in report.problems[0].message


def test_a_jsonl_anchor_two_records_behind_fails(tmp_path: Path, event: Event) -> None:
    path, _ = write_log("jsonl", tmp_path, event)
    lines = path.read_bytes().splitlines()
    Path(f"{path}.head").write_text(json.loads(lines[-3])["record_hash"] + "\n")
    report = verify_audit_log(path)
    assert not report.ok and not report.recoverable
    assert [p.kind for p in report.problems] == ["unanchored"]
    assert "2 record(s) behind" in report.problems[0].message


def test_a_jsonl_anchor_one_record_behind_is_what_a_crash_leaves(
    tmp_path: Path, event: Event
) -> None:
    path, ids = write_log("jsonl", tmp_path, event)
    lines = path.read_bytes().splitlines()
    Path(f"{path}.head").write_text(json.loads(lines[-2])["record_hash"] + "\n")
    report = verify_audit_log(path)
    assert not report.ok and report.recoverable
    assert [(p.kind, p.index, p.decision_id) for p in report.problems] == [("crash", 5, ids[5])]
    assert report.summary().startswith("CRASH: 6 records")
    with pytest.raises(AuditIntegrityError):  # not OK until the writer recovers it
        report.raise_for_problems()


def test_a_torn_line_alone_is_a_crash_but_a_torn_anchored_record_is_not(
    tmp_path: Path, event: Event
) -> None:
    path, _ = write_log("jsonl", tmp_path, event)
    with path.open("ab") as handle:
        handle.write(b'{"decision_id":"half')
    assert kinds(verify_audit_log(path)) == ["crash"]
    path, _ = write_log("jsonl", tmp_path / "cut", event)
    _rewrite(path, lambda lines: [*lines[:-1], lines[-1][:40]])  # the anchored record, cut
    report = verify_audit_log(path)
    assert sorted(kinds(report)) == ["crash", "truncated"] and not report.recoverable


def test_the_report_names_the_log_and_checks_an_expected_id(tmp_path: Path, event: Event) -> None:
    path, _ = write_log("sqlite", tmp_path, event)
    report = verify_audit_log(path)
    with SQLiteAuditLog(path) as log:
        first = next(iter(log.records()))
    assert report.log_id == first.record_hash
    assert verify_audit_log(path, expected_log_id=report.log_id).ok
    other = verify_audit_log(path, expected_log_id="sha256:" + "1" * 64)
    assert kinds(other) == ["foreign"] and report.log_id in other.problems[0].message
    empty = tmp_path / "empty.jsonl"
    JsonlAuditLog(empty).close()
    assert verify_audit_log(empty).log_id == ""
    assert kinds(verify_audit_log(empty, expected_log_id=report.log_id)) == ["foreign"]


def test_an_empty_log_verifies(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    JsonlAuditLog(path).close()
    report = verify_audit_log(path)
    assert report.ok and report.count == 0


def test_raise_for_problems(tmp_path: Path, event: Event) -> None:
    path, _ = write_log("jsonl", tmp_path, event)
    verify_audit_log(path).raise_for_problems()
    _rewrite(path, lambda lines: [*lines[:2], *lines[3:]])
    with pytest.raises(AuditIntegrityError) as caught:
        verify_audit_log(path).raise_for_problems()
    assert caught.value.index == 2


# --- unreadable input ---------------------------------------------------------------------


def test_unreadable_inputs_raise_audit_read_error(tmp_path: Path) -> None:
    with pytest.raises(AuditReadError, match="no audit log"):
        verify_audit_log(tmp_path / "missing.sqlite3")
    with pytest.raises(AuditReadError, match="no audit log"):
        verify_audit_log(tmp_path)
    binary = tmp_path / "blob.bin"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(200))
    with pytest.raises(AuditReadError, match="neither"):
        verify_audit_log(binary)
    fake = tmp_path / "fake.sqlite3"
    fake.write_text("hello")
    with pytest.raises(AuditReadError, match="not an SQLite database"):
        verify_audit_log(fake)
    other = tmp_path / "other.sqlite3"
    _sql(other, "CREATE TABLE t (x)")
    with pytest.raises(AuditReadError, match="not a jevqueue audit log"):
        verify_audit_log(other)


def test_a_damaged_database_raises_audit_read_error(tmp_path: Path, event: Event) -> None:
    path, _ = write_log("sqlite", tmp_path, event, count=300)
    data = bytearray(path.read_bytes())
    data[100:] = bytes(len(data) - 100)  # keep the magic, destroy the rest
    path.write_bytes(bytes(data))
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    with pytest.raises(AuditReadError):
        verify_audit_log(path)


# --- the command ----------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["sqlite", "jsonl"])
def test_cli_ok_prints_the_count(kind: str, tmp_path: Path, event: Event) -> None:
    path, _ = write_log(kind, tmp_path, event)
    result = CliRunner().invoke(main, ["audit", "verify", str(path)])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("OK: 6 records")


def test_cli_reports_the_problem_and_fails(tmp_path: Path, event: Event) -> None:
    path, ids = write_log("jsonl", tmp_path, event)
    _rewrite(path, lambda lines: [*lines[:3], _edited(lines[3]), *lines[4:]])
    result = CliRunner().invoke(main, ["audit", "verify", str(path)])
    assert result.exit_code == 1
    assert "edited" in result.output and ids[3] in result.output and "index 3" in result.output
    as_json = CliRunner().invoke(main, ["audit", "verify", "--json", str(path)])
    assert as_json.exit_code == 1
    report = json.loads(as_json.output)
    assert report["ok"] is False and report["problems"][0]["decision_id"] == ids[3]
    assert report["recoverable"] is False
    assert report["log_id"] == verify_audit_log(path).log_id != ""


def test_cli_exits_3_for_a_crash_and_prints_the_log_id(tmp_path: Path, event: Event) -> None:
    path, _ = write_log("jsonl", tmp_path, event)
    log_id = verify_audit_log(path).log_id
    result = CliRunner().invoke(main, ["audit", "verify", str(path)])
    assert result.exit_code == 0 and f"log id: {log_id}" in result.output
    with path.open("ab") as handle:
        handle.write(b'{"decision_id":"half')
    result = CliRunner().invoke(main, ["audit", "verify", str(path)])
    assert result.exit_code == 3 and result.output.startswith("CRASH:"), result.output
    wrong = CliRunner().invoke(main, ["audit", "verify", str(path), "--log-id", "sha256:x"])
    assert wrong.exit_code == 1 and "foreign" in wrong.output


@pytest.mark.parametrize("change", ["extra", "duplicate"])
def test_cli_fails_on_unhashed_or_repeated_keys(change: str, tmp_path: Path, event: Event) -> None:
    path, ids = write_log("jsonl", tmp_path, event)

    def tamper(line: bytes) -> bytes:
        return _with_extra_keys(line) if change == "extra" else b'{"tool":"other",' + line[1:]

    _rewrite(path, lambda lines: [*lines[:1], tamper(lines[1]), *lines[2:]])
    result = CliRunner().invoke(main, ["audit", "verify", str(path)])
    assert result.exit_code == 1, result.output
    assert "malformed" in result.output and ids[1] in result.output
    assert "ciso@example.com" not in result.output and '"other"' not in result.output
    as_json = CliRunner().invoke(main, ["audit", "verify", "--json", str(path)])
    assert as_json.exit_code == 1
    problems = json.loads(as_json.output)["problems"]
    assert [(p["kind"], p["index"], p["decision_id"]) for p in problems] == [
        ("malformed", 1, ids[1])
    ]


def test_cli_expect_head_catches_a_consistent_truncation(tmp_path: Path, event: Event) -> None:
    path, _ = write_log("jsonl", tmp_path, event)
    head = verify_audit_log(path).head_hash
    _rewrite(path, lambda lines: lines[:-1])
    Path(f"{path}.head").unlink()
    runner = CliRunner()
    without = runner.invoke(main, ["audit", "verify", str(path)])
    assert without.exit_code == 1 and "unanchored" in without.output
    result = runner.invoke(main, ["audit", "verify", str(path), "--expect-head", head])
    assert result.exit_code == 1 and "truncated" in result.output


def test_cli_unreadable_file_exits_2_with_advice(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["audit", "verify", str(tmp_path / "nope.sqlite3")])
    assert result.exit_code == 2
    assert "check the path" in result.output


# --- values no writer stores ----------------------------------------------------------------


def test_a_record_with_a_lone_surrogate_is_malformed_not_an_error(
    tmp_path: Path, event: Event
) -> None:
    path, _ = write_log("jsonl", tmp_path, event, count=2)
    lines = path.read_text("utf-8").splitlines()
    record = json.loads(lines[1])
    record["tool"] = "\ud800"  # valid JSON ("\\ud800"), not valid Unicode
    path.write_text(lines[0] + "\n" + json.dumps(record) + "\n", "utf-8")
    report = verify_audit_log(path)
    assert not report.ok
    malformed = [problem for problem in report.problems if problem.kind == "malformed"]
    assert [problem.index for problem in malformed] == [1]
    assert "lone surrogate" in malformed[0].message


def test_a_head_anchor_whose_count_is_text_is_reported_as_altered(
    tmp_path: Path, event: Event
) -> None:
    path, _ = write_log("sqlite", tmp_path, event, count=2)
    with sqlite3.connect(path) as connection:
        connection.execute("UPDATE audit_head SET count = 'one'")
    connection.close()
    report = verify_audit_log(path)
    assert not report.ok
    assert any(
        problem.kind == "malformed" and "the head row was altered" in problem.message
        for problem in report.problems
    ), report.problems


def test_a_schema_name_that_is_not_utf8_is_an_audit_read_error(
    tmp_path: Path, event: Event
) -> None:
    path, _ = write_log("sqlite", tmp_path, event, count=1)
    connection = sqlite3.connect(path)
    connection.execute("CREATE TABLE extra (x)")
    connection.execute("PRAGMA writable_schema = ON")
    connection.execute("UPDATE sqlite_master SET name = CAST(x'b3' AS TEXT) WHERE name = 'extra'")
    connection.commit()
    connection.close()
    with pytest.raises(AuditReadError, match="the database is damaged"):
        verify_audit_log(path)
