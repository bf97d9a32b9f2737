"""One AgentChat model call as a jevqueue host: what the governor reads, and the three modes.

:class:`AgentChatTurnHost` is built by :class:`~.agentchat_client.GovernedChatCompletionClient`
for each ``create`` / ``create_stream`` call. ``generate`` calls the wrapped client in one
of three ways:

==========  ==========  =============================================================
force_tool  directive   the wrapped client is called with
==========  ==========  =============================================================
a name      non-empty   ``tool_choice=<that Tool>``, ``extra_create_args`` plus
                        ``parallel_tool_calls=False``, the directive appended
None        non-empty   ``tool_choice="none"``, the directive appended
None        ``""``      exactly the arguments the agent passed (the passthrough)
==========  ==========  =============================================================

The tools are always passed on unchanged (the prompt-cache prefix stays intact). The
directive goes onto a copy of the messages: as a trailing ``SystemMessage`` when the
client's ``model_info["multiple_system_messages"]`` is true, else as a ``UserMessage``
from ``"jevqueue"`` (AgentChat's clients refuse a system message after others otherwise).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jevqueue.errors import ConfigurationError
from jevqueue.plugins.autogen._agentchat_framework import (
    ChatCompletionClient,
    CreateResult,
    SystemMessage,
    UserMessage,
)
from jevqueue.plugins.autogen.agentchat_messages import (
    called_names,
    local_text,
    local_tool_call,
    openai_messages,
    tool_name,
    tool_schema,
)

__all__ = ["DIRECTIVE_SOURCE", "AgentChatTurnHost", "BufferedStream", "LiveStream"]

DIRECTIVE_SOURCE = "jevqueue"
"""The ``source`` of a directive sent as a ``UserMessage``."""


class _NamedTool:
    """A ``Tool`` that only names a schema: what ``tool_choice`` needs when the agent passed
    the tools as ``ToolSchema`` dicts (as ``AssistantAgent`` does). It never runs."""

    def __init__(self, schema: Mapping[str, Any]) -> None:
        self._schema = dict(schema)

    @property
    def name(self) -> str:
        return str(self._schema["name"])

    @property
    def description(self) -> str:
        return str(self._schema.get("description", ""))

    @property
    def schema(self) -> Any:
        return self._schema

    def args_type(self) -> Any:
        raise NotImplementedError("a tool_choice marker has no argument type")

    def return_type(self) -> Any:
        raise NotImplementedError("a tool_choice marker has no return type")

    def state_type(self) -> Any:
        return None

    def return_value_as_string(self, value: Any) -> str:
        return str(value)

    async def run_json(self, args: Any, cancellation_token: Any, call_id: str | None = None) -> Any:
        raise RuntimeError("a tool_choice marker is never run: the workbench runs the tool")

    async def save_state_json(self) -> Mapping[str, Any]:
        return {}

    async def load_state_json(self, state: Mapping[str, Any]) -> None:
        return None


@dataclass
class BufferedStream:
    """A stream consumed in full before it was read back: its chunks and final result."""

    chunks: list[Any]
    result: CreateResult


@dataclass
class LiveStream:
    """The passthrough's stream, handed to the caller unconsumed."""

    stream: AsyncIterator[Any]


class AgentChatTurnHost:
    """The host for one governed AgentChat model call (see the module docstring).

    Args:
        inner: The wrapped ``ChatCompletionClient``; it makes every provider call.
        messages: The ``LLMMessage`` s the agent passed (never mutated).
        tools: The tools the agent passed, ``Tool`` objects or ``ToolSchema`` dicts.
        call: The other keyword arguments of the call, exactly as passed.
        stream: Whether the agent called ``create_stream``.
        interrupted: A callable returning True when the user cancelled.
    """

    def __init__(
        self,
        inner: ChatCompletionClient,
        messages: Sequence[Any],
        tools: Sequence[Any],
        call: Mapping[str, Any],
        *,
        stream: bool,
        interrupted: Callable[[], bool] | None = None,
    ) -> None:
        self._inner = inner
        self._messages = messages
        self._tools = tools
        self._call = dict(call)
        self._stream = stream
        self._interrupted = interrupted
        self._schemas = [tool_schema(tool) for tool in tools]

    # --- reading ----------------------------------------------------------------------

    def tools(self) -> list[dict[str, Any]]:
        """The tools offered this call, as flat OpenAI-style schemas."""
        return list(self._schemas)

    def messages(self) -> list[dict[str, Any]]:
        """The conversation in OpenAI message form, oldest first."""
        return openai_messages(self._messages)

    # --- effects ----------------------------------------------------------------------

    def generate(self, *, force_tool: str | None, directive: str) -> Any:
        """Call the wrapped client in one of the three modes (returns an awaitable, or a
        :class:`LiveStream` for the streamed passthrough)."""
        if force_tool is None and not directive:
            arguments: dict[str, Any] = {"tools": self._tools, **self._call}
            messages = self._messages
        else:
            messages = [*self._messages, self._directive(directive)]
            extra = dict(self._call.get("extra_create_args") or {})
            if force_tool is not None:
                choice: Any = self._chosen(force_tool)
                extra["parallel_tool_calls"] = False
            else:
                choice = "none"
            arguments = {
                **self._call,
                "tools": self._tools,
                "tool_choice": choice,
                "extra_create_args": extra,
            }
            if not extra:
                arguments.pop("extra_create_args")
        if not self._stream:
            return self._inner.create(messages, **arguments)
        chunks = self._inner.create_stream(messages, **arguments)
        if force_tool is None and not directive:
            return LiveStream(chunks)
        return _consume(chunks)

    def _directive(self, text: str) -> Any:
        info = self._inner.model_info
        if info.get("multiple_system_messages"):
            return SystemMessage(content=text)
        return UserMessage(content=text, source=DIRECTIVE_SOURCE)

    def _chosen(self, name: str) -> Any:
        for tool in self._tools:
            if tool_name(tool) == name:
                return _NamedTool(tool_schema(tool)) if isinstance(tool, Mapping) else tool
        raise ConfigurationError(
            f"the governor forced {name!r}, which the agent did not offer this call "
            f"(offered: {[tool_name(tool) for tool in self._tools]})"
        )

    def called_tools(self, response: Any) -> list[str]:
        """The tools the response calls (the final ``CreateResult`` of a stream)."""
        if isinstance(response, BufferedStream):
            return called_names(response.result)
        return called_names(response)

    def say(self, text: str) -> Any:
        """A text ``CreateResult`` built locally (``jevqueue-local``); no provider call."""
        return local_text(text)

    def say_tool_call(self, name: str, arguments: Mapping[str, Any]) -> Any:
        """A one-call ``CreateResult`` built locally; the workbench judges the call."""
        return local_tool_call(name, arguments)

    def interrupted(self) -> bool:
        """True when the call's cancellation token is cancelled or ``interrupted()`` says so."""
        token = self._call.get("cancellation_token")
        if token is not None and token.is_cancelled():
            return True
        return bool(self._interrupted()) if self._interrupted is not None else False


async def _consume(chunks: AsyncIterator[Any]) -> BufferedStream:
    """Read a stream to its end: nothing of a constrained turn reaches the agent unread."""
    seen: list[Any] = []
    result: CreateResult | None = None
    async for chunk in chunks:
        if isinstance(chunk, CreateResult):
            result = chunk
        else:
            seen.append(chunk)
    if result is None:
        raise RuntimeError("the model client's stream ended without a CreateResult")
    return BufferedStream(seen, result)
