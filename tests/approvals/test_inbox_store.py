"""One conformance suite for the approval inbox's stores: SQLite and PostgreSQL.

Every rule is the store's, not the caller's: the same tests run against both, and the
races run in real processes, each with its own connection.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import sqlite3
import stat
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from jevqueue.approvals import (
    ApprovalAuthority,
    ApprovalInbox,
    InboxState,
    Requester,
    SQLiteApprovalInbox,
)
from jevqueue.errors import (
    ConfigurationError,
    DecisionRefusedError,
    DigestMismatchError,
    DuplicateDecisionError,
    InboxCorruptionError,
    InboxError,
    NotAnApproverError,
    RequestClosedError,
    SelfApprovalError,
    UnknownRequestError,
)
from jevqueue.policy import Action, ApprovalQuorum, ApprovalRequest, Verdict, generic_registry

pytestmark = pytest.mark.network_allowed  # the PostgreSQL server listens on 127.0.0.1


@dataclass
class Store:
    kind: str
    target: str
    schema: str
    open: Callable[[], ApprovalInbox]
    corrupt: Callable[[str, str], None]


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    opened: list[ApprovalInbox] = []
    if request.param == "sqlite":
        path = tmp_path / "inbox.sqlite3"

        def open_sqlite() -> ApprovalInbox:
            opened.append(SQLiteApprovalInbox(path))
            return opened[-1]

        def corrupt_sqlite(statement: str, request_id: str) -> None:
            with sqlite3.connect(path) as connection:
                connection.execute(statement.format(t=""), (request_id,))

        yield Store("sqlite", str(path), "", open_sqlite, corrupt_sqlite)
    else:
        url, schema = request.getfixturevalue("postgres_schema")
        from jevqueue.approvals import PostgresApprovalInbox

        def open_postgres() -> ApprovalInbox:
            opened.append(PostgresApprovalInbox(url, schema=schema))
            return opened[-1]

        def corrupt_postgres(statement: str, request_id: str) -> None:
            import psycopg

            with psycopg.connect(url, autocommit=True) as admin:
                # the damage a reader must survive is past the table's own CHECK, too
                admin.execute(
                    f'ALTER TABLE "{schema}".approval_requests '
                    "DROP CONSTRAINT IF EXISTS approval_requests_document_agrees"
                )
                admin.execute(statement.format(t=f'"{schema}".').replace("?", "%s"), (request_id,))

        yield Store("postgresql", url, schema, open_postgres, corrupt_postgres)
    for each in opened:
        each.close()


CONTEXT = {
    "task_id": "task-42",
    "actor_id": "coding-agent",
    "workspace": "/workspace/project",
    "git_sha": "0123456789abcdef0123456789abcdef01234567",
}


def _request(
    command: str = "make deploy", *, quorum: ApprovalQuorum | None = None
) -> ApprovalRequest:
    action = Action.build(
        generic_registry(),
        "run_command",
        {"CommandLine": command, "Cwd": "/workspace/project"},
        CONTEXT,
    )
    verdict = Verdict.allow_with_obligations(["explicit_approval"], "needs a person", quorum=quorum)
    return ApprovalRequest.of(action, verdict.bound(action.digest, ""), call_id="call-1")


def _reviewer(name: str) -> ApprovalAuthority:
    return ApprovalAuthority(Ed25519PrivateKey.generate(), name)


ALICE, BOB, CAROL, DAVE = (_reviewer(name) for name in ("alice", "bob", "carol", "dave"))
TWO = ApprovalQuorum(2)  # two distinct reviewers, anyone
OPS = ApprovalQuorum.of_group("ops", ["alice", "bob", "carol"], 2)


def test_a_filed_request_is_pending_with_everything_a_reviewer_reads(store: Store) -> None:
    inbox = store.open()
    asked = _request()
    filed = inbox.file(asked, expires_in=timedelta(minutes=5))
    assert filed.state is InboxState.PENDING and filed.decisions == ()
    assert len(filed.request_id) == 32 and int(filed.request_id, 16) >= 0
    assert (filed.tool, filed.action_digest, filed.required) == (
        "run_command",
        asked.action_digest,
        1,
    )
    assert filed.request["arguments"] == {"CommandLine": "make deploy", "Cwd": "/workspace/project"}
    assert filed.request["context"]["actor_id"] == "coding-agent"
    assert filed.requester.actor_id == "coding-agent" and filed.requester.task_id == "task-42"
    assert filed.requester.call_id == "call-1" and filed.requester.process_id is not None
    assert timedelta(minutes=4) < filed.expires_at - filed.created_at <= timedelta(minutes=5)
    again = store.open()  # another connection reads the same
    assert again.get(filed.request_id).to_dict() == filed.to_dict()
    assert again.find(filed.request_id[:8]).request_id == filed.request_id


def test_requests_list_newest_first_and_by_state(store: Store) -> None:
    inbox = store.open()
    first = inbox.file(_request("make one"))
    second = inbox.file(_request("make two"))
    denied = inbox.file(_request("make three"))
    inbox.deny(denied.request_id, "bob", "not today")
    assert [r.request_id for r in inbox.requests()] == [second.request_id, first.request_id]
    assert [r.request_id for r in inbox.requests(["denied"])] == [denied.request_id]
    assert len(inbox.requests(None)) == 3 and len(inbox.requests(None, limit=1)) == 1


def test_one_approval_approves_and_carries_the_signed_record(store: Store) -> None:
    inbox = store.open()
    filed = inbox.file(_request())
    record = ALICE.issue(filed.action_digest)
    decided = inbox.approve(filed.request_id, record, reason="looks right")
    assert decided.state is InboxState.APPROVED and decided.decided_at is not None
    assert decided.records == (record,)
    (decision,) = decided.decisions
    assert (decision.reviewer, decision.approve, decision.reason) == ("alice", True, "looks right")
    with pytest.raises(RequestClosedError, match="already approved") as closed:
        inbox.approve(filed.request_id, BOB.issue(filed.action_digest))
    assert closed.value.state == "approved"


def test_a_denial_ends_the_request_with_its_reason(store: Store) -> None:
    inbox = store.open()
    filed = inbox.file(_request())
    decided = inbox.deny(filed.request_id, "bob", "  deploys wait   for Monday ")
    assert decided.state is InboxState.DENIED
    assert decided.denial is not None and decided.denial.reason == "deploys wait for Monday"
    with pytest.raises(RequestClosedError, match="already denied"):
        inbox.approve(filed.request_id, ALICE.issue(filed.action_digest))
    with pytest.raises(ConfigurationError, match="needs a reason"):
        inbox.deny(inbox.file(_request()).request_id, "bob", "   ")


def test_a_request_past_its_expiry_reads_expired_and_takes_no_decision(store: Store) -> None:
    inbox = store.open()
    filed = inbox.file(_request(), expires_in=timedelta(milliseconds=300))
    time.sleep(0.5)
    assert inbox.get(filed.request_id).state is InboxState.EXPIRED
    assert [r.request_id for r in inbox.requests(["expired"])] == [filed.request_id]
    assert inbox.requests() == []
    with pytest.raises(RequestClosedError, match="expired before anybody decided") as closed:
        inbox.approve(filed.request_id, ALICE.issue(filed.action_digest))
    assert closed.value.state == "expired"
    with pytest.raises(RequestClosedError):
        inbox.deny(filed.request_id, "bob", "too late")
    assert inbox.cancel(filed.request_id).state is InboxState.EXPIRED  # stays expired
    assert inbox.get(filed.request_id).decisions == ()


def test_the_requester_never_approves_its_own_request(store: Store) -> None:
    inbox = store.open()
    filed = inbox.file(_request())
    itself = _reviewer("coding-agent")  # the context's actor, with a key of its own
    with pytest.raises(SelfApprovalError, match="never approves itself"):
        inbox.approve(filed.request_id, itself.issue(filed.action_digest))
    assert inbox.get(filed.request_id).state is InboxState.PENDING
    assert inbox.get(filed.request_id).decisions == ()


def test_a_requester_other_than_the_context_s_actor_is_refused(store: Store) -> None:
    with pytest.raises(ConfigurationError, match="must be the same"):
        store.open().file(_request(), requester=Requester(actor_id="someone-else"))


def test_each_reviewer_decides_once(store: Store) -> None:
    inbox = store.open()
    filed = inbox.file(_request(quorum=TWO))
    inbox.approve(filed.request_id, ALICE.issue(filed.action_digest))
    with pytest.raises(DuplicateDecisionError, match="alice already decided"):
        inbox.approve(filed.request_id, ALICE.issue(filed.action_digest))
    with pytest.raises(DuplicateDecisionError):
        inbox.deny(filed.request_id, "alice", "changed my mind")
    current = inbox.get(filed.request_id)
    assert current.state is InboxState.PENDING and len(current.decisions) == 1


def test_two_distinct_reviewers_approve_a_request_that_requires_two(store: Store) -> None:
    inbox = store.open()
    filed = inbox.file(_request(quorum=TWO))
    after_one = inbox.approve(filed.request_id, ALICE.issue(filed.action_digest))
    assert after_one.state is InboxState.PENDING and after_one.decided_at is None
    after_two = inbox.approve(filed.request_id, BOB.issue(filed.action_digest))
    assert after_two.state is InboxState.APPROVED
    assert [r.approver_id for r in after_two.records] == ["alice", "bob"]


def test_two_of_a_group_of_three_need_two_distinct_members(store: Store) -> None:
    inbox = store.open()
    filed = inbox.file(_request(quorum=OPS))
    assert filed.quorums == (OPS,) and filed.required == 2
    assert filed.needs() == "2 approvals from ops (alice, bob, carol)"
    assert filed.to_dict()["quorums"] == [
        {"count": 2, "group": "ops", "approvers": ["alice", "bob", "carol"]}
    ]
    assert inbox.approve(filed.request_id, ALICE.issue(filed.action_digest)).state is (
        InboxState.PENDING
    )
    with pytest.raises(DuplicateDecisionError):  # the same member twice is still one
        inbox.approve(filed.request_id, ALICE.issue(filed.action_digest))
    assert inbox.get(filed.request_id).state is InboxState.PENDING
    settled = inbox.approve(filed.request_id, CAROL.issue(filed.action_digest))
    assert settled.state is InboxState.APPROVED
    assert [r.approver_id for r in settled.records] == ["alice", "carol"]


def test_a_reviewer_outside_the_group_cannot_approve(store: Store) -> None:
    inbox = store.open()
    filed = inbox.file(_request(quorum=OPS))
    with pytest.raises(NotAnApproverError, match=r"dave may not approve") as refused:
        inbox.approve(filed.request_id, DAVE.issue(filed.action_digest))
    assert "2 approvals from ops (alice, bob, carol)" in str(refused.value)
    assert refused.value.request_id == filed.request_id
    assert inbox.get(filed.request_id).decisions == ()
    inbox.approve(filed.request_id, ALICE.issue(filed.action_digest))
    with pytest.raises(NotAnApproverError):  # an outsider never completes the quorum
        inbox.approve(filed.request_id, DAVE.issue(filed.action_digest))
    assert inbox.get(filed.request_id).state is InboxState.PENDING
    # a denial is anyone's to give
    assert inbox.deny(filed.request_id, "dave", "not now").state is InboxState.DENIED


def test_every_quorum_must_be_met(store: Store) -> None:
    security = ApprovalQuorum.of_group("security", ["dave", "erin"], 1)
    action = _request().action
    verdict = Verdict.allow_with_obligations(
        ["explicit_approval"], "two groups", quorum=(OPS, security)
    ).bound(action.digest, "")
    inbox = store.open()
    filed = inbox.file(ApprovalRequest.of(action, verdict))
    assert filed.quorums == (OPS, security)
    for reviewer in (ALICE, BOB):
        assert inbox.approve(filed.request_id, reviewer.issue(filed.action_digest)).state is (
            InboxState.PENDING
        )
    final = inbox.approve(filed.request_id, DAVE.issue(filed.action_digest))
    assert final.state is InboxState.APPROVED


def test_one_denial_among_required_approvals_denies(store: Store) -> None:
    inbox = store.open()
    filed = inbox.file(_request(quorum=TWO))
    inbox.approve(filed.request_id, ALICE.issue(filed.action_digest))
    assert inbox.deny(filed.request_id, "bob", "no").state is InboxState.DENIED


def test_an_approval_of_another_action_is_refused(store: Store) -> None:
    inbox = store.open()
    filed = inbox.file(_request("make deploy"))
    other = _request("make clean").action_digest
    with pytest.raises(DigestMismatchError, match="exactly that digest"):
        inbox.approve(filed.request_id, ALICE.issue(other))
    assert inbox.get(filed.request_id).decisions == ()


def test_an_unsigned_record_is_not_an_approval(store: Store) -> None:
    from jevqueue.approvals import ApprovalRecord

    inbox = store.open()
    filed = inbox.file(_request())
    signed = ALICE.issue(filed.action_digest)
    unsigned = ApprovalRecord(**{**signed.to_dict(), "signature": None})
    with pytest.raises(ConfigurationError, match="signed ApprovalRecord"):
        inbox.approve(filed.request_id, unsigned)


def test_a_cancelled_request_takes_no_decision(store: Store) -> None:
    inbox = store.open()
    filed = inbox.file(_request())
    assert inbox.cancel(filed.request_id).state is InboxState.CANCELLED
    with pytest.raises(RequestClosedError, match="already cancelled"):
        inbox.approve(filed.request_id, ALICE.issue(filed.action_digest))


def test_unknown_and_ambiguous_ids_are_clear_errors(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    import jevqueue.approvals._inbox as inbox_module

    inbox = store.open()
    with pytest.raises(UnknownRequestError, match="no approval request"):
        inbox.get("0" * 32)
    with pytest.raises(UnknownRequestError, match="not a request id"):
        inbox.get("nope")
    with pytest.raises(UnknownRequestError, match="at least its first 4"):
        inbox.find("ab")
    ids = iter(["abcd" + "1" * 28, "abcd" + "2" * 28])
    monkeypatch.setattr(inbox_module.secrets, "token_hex", lambda _: next(ids))
    inbox.file(_request("make one"))
    inbox.file(_request("make two"))
    monkeypatch.undo()
    with pytest.raises(UnknownRequestError, match="several request ids"):
        inbox.find("abcd")
    assert inbox.find("ABCD2").request_id == "abcd" + "2" * 28
    with pytest.raises(UnknownRequestError, match="no approval request"):
        inbox.approve("f" * 32, ALICE.issue(_request().action_digest))


@pytest.mark.parametrize(
    ("statement", "complaint"),
    [
        (
            "UPDATE {t}approval_requests SET request = '{{\"tool\": 1}}' WHERE request_id = ?",
            "differ from the request",
        ),
        (
            "UPDATE {t}approval_requests SET requester = '[]' WHERE request_id = ?",
            "requester is not a JSON object",
        ),
        (
            "UPDATE {t}approval_decisions SET record = '{{\"approval_id\": 1}}' "
            "WHERE request_id = ?",
            "approval record",
        ),
        (
            "UPDATE {t}approval_decisions SET reviewer = 'mallory' WHERE request_id = ?",
            "is signed as alice",
        ),
    ],
    ids=["request", "requester", "record", "reviewer"],
)
def test_a_damaged_row_reads_as_a_typed_error(store: Store, statement: str, complaint: str) -> None:
    inbox = store.open()
    filed = inbox.file(_request(quorum=TWO))
    inbox.approve(filed.request_id, ALICE.issue(filed.action_digest))
    store.corrupt(statement, filed.request_id)
    with pytest.raises(InboxCorruptionError, match=complaint) as damaged:
        inbox.get(filed.request_id)
    assert damaged.value.request_id == filed.request_id
    assert "not read as a decision" in str(damaged.value)
    with pytest.raises(InboxCorruptionError, match=complaint):
        inbox.find(filed.request_id[:8])
    with pytest.raises(InboxCorruptionError, match=complaint):
        inbox.approve(filed.request_id, BOB.issue(filed.action_digest))


SQLITE_ONLY = pytest.mark.parametrize("store", ["sqlite"], indirect=True)
"""Purging a damaged request from the library: the PostgreSQL store leaves that to the
schema's owner (docs/deployment.md), and says so."""


def _stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _backdate(store: Store, request_id: str, created: str, expires: str) -> None:
    store.corrupt(
        f"UPDATE {{t}}approval_requests SET created_at = '{created}', expires_at = '{expires}' "
        "WHERE request_id = ?",
        request_id,
    )


def test_a_damaged_request_is_left_out_of_listings_and_named(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    inbox = store.open()
    older, damaged, newer = (inbox.file(_request(f"make {n}")) for n in ("a", "b", "c"))
    store.corrupt(
        "UPDATE {t}approval_requests SET requester = '[]' WHERE request_id = ?",
        damaged.request_id,
    )
    with caplog.at_level(logging.WARNING, logger="jevqueue.approvals"):
        listed = inbox.requests()
        assert [r.request_id for r in listed] == [newer.request_id, older.request_id]
        assert len(inbox.requests(None)) == 2  # every state: still only the readable ones
    warnings = [r.getMessage() for r in caplog.records if r.name == "jevqueue.approvals"]
    assert len(warnings) == 1  # one warning per damaged request, however often it is read
    assert damaged.request_id in warnings[0]
    assert f"jevqueue approvals purge {damaged.request_id}" in warnings[0]
    listing = inbox.listing()
    assert [r.request_id for r in listing.requests] == [newer.request_id, older.request_id]
    assert [error.request_id for error in listing.damaged] == [damaged.request_id]
    assert "requester is not a JSON object" in str(listing.damaged[0])
    # an agent waiting on it, or a reviewer opening it, is told it is damaged
    with pytest.raises(InboxCorruptionError, match="requester is not a JSON object"):
        inbox.get(damaged.request_id)


@SQLITE_ONLY
def test_purge_removes_a_damaged_request_and_nothing_readable(store: Store) -> None:
    inbox = store.open()
    readable = inbox.file(_request("make a"))
    damaged = inbox.file(_request("make b", quorum=TWO))
    inbox.approve(damaged.request_id, ALICE.issue(damaged.action_digest))
    store.corrupt(
        "UPDATE {t}approval_decisions SET reviewer = 'mallory' WHERE request_id = ?",
        damaged.request_id,
    )
    with pytest.raises(ConfigurationError, match="is not damaged"):
        inbox.purge(readable.request_id)
    assert inbox.get(readable.request_id).state is InboxState.PENDING
    with pytest.raises(UnknownRequestError):
        inbox.purge("0" * 32)
    inbox.purge(damaged.request_id)
    with pytest.raises(UnknownRequestError):
        inbox.get(damaged.request_id)
    assert inbox.listing(None).damaged == ()
    assert [r.request_id for r in inbox.requests(None)] == [readable.request_id]


def test_prune_deletes_old_settled_requests_and_keeps_pending_and_recent_ones(
    store: Store,
) -> None:
    inbox = store.open()
    approved, denied, cancelled, expired, waiting, recent = (
        inbox.file(_request(f"make {n}")) for n in range(6)
    )
    inbox.approve(approved.request_id, ALICE.issue(approved.action_digest))
    inbox.deny(denied.request_id, "bob", "no")
    inbox.cancel(cancelled.request_id)
    inbox.deny(recent.request_id, "bob", "not yet")
    long_ago, soon_after = "2001-01-01T00:00:00.000000Z", "2001-01-01T00:04:00.000000Z"
    for old in (approved, denied, cancelled, expired):
        _backdate(store, old.request_id, long_ago, soon_after)
    # filed two hours ago and pending for another hour: still pending, so kept
    now = datetime.now(timezone.utc)
    _backdate(
        store,
        waiting.request_id,
        _stamp(now - timedelta(hours=2)),
        _stamp(now + timedelta(hours=1)),
    )
    assert inbox.get(expired.request_id).state is InboxState.EXPIRED
    with pytest.raises(ConfigurationError, match="at least 1:00:00"):
        inbox.prune(timedelta(minutes=59))
    assert inbox.prune(timedelta(days=30)) == 4
    for gone in (approved, denied, cancelled, expired):
        with pytest.raises(UnknownRequestError):
            inbox.get(gone.request_id)
    assert inbox.get(waiting.request_id).state is InboxState.PENDING
    assert inbox.get(recent.request_id).state is InboxState.DENIED
    assert inbox.prune(timedelta(hours=1)) == 0  # the recent one was filed a moment ago


def test_prune_refuses_a_retention_under_an_hour(tmp_path: Path) -> None:
    inbox = SQLiteApprovalInbox(tmp_path / "inbox.sqlite3")
    for short in (timedelta(0), timedelta(minutes=59, seconds=59), 3600):
        with pytest.raises(ConfigurationError, match="keep settled requests at least"):
            inbox.prune(short)  # type: ignore[arg-type]


def test_pruning_sqlite_deletes_the_decisions_too(tmp_path: Path) -> None:
    path = tmp_path / "inbox.sqlite3"
    inbox = SQLiteApprovalInbox(path)
    filed = inbox.file(_request())
    inbox.approve(filed.request_id, ALICE.issue(filed.action_digest))
    with sqlite3.connect(path) as connection:
        connection.execute(
            "UPDATE approval_requests SET created_at = '2001-01-01T00:00:00.000000Z', "
            "expires_at = '2001-01-01T00:04:00.000000Z'"
        )
    connection.close()
    assert inbox.prune(timedelta(days=1)) == 1
    with sqlite3.connect(path) as connection:
        left = connection.execute("SELECT count(*) FROM approval_decisions").fetchone()[0]
    connection.close()
    assert left == 0


def test_a_new_sqlite_inbox_is_readable_by_its_owner_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    previous = os.umask(0o022)
    try:
        path = tmp_path / "state" / "inbox.sqlite3"
        inbox = SQLiteApprovalInbox(path)
        inbox.file(_request())  # the write-ahead log and its index now exist
        for each in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
            assert each.exists(), each
            assert stat.S_IMODE(each.stat().st_mode) == 0o600, each
        inbox.close()
        shared = tmp_path / "shared.sqlite3"
        shared.touch()
        shared.chmod(0o660)  # an operator's group-shared inbox keeps its mode
        SQLiteApprovalInbox(shared).file(_request())
        assert stat.S_IMODE(shared.stat().st_mode) == 0o660
    finally:
        os.umask(previous)


def test_a_listing_reads_by_state_with_a_limit_in_two_statements(tmp_path: Path) -> None:
    inbox = SQLiteApprovalInbox(tmp_path / "inbox.sqlite3")
    filed = [inbox.file(_request(f"make {n}", quorum=TWO)) for n in range(12)]
    for request in filed[::2]:  # every other one denied
        inbox.approve(request.request_id, ALICE.issue(request.action_digest))
        inbox.deny(request.request_id, "bob", "no")
    inbox.approve(filed[1].request_id, ALICE.issue(filed[1].action_digest))
    statements: list[str] = []
    inbox._connection.set_trace_callback(statements.append)
    pending = inbox.requests(limit=3)
    inbox._connection.set_trace_callback(None)
    assert [r.request_id for r in pending] == [f.request_id for f in filed[11:6:-2]]
    reads = [each for each in statements if each.lstrip().upper().startswith("SELECT")]
    assert len(reads) == 2, statements  # the requests, then all their decisions at once
    denied = inbox.requests(["denied"], limit=2)
    assert [r.request_id for r in denied] == [filed[10].request_id, filed[8].request_id]
    assert all(len(r.decisions) == 2 for r in denied)
    (one,) = [r for r in inbox.requests(limit=100) if r.request_id == filed[1].request_id]
    assert [d.reviewer for d in one.decisions] == ["alice"]
    with sqlite3.connect(tmp_path / "inbox.sqlite3") as connection:
        plan = " ".join(
            str(row)
            for row in connection.execute(
                "EXPLAIN QUERY PLAN SELECT request_id FROM approval_requests "
                "WHERE state IN ('denied') ORDER BY created_at DESC LIMIT 2"
            )
        )
    connection.close()
    assert "approval_requests_state_created_at" in plan
    with pytest.raises(ConfigurationError, match="not a request state"):
        inbox.requests(["bogus"])


def test_a_request_can_be_filed_under_an_id_its_filer_chose(store: Store) -> None:
    inbox = store.open()
    chosen = "0123456789abcdef" * 2
    filed = inbox.file(_request(), request_id=chosen)
    assert filed.request_id == chosen and inbox.get(chosen).state is InboxState.PENDING
    for malformed in ("ABCDEF" * 6, "0123", 42, "g" * 32):
        with pytest.raises(ConfigurationError, match="is not a request id"):
            inbox.file(_request(), request_id=malformed)  # type: ignore[arg-type]


def test_filing_sqlite_under_an_id_already_filed_is_refused(tmp_path: Path) -> None:
    inbox = SQLiteApprovalInbox(tmp_path / "inbox.sqlite3")
    first = inbox.file(_request("make one"))
    with pytest.raises(InboxError, match="could not file the request"):
        inbox.file(_request("make two"), request_id=first.request_id)
    assert inbox.get(first.request_id).request["arguments"]["CommandLine"] == "make one"


@pytest.mark.parametrize(
    "field", ["task_id", "framework", "session_id", "call_id", "host", "actor_id"]
)
@pytest.mark.parametrize("character", ["\x1b", "\x9b", "\u202e", "\u2066", "\n", "\x00"])
def test_a_requester_with_control_characters_is_refused(field: str, character: str) -> None:
    fields = {"actor_id": "coding-agent", field: f"run{character}1"}
    with pytest.raises(ConfigurationError, match="control character"):
        Requester(**fields)  # type: ignore[arg-type]


def test_decision_reasons_with_control_characters_are_refused(store: Store) -> None:
    inbox = store.open()
    filed = inbox.file(_request())
    for hostile in ("no\x1b[2J", "no \u202e thanks", "no\x9b1A", "\u2069no"):
        with pytest.raises(ConfigurationError, match="control character"):
            inbox.deny(filed.request_id, "bob", hostile)
        with pytest.raises(ConfigurationError, match="control character"):
            inbox.approve(filed.request_id, ALICE.issue(filed.action_digest), reason=hostile)
    assert inbox.get(filed.request_id).decisions == ()
    # line breaks and tabs are folded into spaces, as before
    denied = inbox.deny(filed.request_id, "bob", "not\non\tFriday")
    assert denied.denial is not None and denied.denial.reason == "not on Friday"


def test_a_reader_never_sees_a_request_half_decided(store: Store) -> None:
    """A read is one snapshot: never the request still pending beside the decision that
    settled it, whatever another connection commits in between."""
    inbox, reviewer = store.open(), store.open()
    filed = [inbox.file(_request(f"make step-{n}")) for n in range(200)]
    current = [filed[0].request_id]  # the request being approved right now
    done = threading.Event()
    damaged: list[InboxCorruptionError] = []

    def read_until_done() -> None:
        while not done.is_set():
            try:
                inbox.get(current[0])
            except InboxCorruptionError as error:
                damaged.append(error)
                return

    reader = threading.Thread(target=read_until_done)
    reader.start()
    try:
        for request in filed:
            current[0] = request.request_id
            reviewer.approve(request.request_id, ALICE.issue(request.action_digest))
    finally:
        done.set()
        reader.join(timeout=30)
    assert not reader.is_alive()
    assert damaged == []


def test_a_request_stores_what_its_digest_covers(store: Store) -> None:
    asked = _request()
    filed = store.open().file(asked)
    covered = filed.request["digest_document"]
    assert covered == json.loads(json.dumps(asked.action.digest_document()))
    assert covered["cwd"] == "/workspace/project" and covered["side_effects"] == ["shell_command"]


@pytest.mark.parametrize(
    ("path", "value", "complaint"),
    [
        (["digest_document", "arguments", "CommandLine"], "make clean", "hashes to another"),
        (["arguments", "CommandLine"], "make clean", "arguments differ from what"),
        (["digest_document", "targets"], ["/etc/passwd"], "hashes to another"),
    ],
    ids=["covered", "shown", "targets"],
)
def test_a_request_whose_digest_is_not_of_what_it_shows_is_never_approved(
    store: Store, path: list[str], value: object, complaint: str
) -> None:
    """A reviewer signs only a digest recomputed from what the request shows."""
    inbox = store.open()
    filed = inbox.file(_request())
    if store.kind == "sqlite":
        statement = (
            "UPDATE approval_requests SET request = json_set(request, "
            f"'$.{'.'.join(path)}', json('{json.dumps(value)}')) WHERE request_id = ?"
        )
    else:
        statement = (
            "UPDATE {t}approval_requests SET request = jsonb_set(request, "
            f"'{{{{{','.join(path)}}}}}', '{json.dumps(value)}') WHERE request_id = ?"
        )
    store.corrupt(statement, filed.request_id)
    with pytest.raises(InboxCorruptionError, match=complaint):
        inbox.get(filed.request_id)
    with pytest.raises(InboxCorruptionError, match=complaint):
        inbox.approve(filed.request_id, ALICE.issue(filed.action_digest))
    stored = json.dumps(dict(filed.request)).replace("{", "{{").replace("}", "}}")
    restore = f"UPDATE {{t}}approval_requests SET request = '{stored}'"
    store.corrupt(restore + " WHERE request_id = ?", filed.request_id)
    assert inbox.get(filed.request_id).decisions == ()  # nothing was recorded


_REVIEWER = textwrap.dedent(
    """
    import json, sys
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from jevqueue.approvals import ApprovalAuthority, open_inbox
    from jevqueue.errors import DecisionRefusedError
    target, schema, request_id, digest, reviewer = sys.argv[1:6]
    inbox = open_inbox(target, schema=schema or "jevqueue")
    record = ApprovalAuthority(Ed25519PrivateKey.generate(), reviewer).issue(digest)
    inbox.get(request_id)  # the connection is open and the request read
    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":  # decide together, or not at all
        sys.exit("no go from the test")
    try:
        state = inbox.approve(request_id, record).state.value
    except DecisionRefusedError as refused:
        state = type(refused).__name__
    print(json.dumps(state))
    """
)


def _lines(child: subprocess.Popen[str]) -> queue.Queue[str | None]:
    """The child's output lines as they come (None at its end), read in a thread so that
    every wait for one has a deadline."""
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        assert child.stdout is not None
        for line in child.stdout:
            lines.put(line.strip())
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    return lines


def _next_line(lines: queue.Queue[str | None], deadline: float, who: str) -> str:
    try:
        line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
    except queue.Empty:
        raise AssertionError(f"reviewer {who} said nothing before the deadline") from None
    assert line is not None, f"reviewer {who} exited before saying anything more"
    return line


def _race(store: Store, request_id: str, digest: str, reviewers: list[str]) -> list[str]:
    children = [
        subprocess.Popen(
            [sys.executable, "-c", _REVIEWER, store.target, store.schema, request_id, digest, who],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for who in reviewers
    ]
    try:
        outputs = [_lines(child) for child in children]
        deadline = time.monotonic() + 60
        # every child has its connection open and has read the request before "go"
        for who, lines in zip(reviewers, outputs, strict=True):
            assert _next_line(lines, deadline, who) == "ready"
        for child in children:
            assert child.stdin is not None
            child.stdin.write("go\n")
            child.stdin.flush()
        deadline = time.monotonic() + 120
        outcomes = [
            json.loads(_next_line(lines, deadline, who))
            for who, lines in zip(reviewers, outputs, strict=True)
        ]
        for child in children:
            child.wait(timeout=max(0.0, deadline - time.monotonic()))
        assert all(child.returncode == 0 for child in children)
        return outcomes
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait(timeout=30)
            for stream in (child.stdin, child.stdout):
                if stream is not None:
                    stream.close()


def test_reviewers_deciding_at_once_in_processes_are_judged_one_after_the_other(
    store: Store,
) -> None:
    inbox = store.open()
    filed = inbox.file(_request(quorum=TWO))
    outcomes = _race(store, filed.request_id, filed.action_digest, [f"r{n}" for n in range(5)])
    # exactly the first two approvals count; the request is approved by them, the rest
    # find it closed (a winner reads the request after its decision: the second
    # approval may already have landed)
    refused = [outcome for outcome in outcomes if outcome == "RequestClosedError"]
    won = sorted(outcome for outcome in outcomes if outcome != "RequestClosedError")
    assert len(refused) == 3 and won in (["approved", "pending"], ["approved", "approved"])
    final = inbox.get(filed.request_id)
    assert final.state is InboxState.APPROVED and len(final.decisions) == 2


def test_one_reviewer_deciding_twice_at_once_is_recorded_once(store: Store) -> None:
    inbox = store.open()
    filed = inbox.file(_request(quorum=TWO))
    outcomes = _race(store, filed.request_id, filed.action_digest, ["alice"] * 4)
    assert sorted(outcomes) == ["DuplicateDecisionError"] * 3 + ["pending"]
    assert inbox.get(filed.request_id).state is InboxState.PENDING
    assert len(inbox.get(filed.request_id).decisions) == 1


def test_refusals_are_decision_refused_errors() -> None:
    for error in (SelfApprovalError, DuplicateDecisionError, RequestClosedError):
        assert issubclass(error, DecisionRefusedError)


def test_impossible_settings_are_refused(tmp_path: Path) -> None:
    inbox = SQLiteApprovalInbox(tmp_path / "inbox.sqlite3")
    for settings in ({"expires_in": timedelta(0)}, {"expires_in": timedelta(days=8)}):
        with pytest.raises(ConfigurationError):
            inbox.file(_request(), **settings)
    with pytest.raises(TypeError):
        inbox.file(_request(), required=2)  # type: ignore[call-arg]  # the policy says
    with pytest.raises(ConfigurationError, match="ApprovalRequest"):
        inbox.file({"tool": "run_command"})  # type: ignore[arg-type]
