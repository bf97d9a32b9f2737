"""What the agent read, from a chat-completions conversation: the core
:class:`~jevqueue.policy.Transcript` a call's provenance is labelled with.

The ``messages`` of a chat-completions request are what the model read before it
answered. :func:`transcript_of` reads the messages *before* the assistant message that
made the calls (what the model had read when it wrote the arguments; the results appended
after it cannot have steered them), so running the same response again — with the
approval records a call waited for, after the caller appended the first run's ``tool``
messages — labels each call as the first run did, and the approval still matches. Each
message is read by its role:

* ``user`` — what the user wrote: its text, or each ``text`` part of a list; other parts
  (images, audio, files) carry no text to trace and are skipped;
* ``tool`` (and the legacy ``function``) — a tool output, under the tool's name (the
  ``name`` the assistant's call gave for its ``tool_call_id``, or the message's own) and
  that id, trusted as the tool's :attr:`~jevqueue.policy.ToolSpec.output_trust` says
  (untrusted when the tool has no declaration). ``text`` parts are read as text, media
  parts skipped, any other part read as it is;
* ``assistant`` — the model's own words: skipped (a value only the model wrote is
  ``unseen``);
* ``system`` and ``developer`` — the developer's, not the user's: skipped, so a value they
  name is ``unseen`` unless an output shows it too, and then it is ``untrusted``;
* any other role, or an item that is no message — read as an untrusted output: what
  cannot be placed is trusted no further.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from jevqueue.policy import ToolRegistry, Transcript
from jevqueue.policy._registry import UNTRUSTED

__all__ = ["transcript_of"]

_MEDIA_PARTS = frozenset({"image", "image_url", "audio", "input_audio", "file", "video"})
_OWN_ROLES = frozenset({"assistant", "system", "developer"})
_UNKNOWN_SOURCE = "an unknown message"


def transcript_of(
    messages: Sequence[Any],
    registry: ToolRegistry,
    *,
    message: Mapping[str, Any] | None = None,
    call_id: str | None = None,
) -> Transcript:
    """What the model had read when it made a call.

    Args:
        messages: The conversation, oldest first, in OpenAI message form.
        registry: The tools' declarations (each output is trusted as its tool declares).
        message: The assistant message that made the call (``choices[0].message``).
        call_id: The call's ``tool_calls[i].id``.

    Returns:
        A new transcript of the messages before the assistant message that is
        ``message`` or holds ``call_id`` (of all of them when none is); empty when they
        hold nothing the model read.
    """
    read = _before([_plain(item) for item in messages], message, call_id)
    names = _call_names(read)
    transcript = Transcript()
    for item in read:
        role = item.get("role") if isinstance(item, Mapping) else None
        if role in _OWN_ROLES:
            continue
        if role == "user":
            for text in _texts(item.get("content")):
                transcript.user(text)
            continue
        if role in ("tool", "function"):
            tool_call_id = item.get("tool_call_id")
            tool_call_id = tool_call_id if isinstance(tool_call_id, str) and tool_call_id else None
            name = names.get(tool_call_id or "") or item.get("name")
            name = name if isinstance(name, str) and name else _UNKNOWN_SOURCE
            transcript.output(
                name, tool_call_id, _output(item.get("content")), registry.output_trust(name)
            )
            continue
        transcript.output(_UNKNOWN_SOURCE, None, _unknown(item), UNTRUSTED)
    return transcript


def _plain(item: Any) -> Any:
    """A message as a mapping: an SDK's message object (pydantic) as its dump."""
    if isinstance(item, Mapping):
        return item
    dump = getattr(item, "model_dump", None)
    if callable(dump):
        try:
            data = dump(mode="json", exclude_none=True)
        except Exception:  # read as an untrusted output instead
            return item
        if isinstance(data, Mapping):
            return data
    return item


def _before(
    messages: Sequence[Any], message: Mapping[str, Any] | None, call_id: str | None
) -> Sequence[Any]:
    for index, item in enumerate(messages):
        if not isinstance(item, Mapping) or item.get("role") != "assistant":
            continue
        if (message is not None and (item is message or item == message)) or (
            call_id is not None and call_id in _call_ids(item)
        ):
            return messages[:index]
    return messages


def _call_ids(message: Mapping[str, Any]) -> Iterator[str]:
    calls = message.get("tool_calls")
    for call in calls if isinstance(calls, list) else ():
        value = call.get("id") if isinstance(call, Mapping) else None
        if isinstance(value, str):
            yield value


def _call_names(messages: Sequence[Any]) -> dict[str, str]:
    names: dict[str, str] = {}
    for item in messages:
        if not isinstance(item, Mapping) or item.get("role") != "assistant":
            continue
        calls = item.get("tool_calls")
        for call in calls if isinstance(calls, list) else ():
            function = call.get("function") if isinstance(call, Mapping) else None
            name = function.get("name") if isinstance(function, Mapping) else None
            call_id = call.get("id") if isinstance(call, Mapping) else None
            if isinstance(call_id, str) and isinstance(name, str) and name:
                names.setdefault(call_id, name)
    return names


def _texts(content: Any) -> list[str]:
    """The text of what the user wrote: the string, or each ``text`` part of a list."""
    if isinstance(content, str):
        return [content]
    texts = []
    for part in content if isinstance(content, list) else ():
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, Mapping) and part.get("type") == "text":
            text = part.get("text")
            if isinstance(text, str):
                texts.append(text)
    return texts


def _output(content: Any) -> Any:
    """A tool output as the transcript reads it: text (JSON text is parsed there), or the
    list of its parts — text as text, media skipped, any other part as it is."""
    if not isinstance(content, list):
        return content
    parts: list[Any] = []
    for part in content:
        if isinstance(part, Mapping):
            kind = part.get("type")
            if kind == "text" and isinstance(part.get("text"), str):
                parts.append(part["text"])
            elif kind not in _MEDIA_PARTS:
                parts.append(dict(part))
        else:
            parts.append(part)
    return parts[0] if len(parts) == 1 else parts


def _unknown(item: Any) -> Any:
    if isinstance(item, Mapping):
        content = item.get("content")
        return _output(content) if content is not None else dict(item)
    return item
