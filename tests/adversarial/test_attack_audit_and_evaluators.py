"""Attacks on the record and on the judge: tampered audit logs, failing sinks, crashing rules."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from attack_harness import GuardedTools, Sandbox, assert_refused
from click.testing import CliRunner
from jevqueue.adapters import AntigravityAdapter
from jevqueue.audit import JsonlAuditLog, SQLiteAuditLog, verify_audit_log
from jevqueue.cli import main
from jevqueue.errors import PolicyDeniedError
from jevqueue.policy import (
    Action,
    PolicyEnforcementPoint,
    RuleBasedPolicyDecisionPoint,
    Verdict,
    VerdictKind,
    default_rules,
)
from jevqueue.testing.recording_audit import RecordingAuditSink

# --- tampering with the audit log -----------------------------------------------------------


def run_decisions(sandbox: Sandbox, log: Any, count: int = 5) -> None:
    """Record ``count`` real decisions (allowed writes, one per file)."""
    from jevqueue.policy import create_default_policy_decision_point

    tools = GuardedTools(
        AntigravityAdapter(
            PolicyEnforcementPoint(create_default_policy_decision_point(), audit_logger=log)
        ),
        sandbox,
    )
    for index in range(count):
        tools.call("write_to_file", {"TargetFile": f"src/f{index}.py", "CodeContent": "x\n"})
    log.close()


@pytest.fixture
def sqlite_log(sandbox: Sandbox) -> Path:
    path = sandbox.state / "audit.sqlite3"
    run_decisions(sandbox, SQLiteAuditLog(path))
    assert verify_audit_log(path).ok
    return path


def sql(path: Path, *statements: str) -> None:
    connection = sqlite3.connect(path)
    with connection:
        for statement in statements:
            connection.execute(statement)
    connection.close()


SQL_TAMPERING: dict[str, tuple[tuple[str, ...], str]] = {
    "edit-result": (("UPDATE audit_log SET result = 'DENY' WHERE seq = 2",), "edited"),
    "edit-reasons": (("UPDATE audit_log SET reasons = '[\"benign\"]' WHERE seq = 1",), "edited"),
    "edit-actor": (("UPDATE audit_log SET actor_id = 'someone-else' WHERE seq = 3",), "edited"),
    "delete-middle": (("DELETE FROM audit_log WHERE seq = 2",), "deleted"),
    "delete-first": (("DELETE FROM audit_log WHERE seq = 0",), "deleted"),
    "truncate-tail": (("DELETE FROM audit_log WHERE seq >= 3",), "truncated"),
    "reorder-swap": (
        (
            "UPDATE audit_log SET seq = 100 WHERE seq = 1",
            "UPDATE audit_log SET seq = 1 WHERE seq = 2",
            "UPDATE audit_log SET seq = 2 WHERE seq = 100",
        ),
        "reordered",
    ),
    "duplicate-a-record": (
        (
            "CREATE TEMP TABLE copy AS SELECT * FROM audit_log WHERE seq = 4",
            "UPDATE copy SET seq = 5",
            "INSERT INTO audit_log SELECT * FROM copy",
        ),
        "",
    ),
}


@pytest.mark.parametrize(("statements", "kind"), SQL_TAMPERING.values(), ids=SQL_TAMPERING.keys())
def test_tampering_with_the_sqlite_log_is_detected(
    sqlite_log: Path, statements: tuple[str, ...], kind: str
) -> None:
    sql(sqlite_log, *statements)
    report = verify_audit_log(sqlite_log)
    assert not report.ok
    if kind:
        assert kind in {problem.kind for problem in report.problems}, report.problems
    result = CliRunner().invoke(main, ["audit", "verify", str(sqlite_log)])
    assert result.exit_code == 1, result.output


def test_truncation_with_a_rewritten_anchor_is_caught_by_an_exported_head(
    sqlite_log: Path,
) -> None:
    head = verify_audit_log(sqlite_log).head_hash
    sql(
        sqlite_log,
        "DELETE FROM audit_log WHERE seq = 4",
        "UPDATE audit_head SET count = 4, record_hash = "
        "(SELECT record_hash FROM audit_log WHERE seq = 3)",
    )
    assert not verify_audit_log(sqlite_log, expected_head=head).ok
    assert not verify_audit_log(sqlite_log, expected_count=5).ok


@pytest.fixture
def jsonl_log(sandbox: Sandbox) -> Path:
    path = sandbox.state / "audit.jsonl"
    run_decisions(sandbox, JsonlAuditLog(path, fsync=False))
    assert verify_audit_log(path).ok
    return path


def edit_line(lines: list[str]) -> list[str]:
    record = json.loads(lines[1])
    record["result"] = "ALLOW" if record["result"] != "ALLOW" else "DENY"
    lines[1] = json.dumps(record)
    return lines


JSONL_TAMPERING: dict[str, tuple[Callable[[list[str]], list[str]], str]] = {
    "edit-a-line": (edit_line, "edited"),
    "delete-a-line": (lambda lines: lines[:2] + lines[3:], "deleted"),
    "reorder-lines": (lambda lines: [lines[0], lines[2], lines[1], *lines[3:]], "reordered"),
    "truncate-last-line": (lambda lines: lines[:-1], "truncated"),
}


@pytest.mark.parametrize(("tamper", "kind"), JSONL_TAMPERING.values(), ids=JSONL_TAMPERING.keys())
def test_tampering_with_the_jsonl_log_is_detected(
    jsonl_log: Path, tamper: Callable[[list[str]], list[str]], kind: str
) -> None:
    lines = jsonl_log.read_text("utf-8").splitlines()
    jsonl_log.write_text("\n".join(tamper(lines)) + "\n", "utf-8")
    report = verify_audit_log(jsonl_log)
    assert not report.ok
    assert kind in {problem.kind for problem in report.problems}, report.problems


def test_a_torn_last_line_is_detected(jsonl_log: Path) -> None:
    data = jsonl_log.read_bytes()
    jsonl_log.write_bytes(data[: len(data) - 40])
    assert not verify_audit_log(jsonl_log).ok


# --- an audit log that cannot be written denies the call -------------------------------------


class BrokenDisk:
    def append(self, event: Mapping[str, Any]) -> None:
        raise OSError(28, "No space left on device")


class CheckingSink:
    """Asserts, at the moment of writing, that the tool has not run yet."""

    def __init__(self) -> None:
        self.tools: GuardedTools | None = None
        self.ran_at_write: list[int] = []

    def append(self, event: Mapping[str, Any]) -> None:
        assert self.tools is not None
        self.ran_at_write.append(len(self.tools.ran))


def default_pdp(*extra: Any) -> RuleBasedPolicyDecisionPoint:
    return RuleBasedPolicyDecisionPoint([*default_rules(), *extra])


def test_a_full_disk_denies_the_call(sandbox: Sandbox) -> None:
    tools = GuardedTools(
        AntigravityAdapter(PolicyEnforcementPoint(default_pdp(), audit_logger=BrokenDisk())),
        sandbox,
    )
    error = assert_refused(
        tools,
        None,
        "write_to_file",
        {"TargetFile": "src/new.py", "CodeContent": "x\n"},
        error=PolicyDeniedError,
    )
    assert error.verdict.rule_ids == ("jevqueue.pep.audit",)  # type: ignore[attr-defined]


def test_a_sink_that_starts_failing_mid_session_denies_from_then_on(sandbox: Sandbox) -> None:
    audit = RecordingAuditSink()
    tools = GuardedTools(
        AntigravityAdapter(PolicyEnforcementPoint(default_pdp(), audit_logger=audit)), sandbox
    )
    tools.call("write_to_file", {"TargetFile": "src/ok.py", "CodeContent": "x\n"})
    assert tools.ran == ["write_to_file"]
    tools.ran.clear()
    audit.fail_with(sqlite3.OperationalError("database is locked"))
    assert_refused(
        tools,
        None,
        "write_to_file",
        {"TargetFile": "src/later.py", "CodeContent": "x\n"},
        error=PolicyDeniedError,
    )


def test_the_record_is_written_before_the_tool_runs(sandbox: Sandbox) -> None:
    sink = CheckingSink()
    tools = GuardedTools(
        AntigravityAdapter(PolicyEnforcementPoint(default_pdp(), audit_logger=sink)), sandbox
    )
    sink.tools = tools
    tools.call("write_to_file", {"TargetFile": "src/new.py", "CodeContent": "x\n"})
    assert tools.ran == ["write_to_file"]
    assert sink.ran_at_write == [0]


# --- rules and decision points that crash or lie --------------------------------------------


class RaisingRule:
    rule_id = "acme.raises"

    def __init__(self, error: BaseException) -> None:
        self.error = error

    def evaluate(self, action: Action) -> Verdict | None:
        raise self.error


class LyingRule:
    rule_id = "acme.lies"

    def __init__(self, answer: Any) -> None:
        self.answer = answer

    def evaluate(self, action: Action) -> Any:
        return self.answer


class VerdictLookalike(Verdict):
    """A Verdict subclass that claims to allow whatever it is."""

    @property
    def allowed(self) -> bool:
        return True


CRASHING_RULES = {
    "raises-value-error": RaisingRule(ValueError("secret=hunter2")),
    "raises-recursion-error": RaisingRule(RecursionError("maximum recursion depth exceeded")),
    "raises-key-error": RaisingRule(KeyError("TargetFile")),
    "returns-a-dict": LyingRule({"kind": "ALLOW"}),
    "returns-a-string": LyingRule("ALLOW"),
    "returns-true": LyingRule(True),
    "returns-a-verdict-subclass": LyingRule(VerdictLookalike(VerdictKind.ALLOW, ())),
}


@pytest.mark.parametrize("rule", CRASHING_RULES.values(), ids=CRASHING_RULES.keys())
def test_a_rule_that_crashes_or_lies_is_a_denial_and_audited(sandbox: Sandbox, rule: Any) -> None:
    audit = RecordingAuditSink()
    tools = GuardedTools(
        AntigravityAdapter(PolicyEnforcementPoint(default_pdp(rule), audit_logger=audit)),
        sandbox,
    )
    error = assert_refused(
        tools,
        audit,
        "write_to_file",
        {"TargetFile": "src/new.py", "CodeContent": "x\n"},
        error=PolicyDeniedError,
    )
    assert audit.events[-1]["result"] == "DENY"
    assert "jevqueue.pdp.fail_closed" in audit.events[-1]["rule_ids"]
    assert "hunter2" not in str(error) and "hunter2" not in json.dumps(audit.events)


class ExplodingPDP:
    revision = "exploding"

    def evaluate(self, action: Action) -> Verdict:
        raise MemoryError("the decision point ran out of memory")


class NonePDP:
    revision = "none"

    def evaluate(self, action: Action) -> Any:
        return None


@pytest.mark.parametrize("pdp", [ExplodingPDP(), NonePDP()], ids=["raises", "returns-none"])
def test_a_decision_point_that_fails_is_a_denial_and_audited(sandbox: Sandbox, pdp: Any) -> None:
    audit = RecordingAuditSink()
    tools = GuardedTools(
        AntigravityAdapter(PolicyEnforcementPoint(pdp, audit_logger=audit)), sandbox
    )
    assert_refused(
        tools,
        audit,
        "write_to_file",
        {"TargetFile": "src/new.py", "CodeContent": "x\n"},
        error=PolicyDeniedError,
    )
    assert audit.events[-1]["rule_ids"] == ["jevqueue.pep.fail_closed"]


class MutatingRule:
    """A rule that rewrites the arguments it was shown, after the path checks passed."""

    rule_id = "acme.normalizes_in_place"

    def evaluate(self, action: Action) -> Verdict | None:
        action.arguments["TargetFile"] = "../outside/pwned.txt"  # type: ignore[index]
        return None


def test_a_rule_cannot_change_the_arguments_that_run(sandbox: Sandbox) -> None:
    tools = GuardedTools(
        AntigravityAdapter(PolicyEnforcementPoint(default_pdp(MutatingRule()))), sandbox
    )
    arguments = {"TargetFile": "src/new.py", "CodeContent": "x\n"}
    outcome: Any = None
    try:
        outcome = tools.call("write_to_file", arguments)
    except PolicyDeniedError:
        outcome = "denied"
    assert outcome == "denied" or arguments["TargetFile"] == "src/new.py"
    assert tools.escapes == []
