"""Checking an audit log's hash chain: what was edited, deleted, reordered or cut off."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from jevqueue.audit._jsonl_log import head_path, parse_line
from jevqueue.audit._record import (
    GENESIS_HASH,
    RECORD_FIELDS,
    AuditRecord,
    key_names,
    unexpected_fields,
)
from jevqueue.audit._sqlite_log import COLUMNS, row_to_record
from jevqueue.errors import AuditIntegrityError, AuditReadError, ConfigurationError

__all__ = ["AuditProblem", "VerificationReport", "verify_audit_log"]

ProblemKind = Literal[
    "edited",
    "deleted",
    "reordered",
    "truncated",
    "inserted",
    "duplicated",
    "malformed",
    "unanchored",
    "unsigned",
    "outdated",
    "foreign",
    "crash",
]
_SQLITE_MAGIC = b"SQLite format 3\x00"
_SQLITE_SUFFIXES = {".sqlite", ".sqlite3", ".db", ".db3"}
_JSONL_SUFFIXES = {".jsonl", ".ndjson", ".log"}


@dataclass(frozen=True)
class AuditProblem:
    """One thing wrong with an audit log.

    Attributes:
        kind: ``edited`` (a record's content no longer matches its hash), ``deleted``
            (records missing before ``index``), ``reordered`` (a record out of chain
            order), ``truncated`` (records cut off the end, or a torn last line),
            ``inserted`` (records beyond the log's head anchor), ``duplicated`` (a decision
            id seen twice), ``malformed`` (a record that cannot be read, or a JSONL
            record with keys outside the record's fields or with a key given twice —
            content its ``record_hash`` does not vouch for), ``unanchored`` (a non-empty
            log whose head anchor is missing, empty or behind it further than a crash
            leaves it: its end cannot be vouched for), ``unsigned`` (checked with a key: no
            checkpoint, a checkpoint the key did not sign, a record other than the one it
            signed, or records it does not cover), ``outdated`` (checked with a key: a
            checkpoint of the first format, which signed the head alone), ``foreign`` (the
            log is another log than the one expected, or than its checkpoint's), ``crash``
            (not tampering: a state a writer that stopped mid-write leaves, which the next
            open of the log recovers — a torn last line, one record beyond the anchor that
            chains from it, or the one record a signed checkpoint announced but did not yet
            cover).
        index: the 0-based position in the log, when one record is concerned.
        decision_id: that record's decision id, when it could be read.
        message: a sentence saying what is wrong.
    """

    kind: ProblemKind
    index: int | None
    decision_id: str | None
    message: str

    def __str__(self) -> str:
        where = "" if self.index is None else f"index {self.index}"
        if self.decision_id:
            where += f" (decision {self.decision_id})"
        return f"{self.kind}: {where + ': ' if where else ''}{self.message}"


@dataclass(frozen=True)
class VerificationReport:
    """The outcome of :func:`verify_audit_log`.

    Attributes:
        path: the file checked (for a database, its URL with the password hidden).
        format: ``"sqlite"``, ``"jsonl"`` or ``"postgresql"``.
        count: how many records the log holds (readable or not).
        head_hash: the ``record_hash`` of the last record (:data:`GENESIS_HASH` if none);
            keep it somewhere else and pass it back as ``expected_head`` later to detect a
            log that was cut short together with its anchor.
        problems: everything found wrong, in log order; empty when the log verifies.
        notes: observations that are not failures (e.g. no head anchor to check against).
        log_id: the log's id, the ``record_hash`` of its first record (``""`` when it has
            none): it never changes, so keep it and pass it back as ``expected_log_id``
            to notice a log swapped for another.
    """

    path: str
    format: Literal["sqlite", "jsonl", "postgresql"]
    count: int
    head_hash: str
    problems: tuple[AuditProblem, ...]
    notes: tuple[str, ...] = ()
    log_id: str = ""

    @property
    def ok(self) -> bool:
        """True when no problem was found."""
        return not self.problems

    @property
    def recoverable(self) -> bool:
        """True when every problem is a ``crash``: nothing was tampered with, and the next
        open of the log (with its signing key, if it is signed) recovers it."""
        return bool(self.problems) and all(p.kind == "crash" for p in self.problems)

    def summary(self) -> str:
        """Return a human-readable account, one problem per line."""
        if self.ok:
            return f"OK: {self.count} records, chain intact, head {self.head_hash}"
        if self.recoverable:
            lines = [
                f"CRASH: {self.count} records of {self.path}, not tampered with: the writer "
                "stopped mid-write, and the next open of the log recovers it"
            ]
        else:
            lines = [
                f"FAILED: {len(self.problems)} problem(s) in {self.count} records of {self.path}"
            ]
        lines.extend(f"  {problem}" for problem in self.problems)
        return "\n".join(lines)

    def raise_for_problems(self) -> None:
        """Raise :class:`AuditIntegrityError` (for the first problem) unless the log is OK."""
        if self.problems:
            first = self.problems[0]
            raise AuditIntegrityError(self.summary(), index=first.index)


_Head = tuple[int | None, str | None]
_Read = tuple[list[AuditRecord | None], list[AuditProblem], _Head | None, list[str]]


def verify_audit_log(
    path: str | os.PathLike[str],
    *,
    expected_head: str | None = None,
    expected_count: int | None = None,
    schema: str = "jevqueue",
    public_key: Any = None,
    expected_log_id: str | None = None,
) -> VerificationReport:
    """Check an SQLite, JSONL or PostgreSQL audit log and say exactly what is wrong with it.

    A ``postgresql://`` (or ``postgres://``) URL is read as a
    :class:`~jevqueue.audit.PostgresAuditLog` in ``schema`` (this needs the ``postgres``
    extra); its rows and head are checked exactly as an SQLite file's. For a file, the
    format is taken from the extension (``.sqlite``/``.sqlite3``/``.db`` or
    ``.jsonl``/``.ndjson``), else from the content. Every record's hash is recomputed
    (edits), every ``prev_hash`` must name the record before it (deletions,
    reorderings), and the log's end is compared with its head anchor — the ``audit_head``
    row of an SQLite or PostgreSQL log, the ``.head`` file beside a JSONL log — and with
    ``expected_head`` / ``expected_count`` when given (records cut off the end).

    A non-empty log (any PostgreSQL log: its head row exists from the start) whose anchor is
    missing, empty or behind its last record fails (``unanchored``): its end cannot be
    vouched for. What a crash leaves is told apart (``crash``, and the report is
    ``recoverable``): a JSONL writer stopped between a record and its anchor leaves exactly
    one record beyond the anchor, chaining from it, or a torn last line; the next open
    recovers either and records that it did. An SQLite or PostgreSQL record and its head
    are one transaction: no crash separates them.

    A hash chain proves order and completeness only up to the newest anchor an attacker
    could not rewrite: someone able to rewrite the whole file and its anchor can forge a
    consistent log. With ``public_key`` (the public half of the log's signing key, see
    :class:`~jevqueue.audit.AuditChain`), the signed checkpoint decides, whatever the anchor
    says: it must be of this log (``foreign``), the log must hold every record it covers
    (``truncated``) and the very record it names as the head (``unsigned``), and nothing
    beyond but the one record it announced, which a crash leaves (``crash``). A checkpoint
    of the first format fails (``outdated``). With ``expected_log_id`` (the ``log_id`` of
    an earlier report), the log must be that log: another host's genuine log, signed with
    the same key, fails (``foreign``). Export ``head_hash`` regularly and check against it
    as well (``expected_head``).

    Returns:
        The report; look at ``.ok`` or call ``.raise_for_problems()``.

    Raises:
        AuditReadError: the file is missing, unreadable, or not an audit log.
    """
    return _report(
        *load_audit_log(path, schema=schema),
        expected_head,
        expected_count,
        public_key,
        expected_log_id,
    )


_Loaded = tuple[
    str,
    Literal["sqlite", "jsonl", "postgresql"],
    list[AuditRecord | None],
    list[AuditProblem],
    _Head | None,
    list[str],
]


def load_audit_log(path: str | os.PathLike[str], *, schema: str = "jevqueue") -> _Loaded:
    """Read a log of any kind: where, kind, records (``None``: unreadable), problems, head, notes.

    Raises:
        AuditReadError: as :func:`verify_audit_log`.
    """
    if isinstance(path, str) and path.startswith(_POSTGRES_SCHEMES):
        return _load_postgres(path, schema=schema)
    file = Path(path)
    if not file.is_file():
        raise AuditReadError(
            f"no audit log at {str(file)!r}: check the path (SQLite logs end in .sqlite3, "
            "JSONL logs in .jsonl)"
        )
    kind = _detect(file)
    if kind == "sqlite":
        records, problems, head, notes = _read_sqlite(file)
    else:
        records, problems, head, notes = _read_jsonl(file)
    return str(file), kind, records, problems, head, notes


def _report(
    where: str,
    kind: Literal["sqlite", "jsonl", "postgresql"],
    records: list[AuditRecord | None],
    problems: list[AuditProblem],
    head: _Head | None,
    notes: list[str],
    expected_head: str | None,
    expected_count: int | None,
    public_key: Any = None,
    expected_log_id: str | None = None,
) -> VerificationReport:
    problems.extend(_chain_problems(records))
    last_hash = _last_hash(records)
    log_id = records[0].record_hash if records and records[0] is not None else ""
    problems.extend(_head_problems(kind, records, head, notes))
    if public_key is not None:
        if kind == "postgresql":
            raise AuditReadError(
                "signed checkpoints are kept beside a log file; a PostgreSQL log has none to "
                "check with --key"
            )
        problems.extend(_checkpoint_problems(Path(where), records, public_key, notes))
    if expected_log_id is not None and expected_log_id != log_id:
        problems.append(
            AuditProblem(
                "foreign",
                None,
                None,
                f"this log's id is {log_id or 'none (it is empty)'}, not the expected "
                f"{expected_log_id}: it is another log put in its place (another host's, or "
                "an older one)",
            )
        )
    if expected_count is not None and expected_count > len(records):
        problems.append(
            AuditProblem(
                "truncated",
                None,
                None,
                f"expected at least {expected_count} records, the log holds {len(records)}",
            )
        )
    if expected_head is not None and expected_head not in _hash_positions(records):
        problems.append(
            AuditProblem(
                "truncated",
                None,
                None,
                f"the expected head {expected_head} is not in the log: records were cut "
                "off the end or the log was rewritten",
            )
        )
    problems.sort(key=lambda problem: -1 if problem.index is None else problem.index)
    return VerificationReport(
        path=where,
        format=kind,
        count=len(records),
        head_hash=last_hash,
        problems=tuple(problems),
        notes=tuple(notes),
        log_id=log_id,
    )


_POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def _load_postgres(url: str, *, schema: str) -> _Loaded:
    from jevqueue.audit._postgres_log import read_postgres_log
    from jevqueue.db._connection import redacted

    try:
        rows, head_row = read_postgres_log(url, schema=schema)
    except ConfigurationError as error:  # a malformed schema name
        raise AuditReadError(str(error)) from error
    records, problems = _rows_to_records(rows)
    if head_row is None:
        # The schema's migration creates the head row, and no writer removes it: without
        # it, rows cut off the end (all of them included) cannot be noticed.
        problems.append(
            _unanchored(
                "the log has no head anchor (its audit_head row, or the whole table, is gone)"
            )
        )
    notes: list[str] = []
    head = None if head_row is None else _head(head_row, problems)
    return redacted(url), "postgresql", records, problems, head, notes


def _head(row: Sequence[object], problems: list[AuditProblem]) -> _Head | None:
    """The head row ``(count, record_hash)`` as read, or ``None`` (and a problem) when its
    values are not what a writer stores: the row was altered."""
    count, record_hash = row[0], row[1]
    if type(count) is int and count >= 0 and type(record_hash) is str:
        return count, record_hash
    problems.append(
        AuditProblem(
            "malformed",
            None,
            None,
            f"the head anchor holds count {str(count)[:40]!r} and hash "
            f"{str(record_hash)[:80]!r}, which no writer stores: the head row was altered",
        )
    )
    return None


def _rows_to_records(
    rows: Sequence[tuple[object, ...]],
) -> tuple[list[AuditRecord | None], list[AuditProblem]]:
    records: list[AuditRecord | None] = []
    problems: list[AuditProblem] = []
    for index, row in enumerate(rows):
        try:
            records.append(row_to_record(row))
        except (ValueError, TypeError) as error:
            records.append(None)
            problems.append(
                AuditProblem("malformed", index, _text(row[1]), f"unreadable row ({error})")
            )
    return records, problems


def _detect(file: Path) -> Literal["sqlite", "jsonl"]:
    suffix = file.suffix.lower()
    try:
        with file.open("rb") as handle:
            start = handle.read(len(_SQLITE_MAGIC))
    except OSError as error:
        raise AuditReadError(
            f"cannot read the audit log {str(file)!r} ({type(error).__name__}): "
            "check its permissions"
        ) from error
    if start == _SQLITE_MAGIC:
        return "sqlite"
    if suffix in _SQLITE_SUFFIXES and start:
        raise AuditReadError(
            f"{str(file)!r} has an SQLite name but is not an SQLite database: it is damaged "
            "or not an audit log"
        )
    if suffix in _JSONL_SUFFIXES or start.lstrip()[:1] in (b"{", b""):
        return "jsonl"
    raise AuditReadError(
        f"{str(file)!r} is neither an SQLite audit log nor a JSONL audit log: pass the file "
        "an SQLiteAuditLog or JsonlAuditLog wrote"
    )


def _read_sqlite(file: Path) -> _Read:
    try:
        connection = sqlite3.connect(f"{file.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as error:
        raise AuditReadError(f"cannot open {str(file)!r} as SQLite ({error})") from error
    try:
        tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master")}
        if "audit_log" not in tables:
            raise AuditReadError(
                f"{str(file)!r} is an SQLite database without an audit_log table: it is not a "
                "jevqueue audit log"
            )
        rows = connection.execute(
            f"SELECT {', '.join(COLUMNS)} FROM audit_log ORDER BY seq"
        ).fetchall()
        head_row = (
            connection.execute("SELECT count, record_hash FROM audit_head WHERE id = 0").fetchone()
            if "audit_head" in tables
            else None
        )
    except (sqlite3.DatabaseError, UnicodeDecodeError) as error:
        raise AuditReadError(
            f"cannot read the audit log {str(file)!r} ({error}): the database is damaged"
        ) from error
    finally:
        connection.close()
    records, problems = _rows_to_records(rows)
    notes: list[str] = []
    head: _Head | None = None
    if head_row is None:
        if records:
            problems.append(_unanchored("the log has no head anchor (its audit_head row)"))
        else:
            notes.append("no head anchor: records cut off the end cannot be detected")
    else:
        head = _head(head_row, problems)
    return records, problems, head, notes


def _read_jsonl(file: Path) -> _Read:
    try:
        data = file.read_bytes()
    except OSError as error:
        raise AuditReadError(
            f"cannot read the audit log {str(file)!r} ({type(error).__name__}): "
            "check its permissions"
        ) from error
    records: list[AuditRecord | None] = []
    problems: list[AuditProblem] = []
    lines = data.split(b"\n")
    torn = lines.pop()  # after the last newline: empty unless the last write was torn
    for line in lines:
        if not line.strip():
            continue
        index = len(records)
        record, problem = _jsonl_record(line, index)
        records.append(record)
        if problem is not None:
            problems.append(problem)
    if torn.strip():
        problems.append(
            AuditProblem(
                "crash",
                len(records),
                None,
                "the last line is incomplete: a write the writer did not finish (a crash); "
                f"the next open of the log moves it to {file.name}.torn and records that",
            )
        )
    notes: list[str] = []
    head: _Head | None = None
    anchor = head_path(file)
    try:
        text = anchor.read_text("ascii").strip()
    except FileNotFoundError:
        if records:
            problems.append(_unanchored(f"the head anchor {anchor.name} is missing"))
        else:
            notes.append(
                f"no head anchor {anchor.name}: records cut off the end cannot be detected"
            )
    except (OSError, UnicodeDecodeError) as error:
        raise AuditReadError(f"cannot read the head anchor {str(anchor)!r} ({error})") from error
    else:
        head = (None, text)  # an empty anchor: only a crash before the first anchor leaves it
    if not data.strip() and not records:
        notes.append("the log is empty")
    return records, problems, head, notes


def _jsonl_record(line: bytes, index: int) -> tuple[AuditRecord | None, AuditProblem | None]:
    """Read one JSONL line: the record (``None`` if unreadable) and what is wrong with it.

    A line with keys outside the record's fields, or with a key given twice, is
    ``malformed`` even when its hash matches: the extra keys are not covered by
    ``record_hash``, and of two values for one key each JSON parser may pick another. The
    record's own fields are still read, so the chain around it is checked as usual.
    """
    try:
        parsed, repeated = parse_line(line)
    except (ValueError, RecursionError) as error:  # RecursionError: nested past any record
        return None, AuditProblem("malformed", index, None, f"unreadable line ({error})")
    if not isinstance(parsed, dict):
        return None, AuditProblem(
            "malformed",
            index,
            None,
            f"unreadable line (a JSON {type(parsed).__name__}, not an object)",
        )
    decision = _text(parsed.get("decision_id"))
    unexpected = unexpected_fields(parsed)
    faults: list[str] = []
    if unexpected:
        faults.append(
            f"keys that are not record fields (not covered by record_hash): {key_names(unexpected)}"
        )
        parsed = {name: parsed[name] for name in RECORD_FIELDS if name in parsed}
    if repeated:
        faults.append(
            f"keys given more than once (parsers disagree on which value counts): "
            f"{key_names(repeated)}"
        )
    try:
        record: AuditRecord | None = AuditRecord.from_dict(parsed)
    except (ValueError, TypeError) as error:
        record = None
        faults.insert(0, f"unreadable line ({error})")
    if not faults:
        return record, None
    return record, AuditProblem("malformed", index, decision, "; ".join(faults))


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _hash_positions(records: Sequence[AuditRecord | None]) -> dict[str, int]:
    positions: dict[str, int] = {}
    for index, record in enumerate(records):
        if record is not None:
            positions.setdefault(record.record_hash, index)
    return positions


def _last_hash(records: Sequence[AuditRecord | None]) -> str:
    if not records:
        return GENESIS_HASH
    last = records[-1]
    return last.record_hash if last is not None else ""


def _chain_problems(records: Sequence[AuditRecord | None]) -> list[AuditProblem]:
    problems: list[AuditProblem] = []
    positions = _hash_positions(records)
    seen_ids: dict[str, int] = {}
    previous: str | None = GENESIS_HASH
    for index, record in enumerate(records):
        if record is None:
            previous = None
            continue
        decision = record.decision_id
        if record.computed_hash() != record.record_hash:
            problems.append(
                AuditProblem(
                    "edited", index, decision, "its content does not match its record_hash"
                )
            )
        if previous is not None and record.prev_hash != previous:
            origin = positions.get(record.prev_hash)
            if record.prev_hash == GENESIS_HASH or (origin is not None and origin != index):
                follows = "the start of the chain" if origin is None else f"index {origin}"
                problems.append(
                    AuditProblem(
                        "reordered",
                        index,
                        decision,
                        f"out of order: in the chain it follows {follows}",
                    )
                )
            else:
                problems.append(
                    AuditProblem(
                        "deleted",
                        index,
                        decision,
                        "the record(s) just before it are missing (its prev_hash names no "
                        "record in the log), or the record before it was rewritten",
                    )
                )
        first = seen_ids.setdefault(decision, index)
        if first != index:
            problems.append(
                AuditProblem("duplicated", index, decision, f"same decision id as index {first}")
            )
        previous = record.record_hash
    return problems


def _head_problems(
    kind: str, records: Sequence[AuditRecord | None], head: _Head | None, notes: list[str]
) -> list[AuditProblem]:
    if head is None:
        return []
    count, head_hash = head
    positions = _hash_positions(records)
    last = _last_hash(records)
    held = len(records)
    if count is not None and count > held and head_hash == last:
        return [
            AuditProblem(
                "deleted",
                None,
                None,
                f"the head anchor counts {count} records but the log holds {held}: "
                f"{count - held} record(s) were removed from inside the log",
            )
        ]
    if count is not None and count > held:
        return [
            AuditProblem(
                "truncated",
                held,
                None,
                f"the head anchor counts {count} records but the log holds {held}: "
                f"{count - held} record(s) were cut off after index {held - 1}",
            )
        ]
    if count is not None and count < held:
        return [
            AuditProblem(
                "inserted",
                count,
                None,
                f"{held - count} record(s) from index {count} on lie beyond the head anchor: "
                "they were added outside the log",
            )
        ]
    if kind == "jsonl" and head_hash is not None:
        return [] if head_hash and head_hash == last else _jsonl_anchor_problems(records, head_hash)
    if head_hash == last or head_hash is None:
        return []
    where = positions.get(head_hash)
    if where is None:
        return [
            AuditProblem(
                "truncated",
                held,
                None,
                f"the head anchor names record {head_hash}, which is not in the log: records "
                "were cut off the end (or the last record was rewritten)",
            )
        ]
    return [
        AuditProblem(
            "inserted",
            where + 1,
            None,
            "records after the head anchor were added outside the log",
        )
    ]


def _jsonl_anchor_problems(
    records: Sequence[AuditRecord | None], anchor: str
) -> list[AuditProblem]:
    """A JSONL anchor that does not name the last record: a crash, or not.

    The writer writes a record, then its anchor: a crash between them leaves exactly one
    record beyond the anchor, whose ``prev_hash`` is the anchor (for the first record of a
    log, an empty anchor and the genesis hash). Anything else no crash leaves.
    """
    held = len(records)
    last = records[-1] if records else None
    if anchor == "":
        if held == 1 and last is not None and last.prev_hash == GENESIS_HASH:
            return [_stopped_before_anchor(0, last)]
        return [_unanchored("the head anchor is empty")] if held else []
    where = _hash_positions(records).get(anchor)
    if where is None:
        return [
            AuditProblem(
                "truncated",
                held,
                None,
                f"the head anchor names record {anchor}, which is not in the log: records "
                "were cut off the end (or the last record was rewritten)",
            )
        ]
    if where == held - 2 and last is not None and last.prev_hash == anchor:
        return [_stopped_before_anchor(held - 1, last)]
    return [
        _unanchored(
            f"the head anchor is {held - 1 - where} record(s) behind the log, and a crash "
            "leaves at most one: records were appended outside the log, or an old anchor was "
            f"copied back (inspect the records after index {where})"
        )
    ]


def _stopped_before_anchor(index: int, record: AuditRecord) -> AuditProblem:
    return AuditProblem(
        "crash",
        index,
        record.decision_id,
        "the writer stopped between this record and its head anchor (a crash): the record "
        "chains from the anchored head, as a crash leaves it; the next open of the log "
        "recovers it and records the recovery",
    )


def _unanchored(what: str) -> AuditProblem:
    return AuditProblem(
        "unanchored",
        None,
        None,
        f"{what}: records cut off the end, or forged onto it, could not be told apart from a "
        "genuine log; restore the anchor from a backup or compare with an exported head "
        "(--expect-head)",
    )


def _checkpoint_problems(
    file: Path, records: Sequence[AuditRecord | None], public_key: Any, notes: list[str]
) -> list[AuditProblem]:
    """Problems with the log's signed checkpoint, checked with ``public_key``."""
    from jevqueue.audit._checkpoint import (
        Checkpoint,
        LogEnds,
        checkpoint_fit,
        checkpoint_path,
        fit_message,
        read_checkpoint,
    )

    location = checkpoint_path(file)
    checkpoint = read_checkpoint(location)
    if checkpoint is None:
        if not records:
            return []
        return [
            AuditProblem(
                "unsigned",
                None,
                None,
                f"no signed checkpoint {location.name}: the log was not written with this "
                "signing key, or the checkpoint was removed",
            )
        ]
    if not checkpoint.verify(public_key):
        return [
            AuditProblem(
                "unsigned",
                None,
                None,
                f"the checkpoint {location.name} is not signed by this key: it was forged or "
                "the log was written with another key",
            )
        ]
    if not isinstance(checkpoint, Checkpoint):
        problems = [
            AuditProblem(
                "outdated",
                None,
                None,
                f"the checkpoint {location.name} is of the first format, which signs the head "
                "alone: another log signed with the same key passes it in this log's place. "
                "Open the log with its signing key (the writer re-signs it in the current "
                f"format), or run `jevqueue audit sign {file} --key PRIVATE`",
            )
        ]
        if checkpoint.head != _last_hash(records):
            problems.append(
                AuditProblem(
                    "unsigned",
                    None,
                    None,
                    f"the old checkpoint names record {checkpoint.head}, which is not the "
                    "log's last record: the chain was rewritten, cut off or added to",
                )
            )
        return problems
    ends = LogEnds.of(records, checkpoint.count)
    fit = checkpoint_fit(checkpoint, ends)
    message = fit_message(fit, checkpoint, ends, location.name)
    if fit == "covered":
        return []
    if fit == "announced":
        notes.append(message)
        return []
    if fit == "crash":
        decision = records[checkpoint.count]
        return [
            AuditProblem(
                "crash",
                checkpoint.count,
                None if decision is None else decision.decision_id,
                message,
            )
        ]
    if fit == "foreign":
        return [AuditProblem("foreign", None, None, message)]
    if fit == "truncated":
        return [AuditProblem("truncated", ends.count, None, message)]
    if fit == "rewritten":
        return [AuditProblem("unsigned", checkpoint.count - 1, None, message)]
    first = checkpoint.count
    if checkpoint.pending and ends.after == checkpoint.pending:
        first += 1
    return [AuditProblem("unsigned", first, None, message)]
