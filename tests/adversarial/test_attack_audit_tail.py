"""Audit-tail attacks: cutting records off the end, forging records onto it, torn writes,
swapping a log for another genuine one.

Each attack edits a log that a real enforcement point wrote while refusing real calls,
then runs ``jevqueue audit verify`` on it, as an auditor would. (What a crash leaves, and
why it reads as a crash and not as one of these, is in test_attack_audit_crash.py.)
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from attack_harness import Sandbox
from click.testing import CliRunner
from jevqueue.approvals import generate_key_pair, load_private_key
from jevqueue.audit import (
    AuditChain,
    AuditRecord,
    ChainedAuditLog,
    JsonlAuditLog,
    PostgresAuditLog,
    SQLiteAuditLog,
)
from jevqueue.audit._jsonl_log import RECOVERY_RULE, record_line
from jevqueue.cli import main
from jevqueue.errors import AuditIntegrityError, PolicyDeniedError
from jevqueue.policy import (
    Action,
    PolicyEnforcementPoint,
    antigravity_registry,
    create_default_policy_decision_point,
)


def _escape(sandbox: Sandbox, n: int) -> Action:
    return Action.build(
        antigravity_registry(),
        "write_to_file",
        {"TargetFile": f"../outside/pwned-{n}.txt", "CodeContent": "x"},
        sandbox.context(),
    )


def refuse_calls(sandbox: Sandbox, audit_logger: Any, count: int = 4) -> None:
    """``count`` real refusals, each recorded by a real PEP; nothing was written outside."""
    pep = PolicyEnforcementPoint(create_default_policy_decision_point(), audit_logger=audit_logger)
    for n in range(count):
        with pytest.raises(PolicyDeniedError):
            pep.enforce(_escape(sandbox, n))
    assert sorted(p.name for p in sandbox.outside.iterdir()) == ["sentinel.txt"]


def verify(path: Path | str, *extra: str) -> Any:
    return CliRunner().invoke(main, ["audit", "verify", str(path), *extra])


def sign(path: Path, key: Path) -> Any:
    return CliRunner().invoke(main, ["audit", "sign", str(path), "--key", str(key)])


def log_id(result: Any) -> str:
    """The log id an earlier `verify` printed (an operator keeps it)."""
    return next(
        line.removeprefix("log id: ")
        for line in result.output.splitlines()
        if line.startswith("log id: ")
    )


def cut_jsonl(path: Path, keep: int) -> None:
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:keep]))


@pytest.mark.parametrize(
    "tamper",
    [
        lambda anchor, saved: anchor.unlink(),
        lambda anchor, saved: anchor.write_text(""),
        lambda anchor, saved: anchor.write_text(saved),  # an old anchor copied back
    ],
    ids=["anchor-deleted", "anchor-emptied", "old-anchor-copied"],
)
def test_jsonl_records_cut_off_the_end_fail_verification(
    sandbox: Sandbox, tamper: Callable[[Path, str], None]
) -> None:
    path = sandbox.state / "audit.jsonl"
    anchor = Path(f"{path}.head")
    with JsonlAuditLog(path) as log:
        refuse_calls(sandbox, log, count=1)
        saved = anchor.read_text()  # two records behind the cut log: more than a crash leaves
        refuse_calls(sandbox, log, count=3)
    assert verify(path).exit_code == 0
    cut_jsonl(path, 3)  # the last refusal vanishes
    tamper(anchor, saved)
    result = verify(path)
    assert result.exit_code == 1 and "unanchored" in result.output
    assert "crash:" not in result.output
    with pytest.raises(AuditIntegrityError):  # the writer does not paper over it
        JsonlAuditLog(path)


@pytest.mark.parametrize("tamper", ["delete-head-row", "cut-and-delete-head-row"])
def test_sqlite_records_cut_off_the_end_fail_verification(sandbox: Sandbox, tamper: str) -> None:
    path = sandbox.state / "audit.sqlite3"
    with SQLiteAuditLog(path) as log:
        refuse_calls(sandbox, log)
    assert verify(path).exit_code == 0
    with sqlite3.connect(path) as connection:
        if tamper == "cut-and-delete-head-row":
            connection.execute("DELETE FROM audit_log WHERE seq = (SELECT MAX(seq) FROM audit_log)")
        connection.execute("DELETE FROM audit_head")
    result = verify(path)
    assert result.exit_code == 1 and "unanchored" in result.output


def _forge_onto(path: Path) -> None:
    """Append a record with a correct hash, and move the anchor: what a forger can do."""
    lines = path.read_bytes().splitlines()
    last = json.loads(lines[-1])
    forged = AuditRecord.chained(
        {
            **{k: v for k, v in last.items() if k not in ("record_hash", "prev_hash")},
            "decision_id": "forged",
            "result": "ALLOW",
            "allowed": True,
            "rule_ids": [],
        },
        last["record_hash"],
    )
    with path.open("ab") as handle:
        handle.write(record_line(forged))
    Path(f"{path}.head").write_text(forged.record_hash + "\n")


@pytest.fixture
def keys(tmp_path: Path) -> tuple[Path, Path]:
    return generate_key_pair(tmp_path / "keys" / "audit")


def test_a_forged_record_fails_verification_with_the_key(
    sandbox: Sandbox, keys: tuple[Path, Path]
) -> None:
    private, public = keys
    path = sandbox.state / "audit.jsonl"
    log = JsonlAuditLog(path)
    refuse_calls(sandbox, AuditChain(log, signing_key=private))
    log.close()
    assert verify(path, "--key", str(public)).exit_code == 0
    _forge_onto(path)
    assert verify(path).exit_code == 0  # the chain alone cannot tell: the hashes are right
    result = verify(path, "--key", str(public))
    assert result.exit_code == 1 and "unsigned" in result.output
    assert "crash:" not in result.output  # the forged record is not the one announced
    with JsonlAuditLog(path) as log, pytest.raises(AuditIntegrityError, match="not covered"):
        AuditChain(log, signing_key=private)  # the writer will not sign the forgery


def test_a_rewritten_signed_chain_fails_verification(
    sandbox: Sandbox, keys: tuple[Path, Path], tmp_path: Path
) -> None:
    private, public = keys
    path = sandbox.state / "audit.sqlite3"
    with SQLiteAuditLog(path) as log:
        refuse_calls(sandbox, AuditChain(log, signing_key=private))
    assert verify(path, "--key", str(public)).exit_code == 0
    # A whole new log, consistent in itself, written by someone without the key ...
    forged = tmp_path / "forged.sqlite3"
    with SQLiteAuditLog(forged) as log:
        refuse_calls(sandbox, log, count=2)
    shutil.copy(forged, path)
    # ... with a checkpoint signed by a key of the forger's own.
    other, _ = generate_key_pair(tmp_path / "other")
    with SQLiteAuditLog(path) as log, pytest.raises(AuditIntegrityError, match="this key"):
        AuditChain(log, signing_key=other)  # a writer never signs over another key's checkpoint
    Path(f"{path}.checkpoint").unlink()
    assert sign(path, other).exit_code == 0
    result = verify(path, "--key", str(public))
    assert result.exit_code == 1 and "not signed by this key" in result.output
    with SQLiteAuditLog(path) as log, pytest.raises(AuditIntegrityError, match="this key"):
        AuditChain(log, signing_key=private)


def test_cutting_a_signed_log_fails_even_with_the_anchor_moved(
    sandbox: Sandbox, keys: tuple[Path, Path]
) -> None:
    private, public = keys
    path = sandbox.state / "audit.jsonl"
    log = JsonlAuditLog(path)
    refuse_calls(sandbox, AuditChain(log, signing_key=private))
    log.close()
    cut_jsonl(path, 3)
    last = json.loads(path.read_bytes().splitlines()[-1])["record_hash"]
    Path(f"{path}.head").write_text(last + "\n")  # the anchor agrees with the cut log
    assert verify(path).exit_code == 0
    result = verify(path, "--key", str(public))
    assert result.exit_code == 1 and "truncated" in result.output
    assert "covers 4 records but the log holds 3" in result.output


def test_a_torn_last_line_is_recovered_and_the_recovery_recorded(sandbox: Sandbox) -> None:
    path = sandbox.state / "audit.jsonl"
    with JsonlAuditLog(path) as log:
        refuse_calls(sandbox, log, count=2)
    torn = b'{"decision_id":"0190-half-writ'
    with path.open("ab") as handle:
        handle.write(torn)
    torn_report = verify(path)
    assert torn_report.exit_code == 3 and "crash: index 2" in torn_report.output  # not an attack
    with JsonlAuditLog(path) as log:
        assert log.recovered == len(torn)
        refuse_calls(sandbox, log, count=1)
        records = list(log.records())
    assert [r.rule_ids for r in records][2] == (RECOVERY_RULE,)
    assert str(len(torn)) in records[2].reasons[0]
    assert records[3].allowed is False
    assert Path(f"{path}.torn").read_bytes() == torn + b"\n"
    assert verify(path).exit_code == 0


# --- a log swapped for another genuine one, signed with the same key ----------------------


def open_log(path: Path) -> ChainedAuditLog:
    return SQLiteAuditLog(path) if path.suffix == ".sqlite3" else JsonlAuditLog(path)


def companions(path: Path) -> list[Path]:
    """The log file and the files beside it that belong to it."""
    names = [path.name, f"{path.name}.checkpoint"]
    if path.suffix == ".jsonl":
        names.append(f"{path.name}.head")
    return [path.with_name(name) for name in names]


def signed_log(sandbox: Sandbox, path: Path, private: Path, count: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    log = open_log(path)
    refuse_calls(sandbox, AuditChain(log, signing_key=private), count=count)
    log.close()


@pytest.mark.parametrize("name", ["audit.jsonl", "audit.sqlite3"])
def test_a_log_swapped_for_another_hosts_signed_log_fails_against_its_id(
    sandbox: Sandbox, keys: tuple[Path, Path], name: str
) -> None:
    private, public = keys
    host_a, host_b = sandbox.state / "host-a" / name, sandbox.state / "host-b" / name
    signed_log(sandbox, host_a, private, count=4)
    signed_log(sandbox, host_b, private, count=2)  # the fleet shares one signing key
    pinned = log_id(verify(host_a, "--key", str(public)))
    assert verify(host_a, "--key", str(public), "--log-id", pinned).exit_code == 0
    # Host A's log alone replaced: A's checkpoint names another log.
    shutil.copy(host_b, host_a)
    result = verify(host_a, "--key", str(public))
    assert result.exit_code == 1 and "foreign" in result.output, result.output
    # Host A's log and its checkpoint (and anchor) replaced by host B's: every file is
    # genuine and signed, and only the log id gives it away.
    for source in companions(host_b):
        shutil.copy(source, host_a.with_name(source.name))
    assert verify(host_a, "--key", str(public)).exit_code == 0
    result = verify(host_a, "--key", str(public), "--log-id", pinned)
    assert result.exit_code == 1, result.output
    assert f"not the expected {pinned}" in result.output and "foreign" in result.output


@pytest.mark.parametrize("name", ["audit.jsonl", "audit.sqlite3"])
def test_records_cut_below_the_signed_count_fail_whatever_the_anchor_says(
    sandbox: Sandbox, keys: tuple[Path, Path], name: str
) -> None:
    private, public = keys
    path = sandbox.state / name
    signed_log(sandbox, path, private, count=4)
    if path.suffix == ".jsonl":
        cut_jsonl(path, 2)
        last = json.loads(path.read_bytes().splitlines()[-1])["record_hash"]
        Path(f"{path}.head").write_text(last + "\n")
    else:
        with sqlite3.connect(path) as connection:
            connection.execute("DELETE FROM audit_log WHERE seq >= 2")
            connection.execute(
                "UPDATE audit_head SET count = 2, "
                "record_hash = (SELECT record_hash FROM audit_log WHERE seq = 1)"
            )
    assert verify(path).exit_code == 0  # chain and anchor agree: only the signature knows
    result = verify(path, "--key", str(public))
    assert result.exit_code == 1, result.output
    assert "truncated: index 2" in result.output
    assert "covers 4 records but the log holds 2" in result.output
    with open_log(path) as log, pytest.raises(AuditIntegrityError, match="cut off"):
        AuditChain(log, signing_key=private)


def _first_format_checkpoint(path: Path, private: Path, head: str) -> None:
    """A checkpoint as the first format wrote it: the head alone, signed."""
    import base64

    signed = json.dumps({"domain": "jevqueue.audit.checkpoint.v1", "head": head}, sort_keys=True)
    signature = load_private_key(private).sign(signed.encode("ascii"))
    text = json.dumps({"head": head, "signature": base64.b64encode(signature).decode()})
    Path(f"{path}.checkpoint").write_text(text + "\n")


def test_a_checkpoint_of_the_first_format_is_reported_and_re_signed(
    sandbox: Sandbox, keys: tuple[Path, Path]
) -> None:
    private, public = keys
    host_a, host_b = sandbox.state / "a" / "audit.jsonl", sandbox.state / "b" / "audit.jsonl"
    for path in (host_a, host_b):
        signed_log(sandbox, path, private, count=2)
        head = json.loads(path.read_bytes().splitlines()[-1])["record_hash"]
        _first_format_checkpoint(path, private, head)
    # The swap the first format let through is no longer accepted silently.
    for source in companions(host_b):
        shutil.copy(source, host_a.with_name(source.name))
    result = verify(host_a, "--key", str(public))
    assert result.exit_code == 1 and "outdated" in result.output, result.output
    assert "jevqueue audit sign" in result.output
    # An archived log is re-signed by the command, after its chain and old checkpoint check out.
    assert sign(host_b, private).exit_code == 0
    assert verify(host_b, "--key", str(public)).exit_code == 0
    # A live one by its writer, when it opens the log with the key.
    signed_log(sandbox, host_a.with_name("live.jsonl"), private, count=2)
    live = host_a.with_name("live.jsonl")
    _first_format_checkpoint(
        live, private, json.loads(live.read_bytes().splitlines()[-1])["record_hash"]
    )
    assert verify(live, "--key", str(public)).exit_code == 1
    with JsonlAuditLog(live) as log:
        AuditChain(log, signing_key=private)
    assert verify(live, "--key", str(public)).exit_code == 0


def test_an_old_checkpoint_of_a_log_cut_since_is_not_re_signed(
    sandbox: Sandbox, keys: tuple[Path, Path]
) -> None:
    private, public = keys
    path = sandbox.state / "audit.jsonl"
    signed_log(sandbox, path, private, count=3)
    _first_format_checkpoint(
        path, private, json.loads(path.read_bytes().splitlines()[-1])["record_hash"]
    )
    cut_jsonl(path, 2)
    last = json.loads(path.read_bytes().splitlines()[-1])["record_hash"]
    Path(f"{path}.head").write_text(last + "\n")
    result = sign(path, private)
    assert result.exit_code == 1 and "not re-signed" in result.output
    with JsonlAuditLog(path) as log, pytest.raises(AuditIntegrityError, match="cut off"):
        AuditChain(log, signing_key=private)
    assert "outdated" in verify(path, "--key", str(public)).output


def test_a_writer_with_a_key_does_not_sign_a_log_it_finds_unsigned(
    sandbox: Sandbox, keys: tuple[Path, Path]
) -> None:
    """Deleting the checkpoint of a cut log must not get the cut signed at the next start."""
    private, public = keys
    path = sandbox.state / "audit.jsonl"
    with JsonlAuditLog(path) as log:
        refuse_calls(sandbox, log, count=2)
        with pytest.raises(AuditIntegrityError, match="no signed checkpoint"):
            AuditChain(log, signing_key=private)
    assert verify(path, "--key", str(public)).exit_code == 1
    assert sign(path, private).exit_code == 0  # the operator's deliberate act
    with JsonlAuditLog(path) as log:
        refuse_calls(sandbox, AuditChain(log, signing_key=private), count=1)
    assert verify(path, "--key", str(public)).exit_code == 0


# --- a PostgreSQL log without its head ------------------------------------------------------


@pytest.mark.network_allowed  # the PostgreSQL server listens on 127.0.0.1
@pytest.mark.parametrize(
    "tamper",
    [
        "DELETE FROM {t}audit_log WHERE seq >= 2; DELETE FROM {t}audit_head",
        "DELETE FROM {t}audit_log WHERE seq >= 2; DROP TABLE {t}audit_head CASCADE",
        "DELETE FROM {t}audit_log; DELETE FROM {t}audit_head",
    ],
    ids=["cut-and-head-row-deleted", "cut-and-head-table-dropped", "emptied-and-head-deleted"],
)
def test_postgres_records_cut_with_their_head_removed_fail_verification(
    sandbox: Sandbox, postgres_schema: tuple[str, str], tamper: str
) -> None:
    import psycopg

    url, schema = postgres_schema
    log = PostgresAuditLog(url, schema=schema)
    refuse_calls(sandbox, log)
    log.close()
    result = verify(url, "--schema", schema)
    assert result.exit_code == 0 and result.output.startswith("OK: 4 records"), result.output
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(tamper.format(t=f'"{schema}".'))
    result = verify(url, "--schema", schema)
    assert result.exit_code == 1, result.output
    assert "unanchored" in result.output and "audit_head" in result.output
    assert "OK" not in result.output
