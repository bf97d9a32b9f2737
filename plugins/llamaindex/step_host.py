"""The seven-method host over one LlamaIndex model step (``*_chat_with_tools``).

A :class:`StepHost` is built by :class:`~.governed_llm.GovernedFunctionCallingLLM` for
every call the agent makes, with the tools, history and options of that call. Its
``generate`` runs the three modes against the wrapped LLM:

=============  ==================================================================
mode           what reaches the wrapped LLM
=============  ==================================================================
force ``X``    ``_prepare_chat_with_tools(..., tool_choice="X", tool_required=True,
               allow_parallel_tool_calls=False)`` then ``chat`` — *not*
               ``chat_with_tools``, whose ``_validate_chat_with_tools_response``
               would cut a multi-call reply down to its first call before anything
               could read it back
prose          the same with ``tool_choice="none"``
passthrough    ``*_chat_with_tools`` with the caller's arguments, untouched
=============  ==================================================================

A streaming forced or prose turn is buffered: the provider's chunks are collected, the
complete reply is read back, and only then are the chunks replayed to the caller, so a
stream consumer never sees a call that the read-back blocks.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from jevqueue.host import LOCAL_MODEL_ID
from jevqueue.plugins.llamaindex._framework import (
    ChatMessage,
    ChatResponse,
    MessageRole,
    TextBlock,
    ToolCallBlock,
)

if TYPE_CHECKING:  # pragma: no cover
    from jevqueue.plugins.llamaindex.governed_llm import GovernedFunctionCallingLLM

__all__ = ["LOCAL_RAW_KEY", "StepHost", "StepReply", "local_response", "openai_messages"]

LOCAL_RAW_KEY = "jevqueue_local"
"""``response.raw[LOCAL_RAW_KEY]`` is True on a response built locally by ``say``."""


def local_response(
    text: str = "", *, tool_call: tuple[str, Mapping[str, Any]] | None = None
) -> ChatResponse:
    """A ``ChatResponse`` built locally, stamped ``raw["model"] = "jevqueue-local"``.

    Args:
        text: The message text.
        tool_call: ``(name, arguments)`` to make it call one tool, with a fresh call id.
    """
    blocks: list[Any] = [TextBlock(text=text)] if text else []
    if tool_call is not None:
        name, arguments = tool_call
        blocks.append(
            ToolCallBlock(
                tool_call_id=f"call_jevqueue_{uuid.uuid4().hex[:16]}",
                tool_name=name,
                tool_kwargs=dict(arguments),
            )
        )
    message = ChatMessage(role=MessageRole.ASSISTANT, blocks=blocks)
    return ChatResponse(
        message=message,
        delta=text,
        raw={"model": LOCAL_MODEL_ID, LOCAL_RAW_KEY: True},
        additional_kwargs={"model": LOCAL_MODEL_ID},
    )


def _message_dict(message: ChatMessage) -> dict[str, Any]:
    role = message.role.value if isinstance(message.role, MessageRole) else str(message.role)
    entry: dict[str, Any] = {"role": role, "content": message.content or ""}
    calls = [block for block in message.blocks if isinstance(block, ToolCallBlock)]
    if calls:
        entry["tool_calls"] = [
            {
                "id": call.tool_call_id,
                "type": "function",
                "function": {"name": call.tool_name, "arguments": call.tool_kwargs},
            }
            for call in calls
        ]
    call_id = message.additional_kwargs.get("tool_call_id")
    if call_id is not None:
        entry["tool_call_id"] = call_id
    return entry


def openai_messages(messages: Sequence[ChatMessage]) -> list[dict[str, Any]]:
    """LlamaIndex messages in the OpenAI form the governor reads (roles, text, calls)."""
    return [_message_dict(message) for message in messages]


def unreadable_calls(error: BaseException) -> list[str]:
    """The read-back of a reply whose calls could not be read: never a tool's name."""
    return [f"<tool calls could not be read: {type(error).__name__}>"]


@dataclass
class StepReply:
    """What one ``generate`` / ``say`` produced.

    Attributes:
        response: The complete response (for a live passthrough stream, ``None``).
        chunks: The buffered stream chunks of a governed streaming turn, in order.
        stream: The live stream of a passthrough streaming turn.
        validated: True when the wrapped LLM's own response validation already ran.
    """

    response: ChatResponse | None = None
    chunks: list[ChatResponse] = field(default_factory=list)
    stream: Any = None
    validated: bool = False


@dataclass
class StepCall:
    """The arguments of one ``*_chat_with_tools`` call, as the agent made it."""

    tools: Sequence[Any]
    user_msg: str | ChatMessage | None
    chat_history: list[ChatMessage] | None
    verbose: bool
    allow_parallel_tool_calls: bool
    tool_required: bool
    kwargs: dict[str, Any]


class StepHost:
    """The host of one governed model step; sync or async, chat or stream."""

    def __init__(
        self,
        llm: GovernedFunctionCallingLLM,
        call: StepCall,
        *,
        stream: bool,
        asynchronous: bool,
    ) -> None:
        self._llm = llm
        self._call = call
        self._stream = stream
        self._asynchronous = asynchronous

    # --- what the governor reads -------------------------------------------------------

    def tools(self) -> list[dict[str, Any]]:
        return self._llm.tool_schemas(self._call.tools)

    def messages(self) -> list[dict[str, Any]]:
        history = list(self._call.chat_history or [])
        user_msg = self._call.user_msg
        if user_msg is not None:
            history.append(_as_message(user_msg))
        return openai_messages(history)

    def interrupted(self) -> bool:
        check = self._llm.interrupted
        return bool(check()) if check is not None else False

    # --- effects ---------------------------------------------------------------------

    def generate(self, *, force_tool: str | None, directive: str) -> Any:
        if force_tool is None and not directive:
            return self._passthrough()
        return self._governed(force_tool, directive)

    def called_tools(self, reply: StepReply) -> list[str]:
        response = reply.response
        if response is None:
            return []
        try:
            calls = self._llm.inner.get_tool_calls_from_response(
                response, error_on_no_tool_call=False
            )
        except Exception as error:  # fail closed: an unreadable reply calls "something"
            return unreadable_calls(error)
        return [str(call.tool_name) for call in calls or ()]

    def say(self, text: str) -> StepReply:
        response = local_response(text)
        return StepReply(response=response, chunks=[response], validated=True)

    def say_tool_call(self, name: str, arguments: Mapping[str, Any]) -> StepReply:
        response = local_response(tool_call=(name, arguments))
        return StepReply(response=response, chunks=[response], validated=True)

    # --- the modes -------------------------------------------------------------------

    def _passthrough(self) -> Any:
        inner = self._llm.inner
        call = self._call
        arguments = {
            "user_msg": call.user_msg,
            "chat_history": call.chat_history,
            "verbose": call.verbose,
            "allow_parallel_tool_calls": call.allow_parallel_tool_calls,
            "tool_required": call.tool_required,
            **call.kwargs,
        }
        if self._asynchronous:
            return self._apassthrough(arguments)
        if self._stream:
            return StepReply(stream=inner.stream_chat_with_tools(call.tools, **arguments))
        return StepReply(response=inner.chat_with_tools(call.tools, **arguments), validated=True)

    async def _apassthrough(self, arguments: dict[str, Any]) -> StepReply:
        inner = self._llm.inner
        tools = self._call.tools
        if self._stream:
            return StepReply(stream=await inner.astream_chat_with_tools(tools, **arguments))
        return StepReply(response=await inner.achat_with_tools(tools, **arguments), validated=True)

    def _prepared(self, force_tool: str | None, directive: str) -> dict[str, Any]:
        llm = self._llm
        call = self._call
        history = list(call.chat_history or [])
        if call.user_msg is not None:
            # The directive comes after the user's message, as the newest instruction.
            history.append(_as_message(call.user_msg))
        history.append(llm.directive_message(directive))
        kwargs = dict(call.kwargs)
        kwargs.pop("tool_choice", None)
        if force_tool is not None:
            tools = llm.forced_tools(call.tools, force_tool)
            if llm.forcing == "tool_choice":
                kwargs["tool_choice"] = force_tool
            tool_required = True
        else:
            tools = call.tools if llm.forcing == "tool_choice" else []
            if llm.forcing == "tool_choice":
                kwargs["tool_choice"] = "none"
            tool_required = False
        return llm.inner._prepare_chat_with_tools_compat(
            tools,
            user_msg=None,
            chat_history=history,
            verbose=call.verbose,
            allow_parallel_tool_calls=False,
            tool_required=tool_required,
            **kwargs,
        )

    def _governed(self, force_tool: str | None, directive: str) -> Any:
        prepared = self._prepared(force_tool, directive)
        inner = self._llm.inner
        if self._asynchronous:
            return self._agoverned(prepared)
        if self._stream:
            chunks = list(inner.stream_chat(**prepared))
            return StepReply(response=chunks[-1] if chunks else None, chunks=chunks)
        return StepReply(response=inner.chat(**prepared))

    async def _agoverned(self, prepared: dict[str, Any]) -> StepReply:
        inner = self._llm.inner
        if self._stream:
            chunks = [chunk async for chunk in await inner.astream_chat(**prepared)]
            return StepReply(response=chunks[-1] if chunks else None, chunks=chunks)
        return StepReply(response=await inner.achat(**prepared))


def _as_message(message: str | ChatMessage) -> ChatMessage:
    if isinstance(message, ChatMessage):
        return message
    return ChatMessage(role=MessageRole.USER, content=message)
