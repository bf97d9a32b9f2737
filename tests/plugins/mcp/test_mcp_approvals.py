"""Approvals through the proxy: elicitation, InputRequiredResult, and signed records.

A write to ``.env`` needs an explicit approval under the default policy (secret stores).
"""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import threading
import time
from pathlib import Path

import anyio
import pytest
from conftest import ProxySetup, jevqueue_command
from jevqueue.approvals import (
    ApprovalAuthority,
    InboxRequest,
    InboxState,
    SQLiteApprovalInbox,
    load_private_key,
)
from proxy_client import MAJOR, approve, decline, proxy_client

ERAS = ["auto", "legacy"] if MAJOR >= 2 else ["auto"]
ENV_WRITE = {"path": ".env", "content": "DEBUG=1\n"}
DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


@pytest.mark.parametrize("era", ERAS)
def test_an_approved_question_lets_exactly_that_call_run(fs_proxy: ProxySetup, era: str) -> None:
    async def scenario() -> list[str]:
        async with proxy_client(
            fs_proxy.filesystem(), fs_proxy.env, answer=approve, era=era
        ) as client:
            outcome = await client.call("write_file", ENV_WRITE)
            assert not outcome.is_error, outcome.text
            return client.questions

    questions = anyio.run(scenario)
    assert (fs_proxy.workspace / ".env").read_text() == "DEBUG=1\n"
    assert len(questions) == 1
    question = questions[0]
    assert "write_file" in question and "secret store" in question
    digest = DIGEST.search(question)
    assert digest is not None
    # The canonical action is shown in full: the resolved target and the context.
    assert str(fs_proxy.workspace.resolve() / ".env") in question
    assert '"task_id": "task-42"' in question
    verified = fs_proxy.audit_verify()
    assert verified.returncode == 0
    # Asked, then approved; on 2026-07-28 the retry is judged afresh before its answer is read.
    expected = 3 if MAJOR >= 2 and era == "auto" else 2
    assert json.loads(verified.stdout)["count"] == expected


@pytest.mark.parametrize("era", ERAS)
def test_a_declined_question_runs_nothing(fs_proxy: ProxySetup, era: str) -> None:
    async def scenario() -> None:
        async with proxy_client(
            fs_proxy.filesystem(), fs_proxy.env, answer=decline, era=era
        ) as client:
            outcome = await client.call("write_file", ENV_WRITE)
            assert outcome.is_error
            assert "did not approve" in outcome.text

    anyio.run(scenario)
    assert not (fs_proxy.workspace / ".env").exists()


@pytest.mark.parametrize("era", ERAS)
def test_an_answer_that_is_not_a_plain_yes_approves_nothing(fs_proxy: ProxySetup, era: str) -> None:
    def sloppy(message: str, schema: dict) -> tuple[str, dict]:
        return "accept", {"approve": "yes"}

    async def scenario() -> None:
        async with proxy_client(
            fs_proxy.filesystem(), fs_proxy.env, answer=sloppy, era=era
        ) as client:
            outcome = await client.call("write_file", ENV_WRITE)
            assert outcome.is_error

    # A client may refuse to send an answer that breaks the schema: either way, nothing runs.
    with contextlib.suppress(Exception):
        anyio.run(scenario)
    assert not (fs_proxy.workspace / ".env").exists()


@pytest.mark.parametrize("era", ERAS)
def test_a_client_without_elicitation_gets_a_denial_saying_what_to_do(
    fs_proxy: ProxySetup, era: str
) -> None:
    async def scenario() -> str:
        async with proxy_client(fs_proxy.filesystem(), fs_proxy.env, era=era) as client:
            outcome = await client.call("write_file", ENV_WRITE)
            assert outcome.is_error
            return outcome.text

    text = anyio.run(scenario)
    assert "cannot ask its user" in text and "elicitation" in text
    assert "jevqueue approve sha256:" in text and "--approvals-dir" in text
    assert not (fs_proxy.workspace / ".env").exists()


def _keys(tmp: Path) -> tuple[Path, Path]:
    private = tmp / "alice.key"
    subprocess.run(
        [jevqueue_command(), "approve", "keygen", str(private)], check=True, capture_output=True
    )
    return private, Path(f"{private}.pub")


def _issue(private: Path, digest: str) -> dict:
    printed = subprocess.run(
        [jevqueue_command(), "approve", digest, "--key", str(private), "--approver", "alice"],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(printed.stdout)


def test_signed_records_in_the_approvals_dir_work_unattended_once(
    fs_proxy: ProxySetup, tmp_path: Path
) -> None:
    private, public = _keys(tmp_path)
    command = fs_proxy.filesystem(
        "--approver-key", f"alice={public}", "--approvals-dir", str(fs_proxy.approvals)
    )
    target = fs_proxy.workspace / ".env"

    async def scenario() -> None:
        async with proxy_client(command, fs_proxy.env) as client:
            first = await client.call("write_file", ENV_WRITE)
            assert first.is_error and not target.exists()
            digest = DIGEST.search(first.text)
            assert digest is not None
            other = _issue(private, "sha256:" + "0" * 64)
            (fs_proxy.approvals / "other.json").write_text(json.dumps(other))
            still = await client.call("write_file", ENV_WRITE)
            assert still.is_error and not target.exists()  # a record for another action
            record = _issue(private, digest.group(0))
            (fs_proxy.approvals / "env.json").write_text(json.dumps(record))
            second = await client.call("write_file", ENV_WRITE)
            assert not second.is_error, second.text
            assert target.read_text() == "DEBUG=1\n"
            target.unlink()
            third = await client.call("write_file", ENV_WRITE)  # the record is spent
            assert third.is_error
            changed = await client.call("write_file", {"path": ".env", "content": "X=2\n"})
            assert changed.is_error  # other arguments, other digest

    anyio.run(scenario)
    assert not target.exists()
    assert fs_proxy.audit_verify().returncode == 0


def test_a_signed_record_sent_in_meta_is_accepted(fs_proxy: ProxySetup, tmp_path: Path) -> None:
    private, public = _keys(tmp_path)
    command = fs_proxy.filesystem("--approver-key", f"alice={public}")

    async def scenario() -> None:
        async with proxy_client(command, fs_proxy.env) as client:
            first = await client.call("write_file", ENV_WRITE)
            digest = DIGEST.search(first.text)
            assert digest is not None
            record = _issue(private, digest.group(0))
            meta = {"jevqueue/approval_records": [record]}
            second = await client.call("write_file", ENV_WRITE, meta=meta)
            assert not second.is_error, second.text
            replay = await client.call("write_file", ENV_WRITE, meta=meta)
            assert replay.is_error

    anyio.run(scenario)
    assert (fs_proxy.workspace / ".env").exists()


def test_an_untrusted_signer_approves_nothing(fs_proxy: ProxySetup, tmp_path: Path) -> None:
    private, _ = _keys(tmp_path)  # alice's key, but the proxy trusts no one by that name

    async def scenario() -> None:
        async with proxy_client(fs_proxy.filesystem(), fs_proxy.env) as client:
            first = await client.call("write_file", ENV_WRITE)
            digest = DIGEST.search(first.text)
            assert digest is not None
            record = _issue(private, digest.group(0))
            forged = await client.call(
                "write_file", ENV_WRITE, meta={"jevqueue/approval_records": [record]}
            )
            assert forged.is_error

    anyio.run(scenario)
    assert not (fs_proxy.workspace / ".env").exists()


@pytest.mark.skipif(MAJOR < 2, reason="InputRequiredResult is protocol 2026-07-28 (mcp 2.x)")
def test_input_required_state_is_single_use_and_bound_to_the_digest(fs_proxy: ProxySetup) -> None:
    import mcp.types as types

    yes = {"jevqueue_approval": types.ElicitResult(action="accept", content={"approve": True})}
    target = fs_proxy.workspace / ".env"

    async def scenario() -> None:
        async with proxy_client(fs_proxy.filesystem(), fs_proxy.env, answer=approve) as client:
            assert client.protocol_version == "2026-07-28"
            session = client.session.session

            async def call(arguments: dict, **retry: object) -> object:
                return await session.call_tool(
                    "write_file", arguments, allow_input_required=True, **retry
                )

            asked = await call(ENV_WRITE)
            assert isinstance(asked, types.InputRequiredResult)
            question = asked.input_requests["jevqueue_approval"]
            digest = DIGEST.search(question.params.message)
            assert digest
            # The pause carries the core ApprovalRequest, as every plugin's pause does.
            request = asked.meta["jevqueue/approval_request"]
            assert request["tool"] == "write_file" and request["action_digest"] == digest[0]
            assert request["context"]["task_id"] == "task-42"
            state = asked.request_state
            # The same state with other arguments: another digest, refused, and spent.
            swapped = await call(
                {"path": ".env", "content": "EVIL=1\n"}, input_responses=yes, request_state=state
            )
            assert (
                swapped.is_error
                and "not the ones the approval question showed" in swapped.content[0].text
            )
            again = await call(ENV_WRITE, input_responses=yes, request_state=state)
            assert again.is_error and "already used" in again.content[0].text
            forged = await call(ENV_WRITE, input_responses=yes, request_state="made-up")
            assert forged.is_error
            assert not target.exists()
            fresh = await call(ENV_WRITE)
            assert isinstance(fresh, types.InputRequiredResult)
            done = await call(ENV_WRITE, input_responses=yes, request_state=fresh.request_state)
            assert not done.is_error, done
            assert target.read_text() == "DEBUG=1\n"

    anyio.run(scenario)


@pytest.mark.parametrize("verdict", ["approve", "deny"])
def test_with_inbox_the_proxy_files_the_call_and_a_reviewer_decides_it(
    fs_proxy: ProxySetup, tmp_path: Path, verdict: str
) -> None:
    private, public = _keys(tmp_path)
    inbox_path = tmp_path / "inbox.sqlite3"
    SQLiteApprovalInbox(inbox_path).close()
    command = fs_proxy.filesystem(
        "--approver-key", f"alice={public}", "--inbox", str(inbox_path), "--inbox-wait", "120"
    )
    decided: list[InboxRequest] = []

    def reviewer() -> None:  # alice, at her own terminal, decides what the proxy filed
        deadline = time.monotonic() + 90
        with SQLiteApprovalInbox(inbox_path) as inbox:
            while time.monotonic() < deadline:
                pending = inbox.requests()
                if pending:
                    (request,) = pending
                    if verdict == "approve":
                        authority = ApprovalAuthority(load_private_key(private), "alice")
                        record = authority.issue(request.action_digest)
                        decided.append(inbox.approve(request.request_id, record))
                    else:
                        decided.append(inbox.deny(request.request_id, "alice", "no secrets today"))
                    return
                time.sleep(0.1)

    thread = threading.Thread(target=reviewer, daemon=True)
    thread.start()

    async def scenario() -> tuple[bool, str]:
        async with proxy_client(command, fs_proxy.env) as client:
            outcome = await client.call("write_file", ENV_WRITE)
            return outcome.is_error, outcome.text

    failed, text = anyio.run(scenario)
    thread.join(timeout=90)
    (request,) = decided
    assert request.requester.framework == "mcp" and request.tool == "write_file"
    target = fs_proxy.workspace / ".env"
    if verdict == "approve":
        assert request.state is InboxState.APPROVED
        assert not failed, text
        assert target.read_text() == "DEBUG=1\n"
    else:
        assert request.state is InboxState.DENIED
        assert failed and "no secrets today" in text
        assert not target.exists()
    assert fs_proxy.audit_verify().returncode == 0


def test_inbox_wait_without_an_inbox_is_a_usage_error(fs_proxy: ProxySetup) -> None:
    answer = subprocess.run(
        fs_proxy.filesystem("--inbox-wait", "60"), capture_output=True, text=True, check=False
    )
    assert answer.returncode == 2
    assert "--inbox-wait needs --inbox" in answer.stderr
