"""A Pydantic AI run that pauses for the approval inbox and resumes from its stored decision.

With ``InboxApprover(pause=True)`` the capability files the request in a real SQLite inbox
and the run ends with ``DeferredToolRequests`` (nothing blocks). A reviewer decides
through the inbox; then a *second* agent — another model, another capability and approver
over the same inbox file — resumes from the messages with
``approval_results(requests, approver.answer(digest))``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from jevqueue.approvals import InboxApprover, InboxState, SQLiteApprovalInbox
from jevqueue.errors import ApprovalDeclinedError, ApprovalExpiredError, UsageError
from jevqueue.plugins.pydantic_ai import PolicyCapability, approval_results, tool_spec
from jevqueue.plugins.pydantic_ai.testing import ScriptedModel, tool_call
from pydantic_ai import Agent, DeferredToolRequests, Tool
from pydantic_ai_kit import SignedPolicy

DEPLOY = {"CommandLine": "make deploy", "Cwd": "."}


class Paused:
    """One run paused for the inbox, and what it takes to resume it in a second agent."""

    def __init__(self, root: Path, store: Path, expires_in: float = 240) -> None:
        self.root, self.store, self.expires_in = root, store, expires_in
        self.policy = SignedPolicy(root)
        self.runs: list[dict[str, Any]] = []

        def run_command(CommandLine: str, Cwd: str | None = None) -> str:
            """Run a shell command."""
            self.runs.append({"CommandLine": CommandLine, "Cwd": Cwd})
            return "deployed"

        self.tool = Tool(run_command)
        self.specs = [
            tool_spec(
                self.tool, side_effects={"shell_command"}, cwd_field="Cwd", required_path_fields=()
            )
        ]
        self.first_model = ScriptedModel([tool_call("run_command", DEPLOY, call_id="c1")])
        self.paused = self.agent(self.first_model).run_sync("Deploy it")
        self.inbox = SQLiteApprovalInbox(store)

    def agent(self, scripted: ScriptedModel) -> Agent[None, Any]:
        approver = InboxApprover(
            self.store, expires_in=self.expires_in, framework="pydantic_ai", pause=True
        )
        capability = PolicyCapability(
            pep=self.policy.pep, specs=self.specs, context=self.policy.context, approver=approver
        )
        return Agent(
            scripted.model,
            tools=[self.tool],
            output_type=[str, DeferredToolRequests],
            capabilities=[capability],
        )

    @property
    def requests(self) -> DeferredToolRequests:
        assert isinstance(self.paused.output, DeferredToolRequests)
        return self.paused.output

    @property
    def digest(self) -> str:
        return str(self.requests.metadata["c1"]["action_digest"])

    def resume(self, *steps: Any) -> tuple[Any, ScriptedModel]:
        """Resume in a second agent, answered from the inbox in one line."""
        model = ScriptedModel(list(steps))
        agent = self.agent(model)
        approver = InboxApprover(self.store, pause=True)
        done = agent.run_sync(
            message_history=self.paused.all_messages(),
            deferred_tool_results=approval_results(self.requests, approver.answer(self.digest)),
        )
        return done, model


def _read_by_model(model: ScriptedModel) -> str:
    """Everything the model was shown on its one request after the resume."""
    (request,) = model.requests
    return json.dumps(list(request.messages), default=str)


@pytest.fixture
def paused(tmp_path: Path) -> Paused:
    root = tmp_path / "workspace"
    root.mkdir()
    return Paused(root, tmp_path / "inbox.sqlite3")


def test_the_run_pauses_with_one_request_filed_and_nothing_run(paused: Paused) -> None:
    assert [call.tool_call_id for call in paused.requests.approvals] == ["c1"]
    (request,) = paused.inbox.requests()
    assert request.state is InboxState.PENDING
    assert request.action_digest == paused.digest
    assert request.requester.framework == "pydantic_ai"
    assert request.requester.call_id == "c1"
    assert request.request["arguments"]["CommandLine"] == "make deploy"
    assert paused.runs == []
    paused.first_model.assert_complete()


def test_an_approval_in_the_inbox_resumes_a_second_agent_and_runs_the_call_once(
    paused: Paused,
) -> None:
    (request,) = paused.inbox.requests()
    paused.inbox.approve(request.request_id, paused.policy.authority.issue(paused.digest))
    done, model = paused.resume("Deployed.")
    assert done.output == "Deployed."
    # the judged arguments: the working directory as the policy resolved it
    assert paused.runs == [{"CommandLine": "make deploy", "Cwd": str(paused.root)}]
    assert len(paused.inbox.requests(None)) == 1
    last = paused.policy.audit.events[-1]
    assert last["action_digest"] == paused.digest and last["allowed"] is True
    model.assert_complete()


def test_a_denial_in_the_inbox_reaches_the_model_and_nothing_runs(paused: Paused) -> None:
    (request,) = paused.inbox.requests()
    paused.inbox.deny(request.request_id, "alice", "deploys wait for Monday")
    assert type(InboxApprover(paused.store).answer(paused.digest)) is ApprovalDeclinedError
    done, model = paused.resume("Not deployed.")
    assert done.output == "Not deployed."
    read = _read_by_model(model)
    assert "the approver declined: alice denied it" in read
    assert "deploys wait for Monday" in read and "expired" not in read
    assert paused.runs == []
    # the resumed run judged the call again to settle the decline, and filed nothing more
    assert len(paused.inbox.requests(None)) == 1
    assert not any("jevqueue.approval.expired" in e["rule_ids"] for e in paused.policy.audit.events)
    model.assert_complete()


def test_nobody_deciding_in_time_resumes_as_expired_not_denied(tmp_path: Path) -> None:
    root = tmp_path / "workspace"
    root.mkdir()
    paused = Paused(root, tmp_path / "inbox.sqlite3", expires_in=0.5)
    (request,) = paused.inbox.requests()
    deadline = time.monotonic() + 30
    while paused.inbox.get(request.request_id).state is InboxState.PENDING:
        assert time.monotonic() < deadline, "the request never expired"
        time.sleep(0.05)
    assert isinstance(InboxApprover(paused.store).answer(paused.digest), ApprovalExpiredError)
    done, model = paused.resume("Nobody answered.")
    assert done.output == "Nobody answered."
    read = _read_by_model(model)
    assert "the approval expired: nobody decided within 0.5 s" in read
    assert "declined" not in read
    assert paused.runs == []
    events = paused.policy.audit.events
    expired = [e for e in events if "jevqueue.approval.expired" in e["rule_ids"]]
    assert len(expired) == 1 and expired[0]["action_digest"] == paused.digest
    assert len(paused.inbox.requests(None)) == 1
    model.assert_complete()


def test_resuming_while_the_request_is_pending_is_a_typed_error(paused: Paused) -> None:
    with pytest.raises(UsageError, match="still pending"):
        InboxApprover(paused.store, pause=True).answer(paused.digest)
    assert paused.runs == []
    (request,) = paused.inbox.requests()
    assert request.state is InboxState.PENDING
