"""One classic AutoGen reply as a jevqueue host: the conversation, and the three modes.

:class:`ClassicTurnHost` is built by :class:`~.classic_governor.GovernorCapability` each time
the agent is about to ask its LLM for a reply. ``generate`` calls the agent's own
``generate_oai_reply`` (``a_generate_oai_reply`` in async chats) with per-call keyword
arguments that ``OpenAIWrapper.create`` passes on:

==========  ==========  =============================================================
force_tool  directive   ``generate_oai_reply`` is called with
==========  ==========  =============================================================
a name      non-empty   ``tool_choice={"type": "function", "function": {"name": X}}``,
                        ``parallel_tool_calls=False``, the directive appended
None        non-empty   ``tool_choice="none"``, the directive appended
None        ``""``      nothing added: the call the agent makes without jevqueue
==========  ==========  =============================================================

The directive goes onto a copy of the conversation as one more message (``system`` by
default). The agent's configured tools are sent as they are: AutoGen cannot narrow them
for one call.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from jevqueue.host import LOCAL_MODEL_ID

__all__ = ["ClassicTurnHost", "called_names", "configured_tools", "openai_conversation"]

UNREADABLE_CALL = "<unreadable call>"


def configured_tools(agent: Any) -> list[dict[str, Any]]:
    """The tools the agent's client sends with every call (read, never changed)."""
    entries = getattr(getattr(agent, "client", None), "_config_list", None)
    if entries:
        return list(entries[0].get("tools") or ())
    config = getattr(agent, "llm_config", None)
    tools = config.get("tools") if config and hasattr(config, "get") else None
    return list(tools or ())


def openai_conversation(agent: Any, messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The messages as ``generate_oai_reply`` sends them: the system message first, each
    ``tool_responses`` message unrolled into its ``tool`` messages. Nothing is mutated."""
    out: list[dict[str, Any]] = [dict(m) for m in getattr(agent, "_oai_system_message", [])]
    for message in messages:
        responses = message.get("tool_responses")
        if responses:
            out.extend(dict(response) for response in responses)
            if message.get("role") != "tool":
                out.append({k: v for k, v in message.items() if k != "tool_responses"})
        else:
            out.append(dict(message))
    return out


def called_names(reply: Any) -> list[str]:
    """The tools a reply calls (``tool_calls``, or a legacy ``function_call``); ``[]`` for text."""
    if not isinstance(reply, Mapping):
        return []
    names: list[str] = []
    for call in reply.get("tool_calls") or ():
        function = call.get("function") if isinstance(call, Mapping) else None
        name = function.get("name") if isinstance(function, Mapping) else None
        names.append(name if isinstance(name, str) and name else UNREADABLE_CALL)
    legacy = reply.get("function_call")
    if isinstance(legacy, Mapping):
        name = legacy.get("name")
        names.append(name if isinstance(name, str) and name else UNREADABLE_CALL)
    return names


class ClassicTurnHost:
    """The host for one governed classic AutoGen reply (see the module docstring).

    Args:
        agent: The ``ConversableAgent`` whose LLM replies.
        messages: The conversation the reply function was given (never mutated).
        sender: The agent the reply goes to.
        asynchronous: Whether the chat is async (``a_generate_oai_reply``).
        directive_role: The role of the appended directive.
        interrupted: A callable returning True when the user cancelled.
    """

    def __init__(
        self,
        agent: Any,
        messages: Sequence[Mapping[str, Any]],
        sender: Any,
        *,
        asynchronous: bool,
        directive_role: str = "system",
        interrupted: Callable[[], bool] | None = None,
    ) -> None:
        self._agent = agent
        self._messages = messages
        self._sender = sender
        self._asynchronous = asynchronous
        self._directive_role = directive_role
        self._interrupted = interrupted

    def tools(self) -> list[dict[str, Any]]:
        """The tools the agent's LLM config offers."""
        return configured_tools(self._agent)

    def messages(self) -> list[dict[str, Any]]:
        """The conversation as the LLM will see it, oldest first."""
        return openai_conversation(self._agent, self._messages)

    def generate(self, *, force_tool: str | None, directive: str) -> Any:
        """Ask the agent's LLM in one of the three modes; returns the reply (or an awaitable)."""
        if force_tool is None and not directive:
            return self._reply(self._messages, {})
        messages = [*self._messages, {"role": self._directive_role, "content": directive}]
        if force_tool is not None:
            extra: dict[str, Any] = {
                "tool_choice": {"type": "function", "function": {"name": force_tool}},
                "parallel_tool_calls": False,
            }
        else:
            extra = {"tool_choice": "none"}
        return self._reply(messages, extra)

    def _reply(self, messages: Sequence[Mapping[str, Any]], extra: dict[str, Any]) -> Any:
        if self._asynchronous:
            return self._areply(messages, extra)
        _, reply = self._agent.generate_oai_reply(list(messages), self._sender, **extra)
        return reply

    async def _areply(self, messages: Sequence[Mapping[str, Any]], extra: dict[str, Any]) -> Any:
        _, reply = await self._agent.a_generate_oai_reply(list(messages), self._sender, **extra)
        return reply

    def called_tools(self, response: Any) -> list[str]:
        """The tools the reply calls, as the executor would read them."""
        return called_names(response)

    def say(self, text: str) -> dict[str, Any]:
        """A reply built locally (``jevqueue-local``); no provider call."""
        return {"content": text, "role": "assistant", "model": LOCAL_MODEL_ID}

    def say_tool_call(self, name: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """A one-call reply built locally; the executor's policy still judges it."""
        return {
            "content": None,
            "role": "assistant",
            "model": LOCAL_MODEL_ID,
            "tool_calls": [
                {
                    "id": f"jevqueue-{uuid.uuid4().hex[:12]}",
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(dict(arguments))},
                }
            ],
        }

    def interrupted(self) -> bool:
        """Whether the user cancelled; ``False`` when no callable was given."""
        return bool(self._interrupted()) if self._interrupted is not None else False
