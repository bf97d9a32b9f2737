"""InboxApprover end to end: a real guard and PEP wait while a reviewer decides on the CLI.

The agent's call blocks in a thread (or an event loop task) on the inbox; the test, as a
reviewer, approves or denies through `jevqueue approvals` with a key file. The PEP trusts
the reviewer's public key only: whatever the inbox holds, the record it returns is checked
like any other (signature, digest, freshness, single use).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from jevqueue.approvals import (
    DEFAULT_EXPIRY,
    DEFAULT_FRESHNESS,
    ApprovalAuthority,
    ApprovalExpiredError,
    InboxApprover,
    InboxRequest,
    InboxState,
    MemoryConsumedApprovals,
    SignedApprovalVerifier,
    SQLiteApprovalInbox,
    generate_key_pair,
    load_private_key,
    load_public_key,
)
from jevqueue.cli import main
from jevqueue.errors import ApprovalDeclinedError, ConfigurationError
from jevqueue.policy import (
    Guard,
    Judgement,
    PolicyEnforcementPoint,
    ToolSpec,
    create_default_policy_decision_point,
)
from jevqueue.testing.recording_audit import RecordingAuditSink

GIT_SHA = "0123456789abcdef0123456789abcdef01234567"
TERMINAL = ToolSpec.declare(
    "terminal", side_effects={"shell_command"}, cwd_field="workdir", required_path_fields=()
)


class Setup:
    """A guard whose approver is the inbox, the reviewer's key, and what ran."""

    def __init__(
        self,
        tmp_path: Path,
        *,
        reviewers: tuple[str, ...] = ("alice",),
        policy: str = "",
        **approver: Any,
    ) -> None:
        self.store = tmp_path / "inbox.sqlite3"
        self.keys = {name: generate_key_pair(tmp_path / f"{name}.key") for name in reviewers}
        self.key = self.keys[reviewers[0]][0]
        self.audit = RecordingAuditSink()
        policy_files = []
        if policy:
            (tmp_path / "acme.toml").write_text(policy)
            policy_files.append(tmp_path / "acme.toml")
        self.consumed = MemoryConsumedApprovals()
        self.pep = pep = PolicyEnforcementPoint(
            create_default_policy_decision_point(policy_files=policy_files),
            audit_logger=self.audit,
            approval_verifier=SignedApprovalVerifier(
                {name: load_public_key(public) for name, (_, public) in self.keys.items()}
            ),
            consumed_approvals=self.consumed,
        )
        workspace = tmp_path / "workspace"
        workspace.mkdir()
        self.approver = InboxApprover(self.store, poll_interval=0.05, framework="tests", **approver)
        self.guard = Guard(
            pep,
            specs=[TERMINAL],
            context={
                "task_id": "task-1",
                "actor_id": "agent",
                "workspace": str(workspace),
                "git_sha": GIT_SHA,
            },
            approver=self.approver,
        )
        self.ran: list[dict[str, Any]] = []
        self.inbox = SQLiteApprovalInbox(self.store)

    def run(self, judgement: Judgement) -> str:
        def execute(arguments: dict[str, Any]) -> str:
            self.ran.append(arguments)
            return "deployed"

        return self.guard.run(judgement, execute)

    def in_thread(self, call_id: str, command: str = "make deploy") -> Callable[[], Judgement]:
        """Start the agent's call in a thread; return a function that joins it."""
        outcome: list[Judgement] = []
        thread = threading.Thread(
            target=lambda: outcome.append(
                self.guard.check("terminal", {"command": command}, call_id)
            )
        )
        thread.start()

        def join() -> Judgement:
            thread.join(timeout=30)
            assert not thread.is_alive(), "the agent's call never returned"
            return outcome[0]

        return join

    def pending_id(self) -> str:
        """The id of the one pending request, once the agent filed it."""
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            pending = self.inbox.requests()
            if pending:
                assert len(pending) == 1
                return pending[0].request_id
            time.sleep(0.02)
        raise AssertionError("the agent never filed its request")

    def cli(self, *arguments: str) -> Any:
        return CliRunner().invoke(
            main, ["approvals", *arguments, "--store", str(self.store)], catch_exceptions=False
        )


async def _filed(setup: Setup) -> InboxRequest:
    """The one pending request, once the agent filed it, without blocking the loop."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        pending = setup.inbox.requests()
        if pending:
            assert len(pending) == 1
            return pending[0]
        await asyncio.sleep(0.01)
    raise AssertionError("the agent never filed its request")


@pytest.fixture
def setup(tmp_path: Path) -> Setup:
    return Setup(tmp_path)


def test_a_call_waits_for_a_reviewer_s_approval_then_runs_once(setup: Setup) -> None:
    join = setup.in_thread("call-1")
    request_id = setup.pending_id()
    shown = setup.cli("show", request_id[:8])
    assert shown.exit_code == 0 and '"command": "make deploy"' in shown.output
    approved = setup.cli("approve", request_id[:8], "--key", str(setup.key), "--reviewer", "alice")
    assert approved.exit_code == 0, approved.output
    assert f"alice decided {request_id}: it is approved" in approved.output
    judgement = join()
    assert judgement.allowed, judgement.message
    assert setup.run(judgement) == "deployed" and setup.run(judgement) == "deployed"
    assert len(setup.ran) == 1  # once, also when the framework runs the call again
    assert any(
        "explicit approval fulfilled by approval" in " ".join(event["reasons"])
        for event in setup.audit.events
    )
    stored = setup.inbox.get(request_id)
    assert stored.requester.framework == "tests" and stored.requester.actor_id == "agent"

    # the same signed approval offered for a second call of the same action: already used
    replay = setup.guard.judge(
        "terminal", {"command": "make deploy"}, "call-2", records=list(stored.records)
    )
    assert replay.refused and "already used" in replay.message
    assert len(setup.ran) == 1


def test_a_denial_refuses_the_call_with_the_reviewer_s_reason(setup: Setup) -> None:
    join = setup.in_thread("call-1")
    request_id = setup.pending_id()
    denied = setup.cli("deny", request_id, "--reason", "no deploys on Friday", "--reviewer", "bob")
    assert denied.exit_code == 0, denied.output
    judgement = join()
    assert judgement.refused and not setup.ran
    assert "the approver declined: bob denied it" in judgement.message
    assert "no deploys on Friday" in judgement.message
    # a decline keeps the log as it was: the pending decision's one record
    (record,) = setup.audit.events
    assert record["allowed"] is False and "jevqueue.approval.expired" not in record["rule_ids"]


def test_nobody_deciding_in_time_refuses_the_call_as_expired(tmp_path: Path) -> None:
    setup = Setup(tmp_path, expires_in=0.5)
    judgement = setup.guard.check("terminal", {"command": "make deploy"}, "call-1")
    assert judgement.refused and not setup.ran
    assert "the approval expired: nobody decided within 0.5 s" in judgement.message
    assert judgement.message.startswith("jevqueue did not run the call")  # not "denied"
    assert "declined" not in judgement.message
    last = setup.audit.events[-1]
    assert last["allowed"] is False
    assert "jevqueue.approval.expired" in last["rule_ids"]
    assert last["action_digest"] == setup.audit.events[0]["action_digest"]
    assert len(setup.audit.events) == 2  # the pending decision, then how it ended
    assert last["reasons"][-1].startswith("the approval expired: nobody decided")
    (request,) = setup.inbox.requests(None)
    assert request.state is InboxState.EXPIRED
    late = setup.cli("approve", request.request_id, "--key", str(setup.key), "--reviewer", "alice")
    assert late.exit_code == 1 and "expired before anybody decided" in late.output


def test_expiry_is_a_declined_error_of_its_own(tmp_path: Path) -> None:
    setup = Setup(tmp_path, expires_in=0.2)
    pending = setup.guard.judge("terminal", {"command": "ls"}, "call-1")
    assert pending.request is not None
    with pytest.raises(ApprovalExpiredError, match="nobody decided") as expired:
        setup.approver.wait(pending.request)
    assert isinstance(expired.value, ApprovalDeclinedError)


def test_the_requester_cannot_approve_its_own_request(setup: Setup) -> None:
    join = setup.in_thread("call-1")
    request_id = setup.pending_id()
    itself = setup.cli("approve", request_id, "--key", str(setup.key), "--reviewer", "agent")
    assert itself.exit_code == 1 and "never approves itself" in itself.output
    setup.cli("deny", request_id, "--reason", "stop", "--reviewer", "bob")
    assert join().refused and not setup.ran


def test_an_approval_signed_with_a_key_the_pep_does_not_trust_is_refused(
    setup: Setup, tmp_path: Path
) -> None:
    """The inbox is not an authority: the PEP verifies what comes out of it."""
    mallory, _ = generate_key_pair(tmp_path / "mallory.key")
    join = setup.in_thread("call-1")
    request_id = setup.pending_id()
    result = setup.cli("approve", request_id, "--key", str(mallory), "--reviewer", "alice")
    assert result.exit_code == 0  # the inbox cannot check signatures; the PEP does
    judgement = join()
    assert judgement.refused and not setup.ran
    assert "not accepted by the approval verifier" in judgement.message


def test_an_async_call_waits_without_blocking_the_loop_and_is_approved(setup: Setup) -> None:
    async def scenario() -> Judgement:
        call = asyncio.create_task(
            setup.guard.acheck("terminal", {"command": "make deploy"}, "call-1")
        )
        request = await _filed(setup)  # the loop keeps running while the call waits
        alice = ApprovalAuthority(load_private_key(setup.key), "alice")
        await asyncio.to_thread(
            setup.inbox.approve, request.request_id, alice.issue(request.action_digest)
        )
        return await asyncio.wait_for(call, timeout=30)

    judgement = asyncio.run(scenario())
    assert judgement.allowed, judgement.message


def test_a_cancelled_async_wait_withdraws_the_request(setup: Setup) -> None:
    async def scenario() -> None:
        pending = setup.guard.judge("terminal", {"command": "ls"}, "call-1")
        assert pending.request is not None
        waiting = asyncio.create_task(setup.approver.wait_async(pending.request))
        await _filed(setup)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(waiting, timeout=30)

    asyncio.run(scenario())
    (request,) = setup.inbox.requests(None)
    assert request.state is InboxState.CANCELLED


def test_an_interrupted_blocking_wait_withdraws_the_request(
    setup: Setup, monkeypatch: pytest.MonkeyPatch
) -> None:
    import jevqueue.approvals._inbox_approver as module

    def interrupted(_: float) -> None:
        raise KeyboardInterrupt  # what Ctrl-C raises in the sleeping thread

    monkeypatch.setattr(module.time, "sleep", interrupted)
    pending = setup.guard.judge("terminal", {"command": "ls"}, "call-1")
    assert pending.request is not None
    with pytest.raises(KeyboardInterrupt):
        setup.approver.wait(pending.request)
    (request,) = setup.inbox.requests(None)
    assert request.state is InboxState.CANCELLED


OPS_POLICY = """
[approvers]
ops = ["alice", "bob", "carol"]

[[rule]]
id = "deploys"
effect = "require"
obligations = ["explicit_approval"]
reason = "deploys need two of ops"
tools = ["terminal"]
approvers = "ops"
approvals = 2
"""


def _authority(setup: Setup, name: str) -> ApprovalAuthority:
    return ApprovalAuthority(load_private_key(setup.keys[name][0]), name)


def test_two_of_a_group_need_two_distinct_members_at_the_inbox_and_the_pep(
    tmp_path: Path,
) -> None:
    setup = Setup(tmp_path, reviewers=("alice", "bob", "dave"), policy=OPS_POLICY)
    join = setup.in_thread("call-1")
    request_id = setup.pending_id()
    filed = setup.inbox.get(request_id)
    assert filed.needs() == "2 approvals from ops (alice, bob, carol)"
    first = setup.cli("approve", request_id, "--key", str(setup.key), "--reviewer", "alice")
    assert "1 of 2 approvals; it waits for more" in first.output
    outsider = setup.cli(
        "approve", request_id, "--key", str(setup.keys["dave"][0]), "--reviewer", "dave"
    )
    assert outsider.exit_code == 1 and "dave may not approve" in outsider.output
    assert setup.inbox.get(request_id).state is InboxState.PENDING
    setup.inbox.approve(request_id, _authority(setup, "bob").issue(filed.action_digest))
    judgement = join()
    assert judgement.allowed, judgement.message
    assert setup.run(judgement) == "deployed" and len(setup.ran) == 1
    fulfilled = [
        reason
        for event in setup.audit.events
        for reason in event["reasons"]
        if reason.startswith("explicit approval fulfilled")
    ]
    assert len(fulfilled) == 1 and "from alice" in fulfilled[0] and "from bob" in fulfilled[0]
    assert "(2 approvals from ops (alice, bob, carol))" in fulfilled[0]
    # the pending decision's record said what was needed
    assert any(
        "obtain 2 approvals from ops (alice, bob, carol)" in reason
        for reason in setup.audit.events[0]["reasons"]
    )


def test_one_member_s_approval_is_not_two(tmp_path: Path) -> None:
    setup = Setup(tmp_path, reviewers=("alice", "bob"), policy=OPS_POLICY)
    pending = setup.guard.judge("terminal", {"command": "make deploy"}, "call-1")
    assert pending.pending and pending.request is not None
    assert [q.count for q in pending.request.quorums] == [2]
    digest = pending.request.action_digest
    alice = _authority(setup, "alice")
    once = alice.issue(digest)
    refused = setup.guard.judge(
        "terminal", {"command": "make deploy"}, "call-1", records=[once, alice.issue(digest)]
    )
    assert refused.refused and not setup.ran
    assert "2 approvals from ops (alice, bob, carol) needed; have alice" in refused.message
    # nothing was consumed: with bob's approval the same record of alice's still counts
    both = setup.guard.judge(
        "terminal",
        {"command": "make deploy"},
        "call-1",
        records=[once, _authority(setup, "bob").issue(digest)],
    )
    assert both.allowed, both.message


def test_an_outsider_s_approval_does_not_count_at_the_pep(tmp_path: Path) -> None:
    setup = Setup(tmp_path, reviewers=("alice", "dave"), policy=OPS_POLICY)
    pending = setup.guard.judge("terminal", {"command": "make deploy"}, "call-1")
    assert pending.request is not None
    digest = pending.request.action_digest
    judged = setup.guard.judge(
        "terminal",
        {"command": "make deploy"},
        "call-1",
        records=[_authority(setup, "alice").issue(digest), _authority(setup, "dave").issue(digest)],
    )
    assert judged.refused and not setup.ran
    assert "dave is not among the approvers the policy names (ops: alice, bob, carol)" in (
        judged.message
    )
    assert "have alice" in judged.message


def test_a_forged_second_record_does_not_make_two(tmp_path: Path) -> None:
    setup = Setup(tmp_path, reviewers=("alice", "bob"), policy=OPS_POLICY)
    pending = setup.guard.judge("terminal", {"command": "make deploy"}, "call-1")
    assert pending.request is not None
    digest = pending.request.action_digest
    mallory, _ = generate_key_pair(tmp_path / "mallory.key")
    forged = ApprovalAuthority(load_private_key(mallory), "bob").issue(digest)  # not bob's key
    judged = setup.guard.judge(
        "terminal",
        {"command": "make deploy"},
        "call-1",
        records=[_authority(setup, "alice").issue(digest), forged],
    )
    assert judged.refused and not setup.ran
    assert "not accepted by the approval verifier" in judged.message
    assert "have alice" in judged.message


def test_the_requester_s_own_approval_is_refused_at_the_pep(tmp_path: Path) -> None:
    """A record from the context's actor is refused, whoever's approver delivered it."""
    setup = Setup(tmp_path, reviewers=("alice", "agent"))
    pending = setup.guard.judge("terminal", {"command": "make deploy"}, "call-1")
    assert pending.request is not None
    own = _authority(setup, "agent").issue(pending.request.action_digest)
    judged = setup.guard.judge("terminal", {"command": "make deploy"}, "call-1", records=[own])
    assert judged.refused and not setup.ran
    assert "a requester never approves its own call" in judged.message


def test_an_inbox_wait_longer_than_the_pep_s_freshness_is_refused(tmp_path: Path) -> None:
    setup = Setup(tmp_path)
    long_wait = InboxApprover(tmp_path / "inbox.sqlite3", expires_in=timedelta(minutes=10))
    with pytest.raises(ConfigurationError, match="raise approval_freshness on the PEP") as why:
        Guard(setup.pep, specs=[TERMINAL], approver=long_wait)
    assert "shorten expires_in to at most 240 seconds" in str(why.value)
    edge = InboxApprover(tmp_path / "inbox.sqlite3", expires_in=timedelta(minutes=5))
    with pytest.raises(ConfigurationError, match="a minute of that for clocks"):
        Guard(setup.pep, specs=[TERMINAL], approver=edge)  # 5 min of 5 min leaves no margin
    patient = PolicyEnforcementPoint(
        create_default_policy_decision_point(),
        audit_logger=RecordingAuditSink(),
        approval_freshness=timedelta(minutes=11),
    )
    assert Guard(patient, specs=[TERMINAL], approver=long_wait).approver is long_wait
    # the defaults agree: an inbox approver waits while an approval stays fresh, less a minute
    assert InboxApprover(tmp_path / "inbox.sqlite3").expires_in == DEFAULT_EXPIRY
    assert DEFAULT_EXPIRY + timedelta(minutes=1) == DEFAULT_FRESHNESS
    assert Guard(setup.pep, specs=[TERMINAL], approver=InboxApprover(tmp_path / "i.sqlite3"))


def test_impossible_settings_are_configuration_errors(tmp_path: Path) -> None:
    for settings in ({"expires_in": 0}, {"expires_in": timedelta(days=8)}, {"poll_interval": 0}):
        with pytest.raises(ConfigurationError):
            InboxApprover(tmp_path / "inbox.sqlite3", **settings)  # type: ignore[arg-type]


# --- interruptions while filing, withdrawals, and whose clock decides ----------------------------


class GatedInbox(SQLiteApprovalInbox):
    """A real SQLite inbox whose filing and withdrawing can be held at a chosen point, so a
    test interrupts the agent exactly there."""

    def __init__(self, path: Path, *, hold: str = "", raise_after_insert: bool = False) -> None:
        super().__init__(path)
        self.hold = hold  # "insert", "stored" or "cancel": where to wait for release
        self.raise_after_insert = raise_after_insert
        self.reached = threading.Event()
        self.release = threading.Event()
        self.released_in_time = True
        self.cancelled: list[InboxRequest] = []
        self.settled = threading.Event()  # a cancel left the request no longer pending

    def _wait_here(self, where: str) -> None:
        if self.hold == where:
            self.reached.set()
            self.released_in_time = self.release.wait(timeout=30)

    def _insert(self, *arguments: Any) -> InboxRequest:
        self._wait_here("insert")
        stored = super()._insert(*arguments)
        self._wait_here("stored")
        if self.raise_after_insert:
            raise KeyboardInterrupt  # Ctrl-C just after the store committed the request
        return stored

    def _cancel(self, request_id: str) -> InboxRequest:
        self._wait_here("cancel")
        current = super()._cancel(request_id)
        self.cancelled.append(current)
        if current.state is not InboxState.PENDING:
            self.settled.set()
        return current


def _pending_request(setup: Setup) -> Any:
    pending = setup.guard.judge("terminal", {"command": "make deploy"}, "call-1")
    assert pending.request is not None
    return pending.request


async def _wait_for(event: threading.Event, what: str) -> None:
    """Wait for a thread's signal without blocking the loop, with a deadline."""
    assert await asyncio.to_thread(event.wait, 30), f"{what} never happened"


@pytest.mark.parametrize("hold", ["insert", "stored"])
def test_a_wait_cancelled_while_filing_leaves_no_pending_request(
    setup: Setup, tmp_path: Path, hold: str
) -> None:
    """Cancelled before the store has the request, or after it stored it but before the
    agent heard back: either way the request ends withdrawn, never pending."""
    inbox = GatedInbox(tmp_path / "gated.sqlite3", hold=hold)
    approver = InboxApprover(inbox, poll_interval=0.05)
    request = _pending_request(setup)

    async def scenario() -> None:
        waiting = asyncio.create_task(approver.wait_async(request))
        await _wait_for(inbox.reached, "filing")
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(waiting, timeout=30)
        inbox.release.set()  # the filing thread goes on and stores the request now
        await _wait_for(inbox.settled, "the withdrawal")

    asyncio.run(scenario())
    assert inbox.released_in_time
    (stored,) = inbox.requests(None)
    assert stored.state is InboxState.CANCELLED and stored.request_id in approver.filed
    assert inbox.requests() == []


def test_an_interrupt_just_after_filing_withdraws_the_request(setup: Setup, tmp_path: Path) -> None:
    inbox = GatedInbox(tmp_path / "gated.sqlite3", raise_after_insert=True)
    request = _pending_request(setup)
    with pytest.raises(KeyboardInterrupt):
        InboxApprover(inbox, poll_interval=0.05).wait(request)
    (stored,) = inbox.requests(None)
    assert stored.state is InboxState.CANCELLED
    # the pausing path files through file(): the same
    pausing = InboxApprover(inbox, poll_interval=0.05, pause=True)
    with pytest.raises(KeyboardInterrupt):
        pausing.file(_pending_request(setup))
    assert [r.state for r in inbox.requests(None)] == [InboxState.CANCELLED] * 2


def test_the_async_withdrawal_runs_off_the_event_loop(setup: Setup, tmp_path: Path) -> None:
    """The withdrawal is held inside the store until the loop itself releases it: were it
    run on the loop's thread, the loop could not release it and the store would wait out
    its 30 s instead."""
    inbox = GatedInbox(tmp_path / "gated.sqlite3", hold="cancel")
    approver = InboxApprover(inbox, poll_interval=0.05)
    request = _pending_request(setup)

    async def scenario() -> None:
        waiting = asyncio.create_task(approver.wait_async(request))
        deadline = time.monotonic() + 30
        while not inbox.requests() and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        waiting.cancel()
        await _wait_for(inbox.reached, "the withdrawal")
        inbox.release.set()  # from the loop, while the withdrawal waits in the store
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(waiting, timeout=30)

    asyncio.run(scenario())
    assert inbox.released_in_time, "the withdrawal blocked the event loop"
    (stored,) = inbox.requests(None)
    assert stored.state is InboxState.CANCELLED


class StoreClockBehind(SQLiteApprovalInbox):
    """Reads every request with its times two hours earlier, as a store whose clock runs
    two hours behind the agent's would: still pending by the store's clock."""

    def _select(self, **query: Any) -> Any:
        behind = timedelta(hours=2)
        return [
            replace(each, created_at=each.created_at - behind, expires_at=each.expires_at - behind)
            if isinstance(each, InboxRequest)
            else each
            for each in super()._select(**query)
        ]


def test_the_agent_s_wall_clock_does_not_decide_expiry(setup: Setup, tmp_path: Path) -> None:
    inbox = StoreClockBehind(tmp_path / "behind.sqlite3")
    approver = InboxApprover(inbox, poll_interval=0.05)
    request = _pending_request(setup)
    outcome: list[Any] = []
    thread = threading.Thread(target=lambda: outcome.append(approver.wait(request)))
    thread.start()
    deadline = time.monotonic() + 30
    while not inbox.requests() and time.monotonic() < deadline:
        time.sleep(0.02)
    (filed,) = inbox.requests()
    inbox.approve(filed.request_id, _authority(setup, "alice").issue(filed.action_digest))
    thread.join(timeout=30)
    assert not thread.is_alive() and len(outcome) == 1
    assert [record.approver_id for record in outcome[0]] == ["alice"]


class StoreThatNeverExpires(SQLiteApprovalInbox):
    """Files every request for an hour, whatever the agent asked: a store whose clock
    runs far behind."""

    def _insert(self, request_id: str, document: Any, requester: Any, _: Any) -> InboxRequest:
        return super()._insert(request_id, document, requester, timedelta(hours=1))


def test_the_agent_stops_waiting_by_its_own_clock_and_withdraws(
    setup: Setup, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import jevqueue.approvals._inbox_approver as module

    monkeypatch.setattr(module, "_CLOCK_GRACE", timedelta(seconds=0.2))
    inbox = StoreThatNeverExpires(tmp_path / "slow.sqlite3")
    approver = InboxApprover(inbox, poll_interval=0.05, expires_in=0.3)
    outcome: list[BaseException] = []

    def wait() -> None:
        try:
            approver.wait(_pending_request(setup))
        except BaseException as error:
            outcome.append(error)

    thread = threading.Thread(target=wait)
    thread.start()
    thread.join(timeout=30)
    assert not thread.is_alive(), "the agent waited on the store's clock"
    assert len(outcome) == 1 and isinstance(outcome[0], ApprovalExpiredError)
    (stored,) = inbox.requests(None)
    assert stored.state is InboxState.CANCELLED  # withdrawn: nobody approves it now


def test_requester_text_with_control_characters_is_refused_up_front(tmp_path: Path) -> None:
    for settings in ({"session_id": "run\x1b[2K"}, {"framework": "lang\u202egraph"}):
        with pytest.raises(ConfigurationError, match="control character"):
            InboxApprover(tmp_path / "inbox.sqlite3", **settings)  # type: ignore[arg-type]
