"""Audit-tail attacks: cutting records off the end, forging records onto it, torn writes.

Each attack edits a log that a real enforcement point wrote while refusing real calls,
then runs ``jevqueue audit verify`` on it, as an auditor would.
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
from jevqueue.approvals import generate_key_pair
from jevqueue.audit import AuditChain, AuditRecord, JsonlAuditLog, SQLiteAuditLog
from jevqueue.audit._jsonl_log import RECOVERY_RULE, record_line
from jevqueue.cli import main
from jevqueue.errors import PolicyDeniedError
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


def verify(path: Path, *extra: str) -> Any:
    return CliRunner().invoke(main, ["audit", "verify", str(path), *extra])


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
        refuse_calls(sandbox, log, count=2)
        saved = anchor.read_text()
        refuse_calls(sandbox, log, count=2)
    assert verify(path).exit_code == 0
    cut_jsonl(path, 3)  # the last refusal vanishes
    tamper(anchor, saved)
    result = verify(path)
    assert result.exit_code == 1 and "unanchored" in result.output


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
    with SQLiteAuditLog(path) as log:
        AuditChain(log, signing_key=other).append(
            {"tool": "t", "result": "DENY", "allowed": False, "environment": "local"}
        )
    result = verify(path, "--key", str(public))
    assert result.exit_code == 1 and "not signed by this key" in result.output


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
    assert result.exit_code == 1 and "unsigned" in result.output


def test_a_torn_last_line_is_recovered_and_the_recovery_recorded(sandbox: Sandbox) -> None:
    path = sandbox.state / "audit.jsonl"
    with JsonlAuditLog(path) as log:
        refuse_calls(sandbox, log, count=2)
    torn = b'{"decision_id":"0190-half-writ'
    with path.open("ab") as handle:
        handle.write(torn)
    assert verify(path).exit_code == 1  # torn: truncated
    with JsonlAuditLog(path) as log:
        assert log.recovered == len(torn)
        refuse_calls(sandbox, log, count=1)
        records = list(log.records())
    assert [r.rule_ids for r in records][2] == (RECOVERY_RULE,)
    assert str(len(torn)) in records[2].reasons[0]
    assert records[3].allowed is False
    assert Path(f"{path}.torn").read_bytes() == torn + b"\n"
    assert verify(path).exit_code == 0
