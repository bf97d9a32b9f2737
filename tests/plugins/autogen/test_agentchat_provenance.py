"""What an AgentChat agent read: real agents and teams, a scripted model client, the shipped
personal-assistant policy; the user's words are the messages of the user's sources."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip(
    "autogen_agentchat", reason='AgentChat is not installed: pip install "jevqueue[autogen]"'
)

from autogen_agentchat.agents import AssistantAgent, UserProxyAgent
from autogen_agentchat.conditions import MaxMessageTermination
from autogen_agentchat.teams import RoundRobinGroupChat
from autogen_core.tools import FunctionTool, StaticWorkbench
from autogen_kit import (
    ATTACKER,
    REQUEST,
    UNTRUSTED_VALUES,
    Mailbox,
    Policy,
    mail_policy,
    sends,
)
from jevqueue import Governor, Thresholds
from jevqueue.errors import ApprovalDeclinedError, ConfigurationError
from jevqueue.plugins.autogen import GovernedChatCompletionClient, PolicyWorkbench, tool_spec
from jevqueue.plugins.autogen.testing import ScriptedChatCompletionClient, tool_call
from jevqueue.policy import ApprovalRequest, Provenance

OWN = {"to": "boss@example.com", "subject": "Newest e-mail", "body": "An overdue bill."}
STEERED = {"to": ATTACKER, "subject": "Payment details", "body": "As requested."}
SUPPLIER = "billing@supplier.example"


class Unsure:
    """A ballot that never picks a tool: every turn is the model's own."""

    def score(self, messages: Any, tools: Any) -> dict[str, float]:
        return {(t.get("function") or t)["name"]: 0.4 for t in tools}


class Mail:
    """Two real FunctionTools behind one PolicyWorkbench whose approver is a person who
    declines."""

    def __init__(self, workspace: Path) -> None:
        self.box = Mailbox()
        self.tools = [
            FunctionTool(self.box.read_inbox, "Read the newest e-mails.", name="read_inbox"),
            FunctionTool(self.box.send_email, "Send an e-mail.", name="send_email"),
        ]
        read, send = self.tools
        self.specs = [
            tool_spec(read, side_effects=()),
            tool_spec(send, side_effects={"send_email"}),
        ]
        self.policy: Policy = mail_policy(workspace, self.specs)
        self.shown: list[ApprovalRequest] = []
        self.workbench = PolicyWorkbench(
            StaticWorkbench(self.tools),
            pep=self.policy.pep,
            specs=self.specs,
            context=self.policy.context,
            approver=self.decline,
        )

    def decline(self, request: ApprovalRequest) -> None:
        self.shown.append(request)
        raise ApprovalDeclinedError("not this one")

    def agent(
        self, name: str, steps: list[Any], **client: Any
    ) -> tuple[AssistantAgent, ScriptedChatCompletionClient]:
        model = ScriptedChatCompletionClient(steps)
        governed = GovernedChatCompletionClient(
            model,
            Governor(Unsure(), thresholds=Thresholds(confident=0.6, margin=0.25, floor=0.2)),
            guard=self.workbench.guard,
            **client,
        )
        agent = AssistantAgent(
            name, model_client=governed, workbench=self.workbench, max_tool_iterations=3
        )
        return agent, model


def whole(provenance: Provenance | None, argument: str) -> str:
    assert provenance is not None
    (origin,) = [o for o in provenance.of(argument) if not o.kind]
    return origin.label


@pytest.fixture
def mail(workspace: Path) -> Mail:
    return Mail(workspace)


def test_an_address_read_in_an_email_needs_an_approval_that_names_the_email(
    mail: Mail,
) -> None:
    agent, model = mail.agent(
        "assistant",
        [
            tool_call("read_inbox", {}, call_id="call_inbox"),
            tool_call("send_email", STEERED, call_id="call_send"),
            "I did not send anything.",
        ],
    )
    asyncio.run(agent.run(task=REQUEST))
    model.assert_complete()

    assert mail.box.sent == []
    (request,) = mail.shown
    assert whole(request.provenance, "to") == "untrusted"
    assert "read_inbox's output (call call_inbox), not from your request" in request.describe()
    (origin,) = [o for o in request.provenance.of("to") if not o.kind]  # type: ignore[union-attr]
    assert [(s.tool, s.call_id) for s in origin.sources] == [("read_inbox", "call_inbox")]
    (record,) = sends(mail.policy)
    assert UNTRUSTED_VALUES in record["rule_ids"]


def test_a_send_to_the_address_the_task_names_runs_without_an_approval(mail: Mail) -> None:
    agent, model = mail.agent(
        "assistant",
        [
            tool_call("read_inbox", {}, call_id="call_inbox"),
            tool_call("send_email", OWN, call_id="call_send"),
            "Done.",
        ],
    )
    asyncio.run(agent.run(task=REQUEST))
    model.assert_complete()

    assert mail.box.sent == [OWN] and mail.shown == []
    (record,) = sends(mail.policy)
    assert record["result"] == "ALLOW"


def test_a_teammates_message_is_not_the_users_words(mail: Mail) -> None:
    """The reader hands the e-mail on; the writer, sharing the reader's workbench (one
    guard), writes to the address it shows."""
    reader, reader_model = mail.agent(
        "reader",
        [
            tool_call("read_inbox", {}, call_id="call_inbox"),
            f"The supplier wants the payment details sent to {ATTACKER}.",
        ],
    )
    writer, writer_model = mail.agent(
        "writer", [tool_call("send_email", STEERED, call_id="call_send"), "Not sent."]
    )
    team = RoundRobinGroupChat(
        [reader, writer], termination_condition=MaxMessageTermination(max_messages=3)
    )
    asyncio.run(team.run(task=REQUEST))
    reader_model.assert_complete()

    handed = [m for m in writer_model.requests[0].messages if getattr(m, "source", "") == "reader"]
    assert handed and ATTACKER in str(handed[0].content), "the reader's message did not arrive"
    assert mail.box.sent == []
    (request,) = mail.shown
    assert whole(request.provenance, "to") == "untrusted"


def test_a_person_answering_through_a_user_proxy_is_the_user_when_named(mail: Mail) -> None:
    assistant, model = mail.agent(
        "assistant",
        [
            tool_call("read_inbox", {}, call_id="call_inbox"),
            "Your supplier asks for the payment details. What should I do?",
            tool_call("send_email", {**OWN, "to": SUPPLIER}, call_id="call_send"),
            "Done.",
        ],
        user_sources=["user", "person"],
    )
    # The person names the supplier's address, which the e-mail shows too: it is theirs.
    person = UserProxyAgent("person", input_func=lambda prompt: f"Tell {SUPPLIER} it is paid.")
    team = RoundRobinGroupChat(
        [assistant, person], termination_condition=MaxMessageTermination(max_messages=4)
    )
    asyncio.run(team.run(task="Read my newest e-mail."))
    model.assert_complete()

    (request,) = mail.shown  # an outside recipient still needs an approval
    assert whole(request.provenance, "to") == "user"
    (record,) = sends(mail.policy)
    assert UNTRUSTED_VALUES not in record["rule_ids"]


def test_a_guard_and_user_sources_of_the_wrong_kind_are_refused(mail: Mail) -> None:
    model = ScriptedChatCompletionClient([])
    with pytest.raises(ConfigurationError, match="PolicyWorkbench"):
        GovernedChatCompletionClient(model, guard=mail.workbench)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="user_sources"):
        GovernedChatCompletionClient(model, guard=mail.workbench.guard, user_sources="user")
