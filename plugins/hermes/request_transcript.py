"""What a Hermes agent read, from the model request itself: the transcript its calls are
judged with.

Hermes fires ``pre_api_request`` before each model call with the messages it sends
(``request_messages``) and that call's ``api_request_id``; the ``pre_tool_call`` hook of
every call the reply makes carries the same id. Those messages are what the model had read
when it wrote the calls' arguments, whatever process holds the conversation: a session
interrupted and resumed later (``run_conversation(..., conversation_history=...)``, a
gateway that reloads the session) sends the same history, so a call made again is judged
with the same provenance and an approval given for the digest shown still applies.

:func:`request_transcript` reads them into a :class:`~jevqueue.policy.Transcript`, each
message by its role:

* ``user`` — what the user wrote: its text, or each ``text`` part of a list (images and
  other media carry no text to trace). A context-compaction summary, which Hermes sends as
  a user (or assistant) message, is not the user's: it retells earlier turns, tool outputs
  included, so it is read as an untrusted output of :data:`COMPACTION`;
* ``tool`` — the output of the tool the assistant's call with that ``tool_call_id`` named,
  under that id, trusted as the tool's declaration says (a tool the guard does not know is
  untrusted);
* ``assistant`` and ``system`` — the model's own words and the agent's instructions: not
  read (a value only they show is ``unseen``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from jevqueue.plugins.hermes._framework import ContextCompressor
from jevqueue.policy import UNTRUSTED, Guard, Transcript

__all__ = ["COMPACTION", "request_transcript"]

COMPACTION = "context compaction"
"""The source named for a compaction summary: Hermes' retelling of earlier turns."""

_UNNAMED = "an unnamed tool"
_MEDIA = frozenset({"image", "image_url", "input_image", "audio", "input_audio", "file", "video"})


def request_transcript(guard: Guard, messages: Sequence[Any]) -> Transcript:
    """What the model read in one request's ``messages`` (OpenAI chat form, oldest first).

    Args:
        guard: The guard, whose declarations say how far each tool's output is trusted.
        messages: The request's messages, as ``pre_api_request`` shows them.
    """
    names = _call_names(messages)
    transcript = Transcript()
    for message in messages:
        if not isinstance(message, Mapping):
            continue
        role, content = message.get("role"), message.get("content")
        if role in ("user", "assistant") and _compacted(message):
            transcript.output(COMPACTION, None, _output(content), UNTRUSTED)
        elif role == "user":
            for text in _texts(content):
                transcript.user(text)
        elif role == "tool":
            called = message.get("tool_call_id")
            called = str(called) if called else None
            tool = names.get(called or "") or str(message.get("name") or _UNNAMED)
            transcript.output(tool, called, _output(content), guard.registry.output_trust(tool))
    return transcript


def _compacted(message: Mapping[str, Any]) -> bool:
    if message.get("_compressed_summary"):
        return True
    try:
        return bool(ContextCompressor._is_context_summary_content(message.get("content")))
    except Exception:  # a Hermes without the check: its summaries' prefix
        return "".join(_texts(message.get("content"))).lstrip().startswith("[CONTEXT")


def _call_names(messages: Sequence[Any]) -> dict[str, str]:
    names: dict[str, str] = {}
    for message in messages:
        if not isinstance(message, Mapping) or message.get("role") != "assistant":
            continue
        for call in message.get("tool_calls") or ():
            function = call.get("function") if isinstance(call, Mapping) else None
            name = function.get("name") if isinstance(function, Mapping) else None
            identifier = call.get("id") if isinstance(call, Mapping) else None
            if identifier and isinstance(name, str) and name:
                names.setdefault(str(identifier), name)
    return names


def _texts(content: Any) -> Iterator[str]:
    parts = [content] if isinstance(content, str) else content
    for part in parts if isinstance(parts, list) else ():
        text = part.get("text") if isinstance(part, Mapping) else part
        if isinstance(text, str) and text.strip():  # an empty message says nothing
            yield text


def _output(content: Any) -> Any:
    """A tool output as the transcript reads it: text (JSON text is parsed there), or its
    parts, media left out."""
    if not isinstance(content, list):
        return content
    parts = [
        part.get("text", part) if isinstance(part, Mapping) and part.get("type") == "text" else part
        for part in content
        if not (isinstance(part, Mapping) and part.get("type") in _MEDIA)
    ]
    return parts[0] if len(parts) == 1 else parts
