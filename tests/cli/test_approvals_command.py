"""`jevqueue approvals`: list, show, approve, deny and watch the approval inbox."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from jevqueue.approvals import (
    InboxState,
    SignedApprovalVerifier,
    SQLiteApprovalInbox,
    generate_key_pair,
    load_public_key,
)
from jevqueue.cli import main
from jevqueue.policy import Action, ApprovalRequest, Verdict, generic_registry

CONTEXT = {
    "task_id": "task-42",
    "actor_id": "coding-agent",
    "workspace": "/workspace/project",
    "git_sha": "0123456789abcdef0123456789abcdef01234567",
}


def _request(command: str = "make deploy") -> ApprovalRequest:
    action = Action.build(
        generic_registry(),
        "run_command",
        {"CommandLine": command, "Cwd": "/workspace/project"},
        CONTEXT,
    )
    verdict = Verdict.allow_with_obligations(["explicit_approval"], "a shell command")
    return ApprovalRequest.of(action, verdict.bound(action.digest, ""), call_id="call-7")


@pytest.fixture
def store(tmp_path: Path) -> SQLiteApprovalInbox:
    return SQLiteApprovalInbox(tmp_path / "inbox.sqlite3")


@pytest.fixture
def key(tmp_path: Path) -> Path:
    private, _ = generate_key_pair(tmp_path / "alice.key")
    return private


def cli(store: SQLiteApprovalInbox, *arguments: str) -> Any:
    return CliRunner().invoke(main, ["approvals", *arguments, "--store", str(store.path)])


def test_list_shows_pending_requests_newest_first(store: SQLiteApprovalInbox) -> None:
    assert cli(store, "list").output.strip() == "no pending requests"
    older = store.file(_request("make one"))
    newer = store.file(_request("make two"))
    store.deny(store.file(_request("make three")).request_id, "bob", "no")
    listed = cli(store, "list")
    assert listed.exit_code == 0, listed.output
    lines = listed.output.splitlines()
    assert lines[0].split() == ["ID", "TOOL", "ASKED", "BY", "AGE", "EXPIRES", "IN"]
    assert [line[:12] for line in lines[1:]] == [newer.request_id[:12], older.request_id[:12]]
    assert "run_command" in lines[1] and "coding-agent (task task-42" in lines[1]
    assert "14m" in lines[1]  # expires in, of the default 15 minutes
    every = cli(store, "list", "--all")
    assert len(every.output.splitlines()) == 4 and "denied" in every.output
    as_json = json.loads(cli(store, "list", "--json").output)
    assert [entry["request_id"] for entry in as_json] == [newer.request_id, older.request_id]
    assert as_json[0]["request"]["arguments"]["CommandLine"] == "make two"


def test_show_prints_the_exact_request(store: SQLiteApprovalInbox) -> None:
    filed = store.file(_request())
    shown = cli(store, "show", filed.request_id[:6])
    assert shown.exit_code == 0, shown.output
    for expected in (
        f"request   {filed.request_id}",
        "state     pending, expires in 14m",
        "tool      run_command",
        f"digest    {filed.action_digest}",
        '"CommandLine": "make deploy"',
        "a shell command",
        '"actor_id": "coding-agent"',
        "what the digest covers besides:",
        "  side effects  shell_command",
        "  cwd           /workspace/project",
        "  targets       (none)",
        "call call-7 on",
        "decisions: none yet",
    ):
        assert expected in shown.output, expected
    data = json.loads(cli(store, "show", filed.request_id, "--json").output)
    assert data["action_digest"] == filed.action_digest and data["state"] == "pending"


def test_approve_signs_exactly_the_stored_digest_with_the_reviewer_s_key(
    store: SQLiteApprovalInbox, key: Path, tmp_path: Path
) -> None:
    filed = store.file(_request())
    done = cli(store, "approve", filed.request_id[:8], "--key", str(key), "--reviewer", "alice")
    assert done.exit_code == 0, done.output
    assert f"alice decided {filed.request_id}: it is approved" in done.output
    (record,) = store.get(filed.request_id).records
    assert record.action_digest == filed.action_digest and record.approver_id == "alice"
    verifier = SignedApprovalVerifier({"alice": load_public_key(tmp_path / "alice.key.pub")})
    action = Action.build(
        generic_registry(),
        "run_command",
        {"CommandLine": "make deploy", "Cwd": "/workspace/project"},
        CONTEXT,
    )
    assert verifier(record, action) is True
    shown = cli(store, "show", filed.request_id)
    assert "alice approved at" in shown.output and "state     approved" in shown.output


def test_the_reviewer_comes_from_the_environment(
    store: SQLiteApprovalInbox, key: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JEVQUEUE_REVIEWER", "alice")
    filed = store.file(_request())
    assert cli(store, "approve", filed.request_id, "--key", str(key)).exit_code == 0
    assert store.get(filed.request_id).approvals[0].reviewer == "alice"


def test_deny_needs_a_reason_and_records_it(store: SQLiteApprovalInbox) -> None:
    filed = store.file(_request())
    missing = cli(store, "deny", filed.request_id, "--reviewer", "bob")
    assert missing.exit_code == 2 and "--reason" in missing.output
    done = cli(store, "deny", filed.request_id, "--reviewer", "bob", "--reason", "not today")
    assert done.exit_code == 0 and "it is denied" in done.output
    assert store.get(filed.request_id).denial.reason == "not today"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("case", "code", "complaint"),
    [
        ("unknown", 2, "no approval request"),
        ("short", 2, "at least its first 4 hex digits"),
        ("wrong key", 2, "holds a public key"),
        ("missing key", 2, "does not exist"),
        ("expired", 1, "expired before anybody decided"),
        ("itself", 1, "never approves itself"),
        ("twice", 1, "alice already decided"),
    ],
)
def test_bad_input_is_a_clear_error_and_never_a_traceback(
    store: SQLiteApprovalInbox, key: Path, case: str, code: int, complaint: str
) -> None:
    filed = store.file(_request(), required=2)
    target, key_file, reviewer = filed.request_id, str(key), "alice"
    if case == "unknown":
        target = "0123456789"
    elif case == "short":
        target = "ab"
    elif case == "wrong key":
        key_file = f"{key}.pub"
    elif case == "missing key":
        key_file = f"{key}.gone"
    elif case == "expired":
        target = store.file(_request("ls"), expires_in=timedelta(milliseconds=50)).request_id
        time.sleep(0.2)
    elif case == "itself":
        reviewer = "coding-agent"
    elif case == "twice":
        cli(store, "approve", target, "--key", key_file, "--reviewer", "alice")
    result = cli(store, "approve", target, "--key", key_file, "--reviewer", reviewer)
    assert result.exit_code == code, result.output
    assert complaint in result.output and "Traceback" not in result.output


def test_a_prefix_matching_two_ids_asks_for_more(
    store: SQLiteApprovalInbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    import jevqueue.approvals._inbox as inbox_module

    ids = iter(["beef" + "0" * 28, "beef" + "1" * 28])
    monkeypatch.setattr(inbox_module.secrets, "token_hex", lambda _: next(ids))
    store.file(_request("make one"))
    store.file(_request("make two"))
    monkeypatch.undo()
    result = cli(store, "show", "beef")
    assert result.exit_code == 2 and "several request ids" in result.output


def test_an_unreadable_store_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "not-a-db").write_text("plain text, not SQLite")
    result = CliRunner().invoke(main, ["approvals", "list", "--store", str(tmp_path / "not-a-db")])
    assert result.exit_code == 2 and "cannot open the approval inbox" in result.output


def test_watch_prints_each_new_request_as_it_arrives(store: SQLiteApprovalInbox) -> None:
    store.file(_request("make before"))
    watcher = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from jevqueue.cli import main; main()",
            "approvals",
            "watch",
            "--json",
            "--interval",
            "0.05",
            "--store",
            str(store.path),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        lines = _lines(watcher)
        first = json.loads(_next_line(lines))
        assert first["request"]["arguments"]["CommandLine"] == "make before"
        filed = store.file(_request("make after"))
        second = json.loads(_next_line(lines))
        assert second["request_id"] == filed.request_id and second["state"] == "pending"
    finally:
        watcher.terminate()
        watcher.wait(timeout=30)
    assert store.get(filed.request_id).state is InboxState.PENDING  # watching decides nothing


def _lines(process: subprocess.Popen[str]) -> queue.Queue[str | None]:
    """The process's output lines as they come (None at its end), read in a thread so that
    every wait for one has a deadline."""
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    return lines


def _next_line(lines: queue.Queue[str | None], seconds: float = 30) -> str:
    try:
        line = lines.get(timeout=seconds)
    except queue.Empty:
        raise AssertionError(f"watch printed nothing in {seconds} s") from None
    assert line is not None, "watch exited before printing the next request"
    return line
