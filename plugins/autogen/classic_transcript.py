"""What a classic AutoGen (ag2) agent read, recorded in the policy capability's transcript.

The guard labels every argument of a call by where its value occurs in what the agent read
(:class:`jevqueue.policy.Transcript`). Before it judges a batch,
:class:`~.classic_policy.PolicyCapability` reads the executor's conversation with the
agent that asked for the calls into that transcript:

* **The user's words** are the message that opened the chat, when an agent without an LLM
  of its own sent it — a ``UserProxyAgent``, or any agent built ``llm_config=False`` for
  a person or a program: what was passed to ``initiate_chat`` (or typed when it asked) —
  and whatever a person typed at a human-input prompt of an agent of the chat. Not the
  user's words: a message of an agent that has an LLM (its model wrote it, even when it
  opens a chat: a nested chat's opening message is an earlier reply), and the carryover
  ag2 appends to an opening message in sequential chats (``"\\nContext: \\n"`` and an
  earlier chat's summary, which a model wrote): the opening message is read up to its
  first ``"\\nContext: \\n"``.
* **Tool outputs.** ``guard.run`` records each call the capability runs; every other tool
  response of the conversation (another executor's in a group chat, one replayed into a
  resumed chat) is recorded under its ``tool_call_id``. Recording a call id twice keeps
  one copy, and a call the guard refused holds its denial, not an output.

In a group chat the executor's conversation is with the manager, and each message names
its speaker; speakers are found among the group chat's agents.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from jevqueue.plugins.autogen._classic_framework import ConversableAgent
from jevqueue.policy import Guard

__all__ = ["CARRYOVER", "read_conversation"]

CARRYOVER = "\nContext: \n"
"""What ag2 puts between an opening message and the carryover of earlier chats."""


def read_conversation(
    guard: Guard, agent: Any, messages: Sequence[Mapping[str, Any]], sender: Any
) -> None:
    """Record what ``agent``'s conversation with ``sender`` shows, as described above."""
    agents = _agents(agent, sender)
    if messages:
        opening = messages[0]
        author = agents.get(str(opening.get("name")))
        if _without_llm(author) and _is_text(opening):
            text = _text(opening.get("content")).split(CARRYOVER, 1)[0]
            if text.strip():
                guard.record_user(text)
    for member in agents.values():
        for typed in getattr(member, "_human_input", None) or ():
            if isinstance(typed, str) and typed.strip():
                guard.record_user(typed)
    allowed = {j.call_id: j.allowed for j in list(guard.judgements) if j.call_id}
    for tool, content, call_id in _tool_responses(messages):
        if allowed.get(call_id, True):
            guard.record_output(tool, content, call_id)


def _agents(agent: Any, sender: Any) -> dict[str, Any]:
    """The agents of the chat by name: the two of the conversation and, when one is a
    group chat manager, the group chat's."""
    found: dict[str, Any] = {}
    for one in (agent, sender):
        chat = getattr(one, "groupchat", None)
        for member in getattr(chat, "agents", None) or ():
            found.setdefault(str(getattr(member, "name", "")), member)
    for one in (agent, sender):
        if one is not None:
            found[str(getattr(one, "name", ""))] = one
    return found


def _without_llm(agent: Any) -> bool:
    """An agent whose messages no model of its own wrote (``llm_config=False``)."""
    return isinstance(agent, ConversableAgent) and agent.client is None


def _is_text(message: Mapping[str, Any]) -> bool:
    return (
        message.get("role") not in ("tool", "function")
        and not message.get("tool_calls")
        and not message.get("tool_responses")
        and not message.get("function_call")
    )


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # multimodal: the text parts
        return "\n".join(
            str(part.get("text", ""))
            for part in content
            if isinstance(part, Mapping) and part.get("type") == "text"
        )
    return ""


def _tool_responses(messages: Sequence[Mapping[str, Any]]) -> Iterator[tuple[str, Any, str]]:
    """``(tool, content, call id)`` of each tool response, named by the call it answers."""
    names: dict[str, str] = {}
    for message in messages:
        for call in message.get("tool_calls") or ():
            function = call.get("function") if isinstance(call, Mapping) else None
            if isinstance(function, Mapping) and call.get("id"):
                names[str(call["id"])] = str(function.get("name") or "")
        responses = message.get("tool_responses")
        if not responses and message.get("role") == "tool":
            responses = [message]
        for response in responses or ():
            call_id = response.get("tool_call_id") if isinstance(response, Mapping) else None
            if not call_id:  # without an id it cannot be told from the run guard.run recorded
                continue
            yield names.get(str(call_id)) or "unknown_tool", response.get("content"), str(call_id)
