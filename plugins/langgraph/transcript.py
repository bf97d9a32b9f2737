"""What the agent read, from a LangGraph state's messages: the core
:class:`~jevqueue.policy.Transcript` a call's provenance is labelled with.

The state's messages are what the agent read, and they are checkpointed: a transcript
built from them labels a call the same way in the run that paused and in the run that
resumes it, in this process or another, so the digest an approval was given for still
matches. :func:`transcript_of` reads the messages *before* the ``AIMessage`` that proposed
the call (what the model had read when it wrote the arguments; a result that came back
later cannot have steered it), each message by its kind:

* ``HumanMessage`` — what the user wrote: its text, or each text block of a list;
  other blocks (images, audio, files) carry no text to trace and are skipped;
* ``ToolMessage`` (and the legacy ``FunctionMessage``) — a tool output, under its tool's
  name (``ToolMessage.name``, else the name the proposing call gave) and its
  ``tool_call_id``, trusted as the tool's :attr:`~jevqueue.policy.ToolSpec.output_trust`
  says (untrusted when the tool has no declaration). Text blocks are read as text, other
  blocks as the structure they are (media blocks are skipped). A refusal the plugin wrote
  itself (``status="error"`` with a ``jevqueue`` artifact saying nothing ran) is no tool
  output and is skipped;
* ``AIMessage`` — the model's own words: skipped (a value only the model wrote is
  ``unseen``);
* ``SystemMessage`` — the developer's, not the user's: skipped, so a value it names is
  ``unseen`` unless an output shows it too, and then it is ``untrusted``: an approval is
  asked rather than a value waved through because an instruction also mentions it;
* anything else (a message of another kind, a dict that is no message) — read as an
  untrusted output: what cannot be placed is trusted no further.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from jevqueue.plugins.langgraph._framework import BaseMessage, convert_to_messages
from jevqueue.policy import ToolRegistry, Transcript
from jevqueue.policy._registry import UNTRUSTED

__all__ = ["state_messages", "transcript_of"]

_MEDIA_BLOCKS = frozenset({"image", "image_url", "audio", "input_audio", "file", "video"})
_KINDS = {
    "human": "user",
    "HumanMessageChunk": "user",
    "tool": "output",
    "ToolMessageChunk": "output",
    "function": "output",
    "FunctionMessageChunk": "output",
    "ai": "own",
    "AIMessageChunk": "own",
    "system": "own",
    "SystemMessageChunk": "own",
    "remove": "own",
}
_ROLES = {
    "user": "user",
    "human": "user",
    "assistant": "own",
    "ai": "own",
    "system": "own",
    "developer": "own",
}
_UNKNOWN_SOURCE = "an unknown message"


def state_messages(state: Any, messages_key: str = "messages") -> list[Any] | None:
    """The messages of a graph state (a mapping, an object, or the list itself); ``None``
    when the state holds none (a bare list of tool calls)."""
    if isinstance(state, Mapping):
        messages = state.get(messages_key)
    elif isinstance(state, list):
        messages = state
    else:
        messages = getattr(state, messages_key, None)
    if not isinstance(messages, list):
        return None
    if messages and all(
        isinstance(item, Mapping) and item.get("type") == "tool_call" for item in messages
    ):
        return None
    return messages


def transcript_of(
    messages: Sequence[Any], registry: ToolRegistry, call_id: str | None = None
) -> Transcript:
    """What the agent had read when it proposed the call ``call_id``.

    Args:
        messages: The state's messages, oldest first.
        registry: The tools' declarations (each output is trusted as its tool declares).
        call_id: The call judged: the messages before the ``AIMessage`` that proposed it
            are read (all of them when none did).

    Returns:
        A new transcript; empty when the messages hold nothing the agent read.
    """
    read = _before([_message(item) for item in messages], call_id)
    names = _call_names(read)
    transcript = Transcript()
    for message in read:
        kind = _kind(message)
        if kind == "user":
            for text in _texts(message.content):
                transcript.user(text)
        elif kind == "output":
            if _own_refusal(message):
                continue
            tool_call_id = getattr(message, "tool_call_id", None)
            tool_call_id = tool_call_id if isinstance(tool_call_id, str) and tool_call_id else None
            name = getattr(message, "name", None) or names.get(tool_call_id or "")
            name = str(name) if name else _UNKNOWN_SOURCE
            transcript.output(
                name, tool_call_id, _output(message.content), registry.output_trust(name)
            )
        elif kind == "unknown":
            transcript.output(_UNKNOWN_SOURCE, None, _unknown(message), UNTRUSTED)
    return transcript


def _before(messages: Sequence[Any], call_id: str | None) -> Sequence[Any]:
    if call_id is None:
        return messages
    for index, message in enumerate(messages):
        if _kind(message) == "own" and call_id in _call_ids(message):
            return messages[:index]
    return messages


def _message(item: Any) -> Any:
    """A message as LangGraph's ``add_messages`` reads an item of the list (a dict, a
    string, a tuple); the item itself when it is none."""
    if isinstance(item, BaseMessage):
        return item
    try:
        (message,) = convert_to_messages([item])
    except Exception:  # not a message: read as an untrusted output
        return item
    return message


def _kind(message: Any) -> str:
    """``user``, ``output``, ``own`` (the model's or the developer's) or ``unknown``."""
    if not isinstance(message, BaseMessage):
        return "unknown"
    if message.type in ("chat", "ChatMessageChunk"):
        # A role the framework does not name is read as an output: trusted no further.
        return _ROLES.get(str(getattr(message, "role", "")).lower(), "output")
    return _KINDS.get(message.type, "unknown")


def _call_ids(message: Any) -> Iterator[str]:
    for attribute in ("tool_calls", "invalid_tool_calls"):
        for call in getattr(message, attribute, None) or ():
            value = call.get("id") if isinstance(call, Mapping) else None
            if isinstance(value, str):
                yield value


def _call_names(messages: Sequence[Any]) -> dict[str, str]:
    names: dict[str, str] = {}
    for message in messages:
        for attribute in ("tool_calls", "invalid_tool_calls"):
            for call in getattr(message, attribute, None) or ():
                if not isinstance(call, Mapping):
                    continue
                call_id, name = call.get("id"), call.get("name")
                if isinstance(call_id, str) and isinstance(name, str) and name:
                    names.setdefault(call_id, name)
    return names


def _texts(content: Any) -> list[str]:
    """The text of what the user wrote: the string, or each text block of a list."""
    if isinstance(content, str):
        return [content]
    texts = []
    for block in content if isinstance(content, list) else ():
        if isinstance(block, str):
            texts.append(block)
        elif isinstance(block, Mapping) and block.get("type") == "text":
            text = block.get("text")
            if isinstance(text, str):
                texts.append(text)
    return texts


def _output(content: Any) -> Any:
    """A tool output as the transcript reads it: text (JSON text is parsed there), or the
    list of its blocks — text as text, media skipped, any other block as it is."""
    if not isinstance(content, list):
        return content
    parts: list[Any] = []
    for block in content:
        if isinstance(block, Mapping):
            kind = block.get("type")
            if kind == "text" and isinstance(block.get("text"), str):
                parts.append(block["text"])
            elif kind == "json" and "json" in block:
                parts.append(block["json"])
            elif kind not in _MEDIA_BLOCKS:
                parts.append(dict(block))
        else:
            parts.append(block)
    return parts[0] if len(parts) == 1 else parts


def _own_refusal(message: Any) -> bool:
    """A ``ToolMessage`` the plugin wrote for a call it did not run."""
    artifact = getattr(message, "artifact", None)
    if getattr(message, "status", None) != "error" or not isinstance(artifact, Mapping):
        return False
    mark = artifact.get("jevqueue")
    return isinstance(mark, Mapping) and mark.get("executed") is False


def _unknown(message: Any) -> Any:
    content = getattr(message, "content", None)
    if content is not None:
        return _output(content)
    if isinstance(message, Mapping):
        return {str(key): value for key, value in message.items()}
    return str(message)
