"""Failures the fuzz harnesses found in code they do not own, each with its reproducer.

Every test states the behaviour the contract promises and is expected to fail until the
failure is fixed (``strict``: once it passes, the run fails, so that the test, and the
``KnownFailure`` entry or input filter the harness keeps for it, are removed together).
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from jevqueue.audit import AuditChain, JsonlAuditLog, SQLiteAuditLog, verify_audit_log
from jevqueue.errors import AuditReadError, AuditWriteError, ConfigurationError, UsageError

_EVENT = {"decision_id": "d-1", "tool": "t", "result": "ALLOW", "allowed": True}


@pytest.mark.xfail(
    strict=True, raises=AuditWriteError, reason="verification raises the writer's error"
)
def test_a_record_with_a_lone_surrogate_is_reported_not_raised(tmp_path: Path) -> None:
    log = JsonlAuditLog(tmp_path / "audit.jsonl")
    AuditChain(log).append(_EVENT)
    log.close()
    record = json.loads((tmp_path / "audit.jsonl").read_text("utf-8"))
    record["tool"] = "\ud800"  # valid JSON ("\\ud800"), not valid Unicode
    (tmp_path / "audit.jsonl").write_text(json.dumps(record) + "\n", "utf-8")
    report = verify_audit_log(tmp_path / "audit.jsonl")
    assert not report.ok


@pytest.mark.xfail(
    strict=True, raises=TypeError, reason="_head_problems compares the stored count with an int"
)
def test_a_head_anchor_whose_count_is_text_is_reported_not_raised(tmp_path: Path) -> None:
    log = SQLiteAuditLog(tmp_path / "audit.sqlite3")
    AuditChain(log).append(_EVENT)
    log.close()
    with sqlite3.connect(tmp_path / "audit.sqlite3") as connection:
        connection.execute("UPDATE audit_head SET count = 'one'")
    connection.close()
    report = verify_audit_log(tmp_path / "audit.sqlite3")
    assert not report.ok


@pytest.mark.xfail(
    strict=True, raises=UnicodeDecodeError, reason="only sqlite3.DatabaseError is turned into one"
)
def test_a_schema_name_that_is_not_utf8_is_an_audit_read_error(tmp_path: Path) -> None:
    log = SQLiteAuditLog(tmp_path / "audit.sqlite3")
    AuditChain(log).append(_EVENT)
    log.close()
    connection = sqlite3.connect(tmp_path / "audit.sqlite3")
    connection.execute("CREATE TABLE extra (x)")
    connection.execute("PRAGMA writable_schema = ON")
    connection.execute("UPDATE sqlite_master SET name = CAST(x'b3' AS TEXT) WHERE name = 'extra'")
    connection.commit()
    connection.close()
    with pytest.raises(AuditReadError):
        verify_audit_log(tmp_path / "audit.sqlite3")


@pytest.mark.xfail(
    strict=True, raises=RecursionError, reason="the refusal calls repr() on the whole answer"
)
def test_an_approver_answer_nested_deeply_is_refused_with_a_typed_error() -> None:
    from jevqueue.policy._approval_request import approval_records

    answer: list[object] = []
    for _ in range(100_000):
        answer = [answer]
    with pytest.raises(UsageError):
        approval_records([answer])


@pytest.mark.xfail(
    strict=True,
    raises=(TypeError, OverflowError),
    reason="jsonschema's TypeError and OverflowError escape ToolSpec",
)
@pytest.mark.parametrize(
    "schema",
    [
        {"$schema": ["not", "a", "string"]},
        {"type": "object", "properties": {"a": {"type": "string", "pattern": "a{4294967296}"}}},
    ],
    ids=["schema-keyword-not-a-string", "pattern-repetition-too-large"],
)
def test_a_schema_jsonschema_cannot_read_is_a_configuration_error(schema: object) -> None:
    from jevqueue.policy import ToolSpec

    with pytest.raises(ConfigurationError):
        ToolSpec("t", side_effects=(), schema=schema)  # type: ignore[arg-type]


@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason="mcp 1.x: a cancelled, answered request deafens the connection",
)
def test_the_proxy_answers_after_a_client_cancels_an_answered_request() -> None:
    pytest.importorskip("atheris", reason="the proxy is driven by the fuzz harness's running proxy")
    pytest.importorskip("mcp", reason='needs the mcp extra: pip install "jevqueue[mcp]"')
    # In a child process: the harness instruments the modules it imports for coverage.
    script = """
import json, logging, sys
logging.disable(logging.CRITICAL)
import fuzz_mcp_proxy
fuzz_mcp_proxy._DEADLINE_SECONDS = 10.0
running = fuzz_mcp_proxy._RunningProxy()
lines = [
    *fuzz_mcp_proxy._HANDSHAKE,
    json.dumps({"jsonrpc": "2.0", "id": "a", "method": "ping"}),
    json.dumps(
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "a"}}
    ),
]
try:
    running.serve(lines)  # the harness's own ping after these lines must be answered
finally:
    running.close()
"""
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=Path(__file__).parent,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
