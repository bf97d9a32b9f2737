"""`jevqueue approvals`: list, show, approve, deny and watch the approval inbox."""

from __future__ import annotations

import hashlib
import json
import os
import queue
import socket
import sqlite3
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
    DEFAULT_EXPIRY,
    InboxState,
    Requester,
    SignedApprovalVerifier,
    SQLiteApprovalInbox,
    generate_key_pair,
    load_public_key,
)
from jevqueue.cli import main
from jevqueue.errors import ConfigurationError
from jevqueue.policy import Action, ApprovalQuorum, ApprovalRequest, Verdict, generic_registry
from jevqueue.policy._canonical import canonical_json

CONTEXT = {
    "task_id": "task-42",
    "actor_id": "coding-agent",
    "workspace": "/workspace/project",
    "git_sha": "0123456789abcdef0123456789abcdef01234567",
}
LEFT = int(DEFAULT_EXPIRY.total_seconds() // 60) - 1  # whole minutes left just after filing


def _request(
    command: str = "make deploy", reason: str = "a shell command", approvals: int = 1
) -> ApprovalRequest:
    action = Action.build(
        generic_registry(),
        "run_command",
        {"CommandLine": command, "Cwd": "/workspace/project"},
        CONTEXT,
    )
    verdict = Verdict.allow_with_obligations(
        ["explicit_approval"], reason, quorum=ApprovalQuorum(approvals)
    )
    return ApprovalRequest.of(action, verdict.bound(action.digest, ""), call_id="call-7")


@pytest.fixture(autouse=True)
def _no_inbox_in_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Each test chooses its inbox: none comes from the shell that runs the tests."""
    monkeypatch.delenv("JEVQUEUE_INBOX", raising=False)
    monkeypatch.delenv("JEVQUEUE_DATABASE_URL", raising=False)
    monkeypatch.setenv("JEVQUEUE_STATE_DIR", str(tmp_path / "state"))


@pytest.fixture
def store(tmp_path: Path) -> SQLiteApprovalInbox:
    return SQLiteApprovalInbox(tmp_path / "inbox.sqlite3")


@pytest.fixture
def key(tmp_path: Path) -> Path:
    private, _ = generate_key_pair(tmp_path / "alice.key")
    return private


def cli(store: SQLiteApprovalInbox, *arguments: str) -> Any:
    # color=True: click keeps escape sequences, as it does on a terminal
    return CliRunner().invoke(
        main, ["approvals", *arguments, "--store", str(store.path)], color=True
    )


def test_list_shows_pending_requests_newest_first(store: SQLiteApprovalInbox) -> None:
    assert cli(store, "list").output.strip() == f"no pending requests in {store.path}"
    older = store.file(_request("make one"))
    newer = store.file(_request("make two"))
    store.deny(store.file(_request("make three")).request_id, "bob", "no")
    listed = cli(store, "list")
    assert listed.exit_code == 0, listed.output
    lines = listed.output.splitlines()
    assert lines[0].split() == ["ID", "TOOL", "ASKED", "BY", "AGE", "EXPIRES", "IN"]
    assert [line[:12] for line in lines[1:]] == [newer.request_id[:12], older.request_id[:12]]
    assert "run_command" in lines[1] and "coding-agent (task task-42" in lines[1]
    assert f"{LEFT}m" in lines[1]  # expires in, of the default expiry
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
        f"state     pending, expires in {LEFT}m",
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
    filed = store.file(_request(approvals=2))
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


def _watch(store: SQLiteApprovalInbox, *options: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from jevqueue.cli import main; main()",
            "approvals",
            "watch",
            *options,
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


def test_watch_prints_each_new_request_as_it_arrives(store: SQLiteApprovalInbox) -> None:
    store.file(_request("make before"))
    watcher = _watch(store, "--json")
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


# --- untrusted text never acts on the terminal ------------------------------------------------

HOSTILE = ("\x1b[2J", "\x9b", "\u202e")  # clear the screen, a C1 CSI, right-to-left override
RAW = ("\x1b", "\x9b", "\u202e")


HOSTILE_TOOL = "run\x1b[2K\x1b[1A\u202e"  # erase the line above, move up, reverse
SHOWN_TOOL = "run\\x1b[2K\\x1b[1A\\u202e"


def _hostile(store: SQLiteApprovalInbox) -> Any:
    """A request whose arguments, policy reason and tool name hold escape sequences.

    Filing refuses control characters in what the requester says about itself, and no
    registry names a tool so; the tool is written here as a writer going around the
    store would write it, consistently, digest recomputed, so that it reads back."""
    asked = _request("echo " + " ".join(HOSTILE), reason="deploys " + " ".join(HOSTILE))
    filed = store.file(asked)
    document = dict(filed.request)
    covered = {**document["digest_document"], "tool": HOSTILE_TOOL}
    digest = "sha256:" + hashlib.sha256(canonical_json(covered)).hexdigest()
    document.update(tool=HOSTILE_TOOL, digest_document=covered, action_digest=digest)
    with sqlite3.connect(store.path) as connection:
        connection.execute(
            "UPDATE approval_requests SET tool = ?, action_digest = ?, request = ? "
            "WHERE request_id = ?",
            (HOSTILE_TOOL, digest, json.dumps(document), filed.request_id),
        )
    connection.close()
    return store.get(filed.request_id)


def test_text_from_the_inbox_is_printed_escaped_and_json_stays_exact(
    store: SQLiteApprovalInbox,
) -> None:
    filed = _hostile(store)
    assert filed.tool == HOSTILE_TOOL
    denied = store.file(_request("ls"))
    store.deny(denied.request_id, "bob", "no thanks")
    with sqlite3.connect(store.path) as connection:  # a reason written around the store
        connection.execute(
            "UPDATE approval_decisions SET reason = ? WHERE request_id = ?",
            ("no \u202e\x1b[1A thanks", denied.request_id),
        )
    connection.close()
    for arguments in (["list"], ["list", "--all"], ["show", filed.request_id]):
        result = cli(store, *arguments)
        assert result.exit_code == 0, result.output
        for raw in RAW:
            assert raw not in result.output, (arguments, raw)
        assert SHOWN_TOOL in result.output, arguments  # visibly there
    shown = cli(store, "show", filed.request_id).output
    assert "deploys \\x1b[2J \\x9b \\u202e" in shown  # the policy's reason
    assert "no \\u202e\\x1b[1A thanks" in cli(store, "show", denied.request_id).output
    exact = json.loads(cli(store, "show", filed.request_id, "--json").output)
    assert exact["request"]["arguments"]["CommandLine"] == "echo " + " ".join(HOSTILE)
    assert exact["request"]["reasons"] == ["deploys " + " ".join(HOSTILE)]
    assert exact["tool"] == HOSTILE_TOOL
    for raw in RAW:  # JSON escapes them itself
        assert raw not in cli(store, "list", "--all", "--json").output


def test_control_characters_are_refused_where_they_come_in(
    store: SQLiteApprovalInbox, key: Path
) -> None:
    asked = _request()
    with pytest.raises(ConfigurationError, match="control character U\\+001B"):
        store.file(asked, requester=Requester.of(asked, session_id="run\x1b[2K"))
    filed = store.file(asked)
    hostile = cli(store, "deny", filed.request_id, "--reviewer", "bob", "--reason", "no\u202e")
    assert hostile.exit_code == 2 and "control character U+202E" in hostile.output
    approving = cli(
        store,
        *("approve", filed.request_id, "--key", str(key), "--reviewer", "alice"),
        *("--reason", "ok\x9b"),
    )
    assert approving.exit_code == 2 and "control character U+009B" in approving.output
    assert store.get(filed.request_id).decisions == ()


def test_watch_prints_escaped_text(store: SQLiteApprovalInbox) -> None:
    filed = _hostile(store)
    watcher = _watch(store)
    try:
        line = _next_line(_lines(watcher))
    finally:
        watcher.terminate()
        watcher.wait(timeout=30)
    assert line.startswith(filed.request_id) and SHOWN_TOOL in line
    for raw in RAW:
        assert raw not in line


# --- damaged requests, purge and prune ------------------------------------------------------------


def _damage(store: SQLiteApprovalInbox, request_id: str) -> None:
    with sqlite3.connect(store.path) as connection:
        connection.execute(
            "UPDATE approval_requests SET requester = '[]' WHERE request_id = ?", (request_id,)
        )
    connection.close()


def test_list_names_a_damaged_request_and_lists_the_others(store: SQLiteApprovalInbox) -> None:
    readable = store.file(_request("make one"))
    damaged = store.file(_request("make two"))
    _damage(store, damaged.request_id)
    for arguments in (["list"], ["list", "--all"], ["list", "--json"]):
        listed = CliRunner().invoke(
            main, ["approvals", *arguments, "--store", str(store.path)], catch_exceptions=False
        )
        assert listed.exit_code == 0, listed.output
        assert readable.request_id[:12] in listed.stdout
        assert damaged.request_id not in listed.stdout  # stdout holds the readable ones
        assert f"holds a damaged request {damaged.request_id}" in listed.stderr
        assert "it is left out of this list" in listed.stderr
        assert f"jevqueue approvals purge {damaged.request_id}" in listed.stderr
    assert json.loads(cli(store, "list", "--json").stdout)[0]["request_id"] == (readable.request_id)
    shown = cli(store, "show", damaged.request_id[:8])
    assert shown.exit_code == 2 and "requester is not a JSON object" in shown.output


def test_purge_removes_a_damaged_request_and_refuses_a_readable_one(
    store: SQLiteApprovalInbox,
) -> None:
    readable = store.file(_request("make one"))
    damaged = store.file(_request("make two"))
    _damage(store, damaged.request_id)
    refused = cli(store, "purge", readable.request_id[:8])
    assert refused.exit_code == 2 and "is not damaged" in refused.output
    assert "let it expire" in refused.output
    unknown = cli(store, "purge", "0" * 32)
    assert unknown.exit_code == 2 and "no approval request" in unknown.output
    done = cli(store, "purge", damaged.request_id[:8])
    assert done.exit_code == 0, done.output
    assert f"removed the damaged request {damaged.request_id}" in done.output
    listed = cli(store, "list", "--all")
    assert "damaged" not in listed.output and readable.request_id[:12] in listed.output
    assert cli(store, "purge", damaged.request_id).exit_code == 2  # gone


def test_prune_removes_old_settled_requests(store: SQLiteApprovalInbox) -> None:
    old = store.file(_request("make old"))
    store.deny(old.request_id, "bob", "no")
    waiting = store.file(_request("make waiting"))
    recent = store.file(_request("make recent"))
    store.deny(recent.request_id, "bob", "no")
    with sqlite3.connect(store.path) as connection:
        connection.execute(
            "UPDATE approval_requests SET created_at = '2001-01-01T00:00:00.000000Z' "
            "WHERE request_id IN (?, ?)",
            (old.request_id, waiting.request_id),
        )
    connection.close()
    pruned = cli(store, "prune", "--older-than", "30d")
    assert pruned.exit_code == 0, pruned.output
    assert "removed 1 request filed more than 30d ago" in pruned.output
    kept = {request.request_id for request in store.requests(None)}
    assert kept == {waiting.request_id, recent.request_id}
    assert "removed 0 requests" in cli(store, "prune", "--older-than", "1H").output


@pytest.mark.parametrize(
    ("age", "complaint"),
    [
        ("30", "give a whole number of days or hours"),
        ("30m", "give a whole number of days or hours"),
        ("1.5d", "give a whole number of days or hours"),
        ("0h", "keep settled requests at least 1:00:00"),
    ],
)
def test_prune_refuses_an_age_it_cannot_read_or_too_short(
    store: SQLiteApprovalInbox, age: str, complaint: str
) -> None:
    store.deny(store.file(_request()).request_id, "bob", "no")
    result = cli(store, "prune", "--older-than", age)
    assert result.exit_code == 2 and complaint in result.output, result.output
    assert "Traceback" not in result.output
    assert len(store.requests(None)) == 1
    missing = cli(store, "prune")
    assert missing.exit_code == 2 and "--older-than" in missing.output


# --- which inbox --------------------------------------------------------------------------------


def test_a_missing_inbox_is_named_and_never_created(tmp_path: Path) -> None:
    missing = tmp_path / "elsewhere" / "inbox.sqlite3"
    for arguments in (
        ["list"],
        ["show", "3f9a"],
        ["watch"],
        ["deny", "3f9a", "--reason", "no", "--reviewer", "bob"],
    ):
        result = CliRunner().invoke(main, ["approvals", *arguments, "--store", str(missing)])
        assert result.exit_code == 2, (arguments, result.output)
        assert f"no approval inbox at {str(missing)!r} (--store)" in result.output
        assert "--store PATH" in result.output and "$JEVQUEUE_INBOX" in result.output
        assert "Traceback" not in result.output
    assert not missing.parent.exists()


def test_the_default_inbox_is_not_created_by_reading_it(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["approvals", "list"])
    default = tmp_path / "state" / "approval-inbox.sqlite3"
    assert result.exit_code == 2 and f"no approval inbox at {str(default)!r} (the default)" in (
        result.output
    )
    assert not (tmp_path / "state").exists()
    SQLiteApprovalInbox(default).file(_request())  # an agent files: now it is there
    listed = CliRunner().invoke(main, ["approvals", "list"])
    assert listed.exit_code == 0 and "run_command" in listed.output


def test_jevqueue_inbox_names_the_store_and_store_wins(
    store: SQLiteApprovalInbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    filed = store.file(_request())
    monkeypatch.setenv("JEVQUEUE_INBOX", str(store.path))
    monkeypatch.setenv("JEVQUEUE_DATABASE_URL", "postgresql://nobody@db.invalid/none")
    listed = CliRunner().invoke(main, ["approvals", "list"])
    assert listed.exit_code == 0 and filed.request_id[:12] in listed.output
    monkeypatch.setenv("JEVQUEUE_INBOX", str(tmp_path / "gone.sqlite3"))
    gone = CliRunner().invoke(main, ["approvals", "list"])
    assert gone.exit_code == 2 and "($JEVQUEUE_INBOX)" in gone.output
    chosen = CliRunner().invoke(main, ["approvals", "list", "--store", str(store.path)])
    assert chosen.exit_code == 0 and filed.request_id[:12] in chosen.output


def test_a_sqlite_file_that_is_no_inbox_is_refused_untouched(tmp_path: Path) -> None:
    other = tmp_path / "consumed.sqlite3"
    with sqlite3.connect(other) as connection:
        connection.execute("CREATE TABLE consumed (digest TEXT)")
    connection.close()
    result = CliRunner().invoke(main, ["approvals", "list", "--store", str(other)])
    assert result.exit_code == 2 and "not an approval inbox" in result.output
    with sqlite3.connect(other) as connection:
        tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master")}
    connection.close()
    assert tables == {"consumed"}


@pytest.mark.network_allowed  # the PostgreSQL server listens on 127.0.0.1
def test_the_fleet_database_is_the_inbox_when_jevqueue_database_url_is_set(
    postgres_schema: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from jevqueue.approvals import PostgresApprovalInbox

    url, schema = postgres_schema
    with PostgresApprovalInbox(url, schema=schema) as fleet:
        filed = fleet.file(_request())
    monkeypatch.setenv("JEVQUEUE_DATABASE_URL", url)
    listed = CliRunner().invoke(main, ["approvals", "list", "--schema", schema])
    assert listed.exit_code == 0, listed.output
    assert filed.request_id[:12] in listed.output
    shown = CliRunner().invoke(main, ["approvals", "show", filed.request_id, "--schema", schema])
    assert shown.exit_code == 0 and filed.action_digest in shown.output
    assert not (tmp_path / "state").exists()  # no local inbox appeared beside it


@pytest.mark.network_allowed  # it connects to a port on 127.0.0.1 where nothing listens
@pytest.mark.parametrize("form", ["url", "key=value"])
def test_an_unreachable_fleet_database_says_it_came_from_the_environment(
    form: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("psycopg", reason='the PostgreSQL store needs "jevqueue[postgres]"')
    with socket.socket() as probe:  # a port that was free a moment ago
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = (
        f"postgresql://nobody:s3cret@127.0.0.1:{port}/none"
        if form == "url"
        else f"host=127.0.0.1 port={port} dbname=none user=nobody password=s3cret"
    )
    monkeypatch.setenv("JEVQUEUE_DATABASE_URL", url)
    result = CliRunner().invoke(main, ["approvals", "list"])
    assert result.exit_code == 2, result.output
    assert "$JEVQUEUE_DATABASE_URL" in result.output and "--store PATH" in result.output
    assert "s3cret" not in result.output and "Traceback" not in result.output
    assert not (tmp_path / "state").exists()  # it never fell back to a local inbox
