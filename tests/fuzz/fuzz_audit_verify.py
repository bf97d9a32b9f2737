"""Verifying audit logs: corrupted, truncated or forged SQLite and JSONL logs and anchors.

``verify_audit_log`` answers with a report of what is wrong, or raises
:class:`~jevqueue.errors.AuditReadError` for a file that is not an audit log at all. The
first byte picks the route: the rest as a JSONL log (with a head anchor and a signed
checkpoint cut from it), as an SQLite file, as edits to a genuine SQLite log (any value of
any type in any column, rows deleted or repeated, the head moved or dropped), or as edits
to the records of a genuine JSONL log.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

import atheris
from fuzz_main import fuzz_main, instrumented
from fuzzed_values import fuzzed_text, fuzzed_value

with instrumented():
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from jevqueue.audit._chain import AuditChain
    from jevqueue.audit._checkpoint import checkpoint_path
    from jevqueue.audit._jsonl_log import JsonlAuditLog, head_path
    from jevqueue.audit._sqlite_log import COLUMNS, SQLiteAuditLog
    from jevqueue.audit._verify import VerificationReport, verify_audit_log
    from jevqueue.errors import AuditIntegrityError, AuditReadError

# Reported, not fixed here: a string with a lone surrogate (valid JSON: "\ud800") makes the
# record's hash raise AuditWriteError, a writer's error, out of verification; an SQLite head
# anchor whose count is not an integer makes _head_problems compare a str with an int; a
# damaged SQLite schema holding a name that is not UTF-8 makes _read_sqlite's query of
# sqlite_master raise UnicodeDecodeError, which is no sqlite3.DatabaseError.

_HOME = Path(tempfile.mkdtemp(prefix="jevqueue-fuzz-audit-"))
_KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
_OTHER_KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(1, 33)))


def _event(number: int) -> dict[str, Any]:
    return {
        "decision_id": f"decision-{number}",
        "timestamp": f"2026-01-31T12:00:0{number}.000000Z",
        "action_digest": "sha256:" + f"{number:02x}" * 32,
        "tool": "write_to_file",
        "result": "ALLOW",
        "reasons": ["fine"],
        "obligations": [],
        "rule_ids": ["r"],
        "policy_revision": "rev",
        "task_id": "task-1",
        "actor_id": "agent",
        "environment": "local",
        "workspace": "/ws",
        "git_sha": "0123456789abcdef",
        "allowed": True,
    }


def _template(log: Any) -> None:
    chain = AuditChain(log, signing_key=_KEY)
    for number in range(3):
        chain.append(_event(number))
    close = getattr(log, "close", None)
    if close is not None:
        close()


_SQLITE = _HOME / "template.sqlite3"
_template(SQLiteAuditLog(_SQLITE))
_JSONL = _HOME / "template.jsonl"
_template(JsonlAuditLog(_JSONL))
_JSONL_LINES = [json.loads(line) for line in _JSONL.read_bytes().splitlines() if line.strip()]
_CHECKPOINTS = {
    "sqlite": checkpoint_path(_SQLITE).read_bytes(),
    "jsonl": checkpoint_path(_JSONL).read_bytes(),
}


def _clean(name: str) -> Path:
    folder = _HOME / "case"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    return folder / name


def _verify(log: Path, fdp: atheris.FuzzedDataProvider) -> None:
    key = fdp.PickValueInList([None, _KEY.public_key(), _OTHER_KEY.public_key()])
    expected_head = fdp.PickValueInList([None, fuzzed_text(fdp, 72)])
    expected_count = fdp.PickValueInList([None, 0, 3, 10**6])
    try:
        report = verify_audit_log(
            log, expected_head=expected_head, expected_count=expected_count, public_key=key
        )
    except AuditReadError:
        return
    assert isinstance(report, VerificationReport)
    report.summary()
    try:
        report.raise_for_problems()
    except AuditIntegrityError:
        assert not report.ok
    else:
        assert report.ok


def _raw_jsonl(fdp: atheris.FuzzedDataProvider) -> None:
    log = _clean("log.jsonl")
    log.write_bytes(fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 4096)))
    if fdp.ConsumeBool():
        head_path(log).write_bytes(fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 80)))
    if fdp.ConsumeBool():
        checkpoint = _CHECKPOINTS["jsonl"]
        if fdp.ConsumeBool():
            checkpoint = fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 600))
        checkpoint_path(log).write_bytes(checkpoint)
    _verify(log, fdp)


def _raw_sqlite(data: bytes, fdp: atheris.FuzzedDataProvider) -> None:
    log = _clean("log.sqlite3")
    log.write_bytes(data)
    _verify(log, fdp)


def _sql_value(fdp: atheris.FuzzedDataProvider) -> Any:
    choice = fdp.ConsumeIntInRange(0, 5)
    if choice == 0:
        return None
    if choice == 1:
        return fdp.ConsumeIntInRange(-(2**63), 2**63 - 1)
    if choice == 2:
        return fdp.ConsumeFloat()
    if choice == 3:
        return fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 16))
    if choice == 4:
        return json.dumps(fuzzed_text(fdp, 8))
    return fdp.ConsumeUnicodeNoSurrogates(fdp.ConsumeIntInRange(0, 80))


def _edit(connection: sqlite3.Connection, fdp: atheris.FuzzedDataProvider) -> None:
    edit = fdp.ConsumeIntInRange(0, 5)
    seq = fdp.ConsumeIntInRange(-1, 3)
    if edit == 0:
        column = fdp.PickValueInList(list(COLUMNS))
        connection.execute(
            f"UPDATE audit_log SET {column} = ? WHERE seq = ?", (_sql_value(fdp), seq)
        )
    elif edit == 1:
        connection.execute("DELETE FROM audit_log WHERE seq = ?", (seq,))
    elif edit == 2:
        connection.execute(
            "UPDATE audit_head SET count = ?, record_hash = ?",
            (_sql_value(fdp), _sql_value(fdp)),
        )
    elif edit == 3:
        connection.execute("DROP TABLE IF EXISTS audit_head")
    elif edit == 4:
        connection.execute("UPDATE audit_log SET seq = ? WHERE seq = ?", (_sql_value(fdp), seq))
    else:
        connection.execute("DELETE FROM audit_head")


def _edited_sqlite(fdp: atheris.FuzzedDataProvider) -> None:
    log = _clean("log.sqlite3")
    shutil.copyfile(_SQLITE, log)
    if fdp.ConsumeBool():
        checkpoint_path(log).write_bytes(_CHECKPOINTS["sqlite"])
    with sqlite3.connect(log) as connection:
        for _ in range(fdp.ConsumeIntInRange(1, 4)):
            # An edit SQLite refuses (a constraint, a table dropped by an earlier edit)
            # leaves the log as it was: skip it.
            with contextlib.suppress(sqlite3.IntegrityError, sqlite3.OperationalError):
                _edit(connection, fdp)
    connection.close()
    _verify(log, fdp)


def _edited_jsonl(fdp: atheris.FuzzedDataProvider) -> None:
    log = _clean("log.jsonl")
    records = [dict(record) for record in _JSONL_LINES]
    for _ in range(fdp.ConsumeIntInRange(0, 4)):
        edit = fdp.ConsumeIntInRange(0, 3)
        index = fdp.ConsumeIntInRange(0, len(records) - 1) if records else 0
        if edit == 0 and records:
            field = fdp.PickValueInList([*sorted(records[index]), "extra"])
            # Scalars and short lists: what a hand edit or a bit flip can leave behind.
            value = fuzzed_value(fdp, 6) if fdp.ConsumeBool() else [fuzzed_text(fdp, 12)]
            records[index][field] = value
        elif edit == 1 and records:
            del records[index]
        elif edit == 2 and records:
            records.insert(fdp.ConsumeIntInRange(0, len(records)), dict(records[index]))
        elif records:
            records[index].pop(fdp.PickValueInList(sorted(records[index])), None)
    lines = []
    for record in records:
        try:
            lines.append(json.dumps(record, default=repr, skipkeys=True, check_circular=False))
        except (ValueError, RecursionError):  # a cycle or NaN only json.dumps refuses
            lines.append("{}")
    text = "\n".join(lines) + ("\n" if fdp.ConsumeIntInRange(0, 7) else "")
    log.write_text(text, encoding="utf-8", errors="surrogatepass")
    head = _JSONL_LINES[-1]["record_hash"] if fdp.ConsumeBool() else fuzzed_text(fdp, 72)
    if fdp.ConsumeIntInRange(0, 7):
        head_path(log).write_text(head, encoding="utf-8", errors="surrogatepass")
    if fdp.ConsumeBool():
        checkpoint_path(log).write_bytes(_CHECKPOINTS["jsonl"])
    _verify(log, fdp)


def test_one_input(data: bytes) -> None:
    if not data:
        return
    route, rest = data[0] % 4, data[1:]
    fdp = atheris.FuzzedDataProvider(rest)
    if route == 0:
        _raw_jsonl(fdp)
    elif route == 1:
        _raw_sqlite(rest, atheris.FuzzedDataProvider(rest[-8:]))
    elif route == 2:
        _edited_sqlite(fdp)
    else:
        _edited_jsonl(fdp)


if __name__ == "__main__":
    fuzz_main(test_one_input)
