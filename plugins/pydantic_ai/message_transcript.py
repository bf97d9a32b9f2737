"""What a Pydantic AI agent read, from the run's own messages: the transcript its calls are
judged with.

A run's messages (``RunContext.messages``; ``result.all_messages()``, handed back as
``message_history=`` to resume a run paused with ``DeferredToolRequests``) hold what the
model read: the user's prompts and every tool's return. :func:`message_transcript` reads
the messages before the model response that made the call — what the model had read when
it wrote the arguments — into a :class:`~jevqueue.policy.Transcript`:

* each ``UserPromptPart``'s text (a string, or each text item of a list) as what the user
  wrote; images, audio and files carry no text to trace and are skipped;
* each tool's return (``ToolReturnPart``, and a provider-side tool's
  ``NativeToolReturnPart``, that of the response that made the call included) as the
  output of that tool under its call id, trusted as the tool's declaration says (a tool
  the guard does not know, a provider's own included, is untrusted);
* system prompts, instructions, the model's own text and retry prompts are not read: a
  value only they show is ``unseen``.

The results of the other calls of the same response, which a resumed run's history holds
and the first run's did not, come after that response and never count: the paused call is
judged again with the same provenance, so the same digest, and the approval given for the
digest shown still applies.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from jevqueue.plugins.pydantic_ai._framework import (
    BaseToolCallPart,
    BaseToolReturnPart,
    ModelResponse,
    TextContent,
    UserPromptPart,
)
from jevqueue.policy import Guard, Transcript

__all__ = ["message_transcript"]


def message_transcript(guard: Guard, messages: Sequence[Any], call_id: str | None) -> Transcript:
    """What the model had read when it made the call ``call_id``.

    Args:
        guard: The guard, whose declarations say how far each tool's output is trusted.
        messages: The run's messages, oldest first.
        call_id: The call's ``tool_call_id`` (``None``: every message counts).
    """
    transcript = Transcript()
    for message in messages:
        calls = isinstance(message, ModelResponse) and _makes(message, call_id)
        for part in getattr(message, "parts", ()):
            if isinstance(part, UserPromptPart):
                for text in _texts(part.content):
                    transcript.user(text)
            elif isinstance(part, BaseToolReturnPart):
                tool = str(part.tool_name)
                transcript.output(
                    tool, part.tool_call_id or None, part.content, guard.registry.output_trust(tool)
                )
        if calls:
            break
    return transcript


def _makes(response: ModelResponse, call_id: str | None) -> bool:
    return call_id is not None and any(
        isinstance(part, BaseToolCallPart) and part.tool_call_id == call_id
        for part in response.parts
    )


def _texts(content: Any) -> Iterator[str]:
    items = [content] if isinstance(content, str) else content
    for item in items if isinstance(items, Sequence) else ():
        text = item.content if isinstance(item, TextContent) else item
        if isinstance(text, str) and text.strip():  # an empty prompt says nothing
            yield text
