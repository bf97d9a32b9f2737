"""The model the demo plays on embedded defaults: it answers from the script and checks
that each request carries the constraint the governor chose.

It sits behind the real OpenAI-compatible host, at the HTTP boundary, so everything in
between (request bodies, ``tool_choice``, the read-back) is the code a real endpoint
meets. It fails loudly: a request nobody scripted, a scripted answer the request forbids
(a tool call under ``tool_choice: "none"``, another tool than the forced one), or an
answer left over at the end of a turn raises :class:`ScriptMismatchError`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import Any

from jevqueue.demo.script import ModelReply

__all__ = ["SCRIPTED_MODEL_ID", "ScriptMismatchError", "ScriptedDemoModel"]

SCRIPTED_MODEL_ID = "scripted-demo-model"


class ScriptMismatchError(AssertionError):
    """The session went somewhere its script did not foresee."""


class ScriptedDemoModel:
    """Answers chat-completions requests from a queue of :class:`ModelReply` objects."""

    def __init__(self) -> None:
        self._replies: deque[ModelReply] = deque()

    def expect(self, replies: Iterable[ModelReply]) -> None:
        """Queue the answers for the next turn; the previous turn's must all be used."""
        self.assert_complete()
        self._replies.extend(replies)

    def assert_complete(self) -> None:
        """Raise when scripted answers were never asked for."""
        if self._replies:
            left = ", ".join(_describe(reply) for reply in self._replies)
            self._replies.clear()
            raise ScriptMismatchError(f"the model was never asked for: {left}")

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        """Answer one request body with the next scripted reply, as a chat completion."""
        # Imported here: the demo's data and runner stay importable without the extra.
        from jevqueue.plugins.openai import text_completion, tool_call_completion

        if not self._replies:
            raise ScriptMismatchError(
                f"unexpected provider call (tool_choice={body.get('tool_choice', 'unset')!r}): "
                "the script has no answer left for this turn"
            )
        reply = self._replies.popleft()
        choice = body.get("tool_choice")
        if isinstance(choice, dict):
            forced = choice.get("function", {}).get("name")
            if reply.tool != forced:
                raise ScriptMismatchError(
                    f"the request forces {forced!r} but the script answers {_describe(reply)}"
                )
        elif choice == "none" and reply.tool is not None:
            raise ScriptMismatchError(
                f"the request forbids tool calls but the script answers {_describe(reply)}"
            )
        completion: dict[str, Any]
        if reply.tool is None:
            completion = text_completion(reply.text, model=SCRIPTED_MODEL_ID)
        else:
            completion = tool_call_completion(reply.tool, reply.arguments, model=SCRIPTED_MODEL_ID)
        return completion


def _describe(reply: ModelReply) -> str:
    return f"a call of {reply.tool}" if reply.tool else f"the text {reply.text[:40]!r}"
