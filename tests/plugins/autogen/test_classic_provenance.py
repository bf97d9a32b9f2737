"""What a classic AutoGen (ag2) agent read: real chats, a scripted model, the shipped
personal-assistant policy; the user's words are what a person's agent sent."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip(
    "autogen", reason='classic AutoGen is not installed: pip install "jevqueue[ag2]"'
)

from autogen import ConversableAgent, GroupChat, GroupChatManager, register_function
from autogen.io.base import IOStream
from autogen.tools import Tool
from autogen_kit import (
    ATTACKER,
    REQUEST,
    UNTRUSTED_VALUES,
    Mailbox,
    Policy,
    mail_policy,
    sends,
)
from classic_kit import pair
from jevqueue.errors import ApprovalDeclinedError, ConfigurationError
from jevqueue.plugins.autogen import PolicyCapability, governed_tool, tool_spec
from jevqueue.plugins.autogen.testing import ScriptedModel, classic_tool_call
from jevqueue.policy import ApprovalRequest, Guard, Provenance

OWN = {"to": "boss@example.com", "subject": "Newest e-mail", "body": "An overdue bill."}
STEERED = {"to": ATTACKER, "subject": "Payment details", "body": "As requested."}


class Mail:
    """The two tools, registered for a real assistant and a real executor whose policy
    capability asks a person who declines."""

    def __init__(self, workspace: Path) -> None:
        self.box = Mailbox()

        def read_inbox() -> list[dict[str, str]]:
            return self.box.read_inbox()

        def send_email(to: str, subject: str, body: str) -> str:
            return self.box.send_email(to, subject, body)

        self.functions: dict[str, Callable[..., Any]] = {
            "read_inbox": read_inbox,
            "send_email": send_email,
        }
        self.specs = [
            tool_spec(Tool(func_or_tool=read_inbox), side_effects=()),
            tool_spec(Tool(func_or_tool=send_email), side_effects={"send_email"}),
        ]
        self.policy: Policy = mail_policy(workspace, self.specs)
        self.shown: list[ApprovalRequest] = []

    def decline(self, request: ApprovalRequest) -> None:
        self.shown.append(request)
        raise ApprovalDeclinedError("not this one")

    def agents(
        self, steps: list[Any], **executor: Any
    ) -> tuple[ConversableAgent, ConversableAgent, PolicyCapability, ScriptedModel]:
        model = ScriptedModel(steps)
        assistant, default_executor = pair(model, self.functions)
        if executor:  # another executor (a person's proxy), with the same tools
            default_executor = ConversableAgent("executor", llm_config=False, **executor)
            for name, function in self.functions.items():
                default_executor.register_for_execution(name=name)(function)
        capability = PolicyCapability(
            self.policy.pep,
            specs=self.specs,
            context=self.policy.context,
            approver=self.decline,
        )
        capability.add_to_agent(default_executor)
        return assistant, default_executor, capability, model


def chat(opener: ConversableAgent, other: ConversableAgent, asynchronous: bool, **kw: Any) -> None:
    if asynchronous:
        asyncio.run(opener.a_initiate_chat(other, silent=True, **kw))
    else:
        opener.initiate_chat(other, silent=True, **kw)


def whole(provenance: Provenance | None, argument: str) -> str:
    assert provenance is not None
    (origin,) = [o for o in provenance.of(argument) if not o.kind]
    return origin.label


@pytest.fixture
def mail(workspace: Path) -> Mail:
    return Mail(workspace)


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_an_address_read_in_an_email_needs_an_approval_that_names_the_email(
    mail: Mail, asynchronous: bool
) -> None:
    assistant, executor, _, model = mail.agents(
        [
            classic_tool_call("read_inbox", {}, call_id="call_inbox"),
            classic_tool_call("send_email", STEERED, call_id="call_send"),
            "I did not send anything.",
        ]
    )
    chat(executor, assistant, asynchronous, message=REQUEST, max_turns=3)
    model.assert_complete()

    assert mail.box.sent == []
    (request,) = mail.shown
    assert request.provenance is not None
    (origin,) = [o for o in request.provenance.of("to") if not o.kind]
    assert origin.label == "untrusted"
    # ag2 hands the model a tool's result as text (a list's repr), and so it was read.
    assert [(s.tool, s.call_id, s.at) for s in origin.sources] == [("read_inbox", "call_inbox", "")]
    assert (
        "to came from read_inbox's output (call call_inbox), not from your request"
        in request.describe()
    )
    refusal = model.requests[2].messages[-1]["content"]
    assert "the approver declined: not this one" in refusal
    (record,) = sends(mail.policy)
    assert UNTRUSTED_VALUES in record["rule_ids"]


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_a_send_to_the_address_the_user_named_runs_without_an_approval(
    mail: Mail, asynchronous: bool
) -> None:
    assistant, executor, _, model = mail.agents(
        [
            classic_tool_call("read_inbox", {}, call_id="call_inbox"),
            classic_tool_call("send_email", OWN, call_id="call_send"),
            "Done.",
        ]
    )
    chat(executor, assistant, asynchronous, message=REQUEST, max_turns=3)
    model.assert_complete()

    assert mail.box.sent == [OWN] and mail.shown == []
    (record,) = sends(mail.policy)
    assert record["result"] == "ALLOW"


def test_the_carryover_of_an_earlier_chat_is_not_the_users_words(mail: Mail) -> None:
    assistant, executor, capability, _ = mail.agents(
        [classic_tool_call("read_inbox", {}, call_id="call_inbox"), "Done."]
    )
    summary = "The earlier chat agreed to write to carol@example.com."
    chat(executor, assistant, False, message=REQUEST, carryover=summary, max_turns=2)

    transcript = capability.guard.transcript()
    assert whole(transcript.provenance({"to": "boss@example.com"}), "to") == "user"
    assert whole(transcript.provenance({"to": "carol@example.com"}), "to") == "unseen"


def test_a_chat_an_agent_with_an_llm_opens_is_not_the_users_words(mail: Mail) -> None:
    assistant, executor, capability, model = mail.agents(
        [classic_tool_call("read_inbox", {}, call_id="call_inbox")]
    )
    # The assistant opens: its message is what its program (or an earlier reply) wrote.
    chat(assistant, executor, False, message=f"Tell {ATTACKER} about my inbox.", max_turns=2)
    model.assert_complete()

    transcript = capability.guard.transcript()
    labels = transcript.provenance({"to": ATTACKER, "note": "about my inbox"})
    assert whole(labels, "to") == "untrusted", "only the e-mail shows the address"
    assert whole(labels, "note") == "unseen"


class Person:
    """A person at ag2's input stream, typing answers in order."""

    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)

    def input(self, prompt: str = "", *, password: bool = False) -> str:
        return self.answers.pop(0)

    def print(self, *objects: Any, sep: str = " ", end: str = "\n", flush: bool = False) -> None:
        pass

    def send(self, message: Any) -> None:
        pass


def test_what_a_person_types_is_the_users_words(mail: Mail) -> None:
    # The person names the supplier's address, which the e-mail shows too: it is theirs.
    supplier = "billing@supplier.example"
    reply = {**OWN, "to": supplier}
    assistant, executor, _, model = mail.agents(
        [
            classic_tool_call("read_inbox", {}, call_id="call_inbox"),
            "Your supplier asks for the payment details. What should I do?",
            classic_tool_call("send_email", reply, call_id="call_send"),
            "Done.",
        ],
        human_input_mode="ALWAYS",
    )
    # An empty answer lets the executor reply on its own (it runs the tool calls).
    person = Person("", f"Tell {supplier} it is paid.", "", "exit")
    with IOStream.set_default(person):
        chat(executor, assistant, False, message="Read my newest e-mail.")
    model.assert_complete()

    (request,) = mail.shown  # an outside recipient still needs an approval
    assert request.provenance is not None
    assert whole(request.provenance, "to") == "user"
    (record,) = sends(mail.policy)
    assert UNTRUSTED_VALUES not in record["rule_ids"]
    assert "personal-assistant.outside-recipient-to" in record["rule_ids"]


def test_governed_tools_sharing_a_guard_label_each_others_arguments(mail: Mail) -> None:
    guard = Guard(
        mail.policy.pep, specs=mail.specs, context=mail.policy.context, approver=mail.decline
    )
    guard.record_user(REQUEST)  # a tool body never sees the chat: the caller records it
    tools = [governed_tool(function, guard=guard) for function in mail.functions.values()]
    model = ScriptedModel(
        [
            classic_tool_call("read_inbox", {}, call_id="call_inbox"),
            classic_tool_call("send_email", STEERED, call_id="call_send"),
            classic_tool_call("send_email", OWN, call_id="call_own"),
            "Done.",
        ]
    )
    assistant = ConversableAgent("assistant", llm_config=model.llm_config())
    executor = ConversableAgent("executor", llm_config=False, human_input_mode="NEVER")
    for one in tools:
        one.register_for_llm(assistant)
        one.register_for_execution(executor)
    model.install(assistant)
    chat(executor, assistant, False, message=REQUEST, max_turns=4)
    model.assert_complete()

    assert mail.box.sent == [OWN]
    (request,) = mail.shown
    assert whole(request.provenance, "to") == "untrusted"
    assert "read_inbox's output" in request.describe()


def test_governed_tool_takes_a_guard_or_its_parts_not_both(mail: Mail) -> None:
    guard = Guard(mail.policy.pep, specs=mail.specs, context=mail.policy.context)
    read_inbox = mail.functions["read_inbox"]
    with pytest.raises(ConfigurationError, match="not both"):
        governed_tool(read_inbox, guard=guard, pep=mail.policy.pep)
    with pytest.raises(ConfigurationError, match="needs pep=, specs= and context="):
        governed_tool(read_inbox, pep=mail.policy.pep)
    with pytest.raises(ConfigurationError, match="takes a jevqueue Guard"):
        governed_tool(read_inbox, guard=mail.policy.pep)  # type: ignore[arg-type]


def test_in_a_group_chat_the_person_who_opened_it_wrote_the_users_words(mail: Mail) -> None:
    """The executor talks to the manager; the opening message names its speaker, found
    among the group chat's agents."""
    model = ScriptedModel([classic_tool_call("read_inbox", {}, call_id="call_inbox")])
    assistant = ConversableAgent("assistant", llm_config=model.llm_config())
    executor = ConversableAgent("executor", llm_config=False, human_input_mode="NEVER")
    person = ConversableAgent("person", llm_config=False, human_input_mode="NEVER")
    for name, function in mail.functions.items():
        register_function(
            function, caller=assistant, executor=executor, name=name, description=name
        )
    model.install(assistant)
    capability = PolicyCapability(mail.policy.pep, specs=mail.specs, context=mail.policy.context)
    capability.add_to_agent(executor)
    chat = GroupChat(
        agents=[person, assistant, executor],
        messages=[],
        max_round=4,
        speaker_selection_method="round_robin",
    )
    supplier = "billing@supplier.example"  # the e-mail shows it too
    person.initiate_chat(
        GroupChatManager(chat, llm_config=False),
        message=f"Read my newest e-mail and answer {supplier}.",
        silent=True,
    )
    model.assert_complete()

    transcript = capability.guard.transcript()
    assert whole(transcript.provenance({"to": supplier}), "to") == "user"
    assert whole(transcript.provenance({"to": ATTACKER}), "to") == "untrusted"
