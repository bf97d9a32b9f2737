"""What a LlamaIndex agent read, from its own memory: the transcript its calls are judged with.

A workflow agent keeps what it read in the workflow's store: the chat ``memory`` (the
user's messages, and earlier runs' tool calls and results) and, for the run in progress,
the function agent's ``scratchpad`` (the model's tool calls and their results) or the ReAct
agent's ``current_reasoning`` (its actions and observations). The store survives
``ctx.to_dict()``, so a run restored with ``Context.from_dict`` — in another process too —
reads the same history: the paused call is judged again with the same
:class:`~jevqueue.policy.Provenance`, so the same action digest, and the approval given for
the digest shown at the pause still applies.

:func:`memory_transcript` reads that history into a :class:`~jevqueue.policy.Transcript`:

* each user message, as what the user wrote;
* each tool result, as the output of the tool the model called with that id (trusted as
  the tool's declaration says; a tool the guard does not know is untrusted), and each
  ReAct observation as the output of the action before it;
* only what came before the model's message that made the call: the results of the other
  calls of its batch, read after it was made, never count — on the first run or on resume.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from jevqueue.plugins.llamaindex._framework import (
    ActionReasoningStep,
    ChatMessage,
    MessageRole,
    ObservationReasoningStep,
    ToolCallBlock,
)
from jevqueue.policy import Guard, Transcript

__all__ = ["HISTORY_KEYS", "memory_transcript"]

HISTORY_KEYS = ("scratchpad", "current_reasoning")
"""The store keys of a run in progress: ``FunctionAgent.scratchpad_key`` and
``ReActAgent.reasoning_key`` as LlamaIndex names them by default."""

_UNNAMED = "an unnamed tool"


async def memory_transcript(
    ctx: Any, guard: Guard, call_id: str | None, keys: Iterable[str] = HISTORY_KEYS
) -> Transcript | None:
    """What the agent had read when the model made the call ``call_id``.

    Args:
        ctx: The workflow ``Context`` the tool was handed.
        guard: The guard, whose declarations say how far each tool's output is trusted.
        call_id: The model's id of the call (``None``: everything read so far counts).
        keys: The store keys of the run in progress (the agent's scratchpad or reasoning).

    Returns:
        The transcript; ``None`` when the workflow keeps no agent memory (a workflow of
        your own), so the guard's own transcript of the task applies.
    """
    store = getattr(ctx, "store", None)
    if store is None:
        return None
    memory = await store.get("memory", default=None)
    if memory is None:
        return None
    messages: list[Any] = list(await memory.aget_all())
    for key in keys:
        messages.extend(await store.get(key, default=None) or ())
    return _transcript(guard, _before_call(messages, call_id))


def _before_call(history: Sequence[Any], call_id: str | None) -> Sequence[Any]:
    """The history up to the model's message that made ``call_id`` (all of it if none did)."""
    if call_id is not None:
        for index in range(len(history) - 1, -1, -1):
            item = history[index]
            if isinstance(item, ChatMessage) and call_id in _calls(item):
                return history[:index]
    return history


def _transcript(guard: Guard, history: Sequence[Any]) -> Transcript:
    transcript = Transcript()
    names: dict[str, str] = {}
    action = _UNNAMED
    for item in history:
        if isinstance(item, ChatMessage):
            names.update(_calls(item))
            text = item.content or ""
            if item.role == MessageRole.USER and text.strip():  # an empty one says nothing
                transcript.user(text)
            elif item.role == MessageRole.TOOL:
                given = item.additional_kwargs.get("tool_call_id")
                called = None if given is None else str(given)
                tool = names.get(called or "", _UNNAMED)
                transcript.output(tool, called, text, guard.registry.output_trust(tool))
        elif isinstance(item, ActionReasoningStep):
            action = str(item.action)
        elif isinstance(item, ObservationReasoningStep):
            transcript.output(action, None, item.observation, guard.registry.output_trust(action))
    return transcript


def _calls(message: ChatMessage) -> dict[str, str]:
    """The tool calls a message makes: call id -> tool name (blocks, or the older
    ``additional_kwargs["tool_calls"]`` of some integrations)."""
    if message.role != MessageRole.ASSISTANT:
        return {}
    calls = {
        str(block.tool_call_id): str(block.tool_name)
        for block in message.blocks
        if isinstance(block, ToolCallBlock) and block.tool_call_id is not None
    }
    for call in message.additional_kwargs.get("tool_calls") or ():
        function = _field(call, "function")
        identifier, name = _field(call, "id"), _field(function, "name")
        if identifier is not None and name is not None:
            calls.setdefault(str(identifier), str(name))
    return calls


def _field(value: Any, name: str) -> Any:
    return value.get(name) if isinstance(value, dict) else getattr(value, name, None)
