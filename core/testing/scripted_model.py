"""A scripted provider: a list of expected calls, each with its canned response.

:class:`ScriptedModel` stands where the provider would be. Every call must match the next
:class:`Step` — which tool was forced, which directive was sent — or it raises
:class:`ScriptedModelError` at once, naming the step and the difference. A test ends with
:meth:`ScriptedModel.assert_complete`, which fails when a step was never used. Nothing is
mocked: the code under test makes its real calls, and the script answers them.

Example:
    >>> from jevqueue.testing import ScriptedModel, Step, text_response, tool_call_response
    >>> model = ScriptedModel([
    ...     Step(tool_call_response("read_file", {"path": "a.txt"}), force_tool="read_file"),
    ...     Step(text_response("Done."), force_tool=None, directive=""),
    ... ])
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "ANY",
    "ModelCall",
    "ScriptedModel",
    "ScriptedModelError",
    "Step",
    "text_response",
    "tool_call_response",
]


class _Anything:
    """Matches any value in a :class:`Step` expectation."""

    def __repr__(self) -> str:
        return "ANY"


ANY: Any = _Anything()
"""Put in a :class:`Step` field to accept any value there."""


class ScriptedModelError(AssertionError):
    """A call the script did not expect, or a script left unfinished.

    An ``AssertionError``, so test runners report it as a failed expectation.
    """


@dataclass(frozen=True)
class ModelCall:
    """One request the scripted provider received.

    Attributes:
        messages: The exact list sent (the host's copy, directive included when non-empty).
        tools: The tools offered.
        force_tool: The tool the provider was constrained to call, or ``None``.
        directive: The directive sent (``""`` on the passthrough).
    """

    messages: Sequence[Mapping[str, Any]]
    tools: Sequence[Mapping[str, Any]]
    force_tool: str | None
    directive: str


@dataclass(frozen=True)
class Step:
    """One expected provider call and its response.

    Args:
        response: What the provider returns, or a callable of the :class:`ModelCall` that
            builds it (a provider that reacts to the request).
        force_tool: The expected forced tool (``None`` for an unconstrained call), or
            :data:`ANY`.
        directive: The expected directive: an exact string, :data:`ANY`, or a predicate
            ``str -> bool``.
        label: A name for the step in failure messages.
    """

    response: Any
    force_tool: str | None = ANY
    directive: str | Callable[[str], bool] = ANY
    label: str = ""

    def mismatch(self, call: ModelCall) -> str | None:
        """Why ``call`` does not match this step, or ``None`` when it does."""
        if self.force_tool is not ANY and call.force_tool != self.force_tool:
            return f"force_tool={call.force_tool!r}, expected {self.force_tool!r}"
        expected = self.directive
        if expected is ANY:
            return None
        if callable(expected):
            if not expected(call.directive):
                return f"directive={call.directive!r} does not satisfy {expected!r}"
        elif call.directive != expected:
            return f"directive={call.directive!r}, expected {expected!r}"
        return None

    def respond(self, call: ModelCall) -> Any:
        """The response to ``call``."""
        return self.response(call) if callable(self.response) else self.response


@dataclass
class ScriptedModel:
    """A provider that answers from a script and fails loudly on anything unscripted.

    Args:
        steps: The expected calls, in order. A bare response (not a :class:`Step`) is a
            step that accepts any call.

    Attributes:
        requests: Every call received, in order, matched or not (what it was asked).
        responses: What it answered, in order.
    """

    steps: Sequence[Step | Any]
    requests: list[ModelCall] = field(default_factory=list)
    responses: list[Any] = field(default_factory=list, init=False)
    _position: int = field(default=0, init=False, repr=False)

    def __post_init__(self) -> None:
        self.steps = [step if isinstance(step, Step) else Step(step) for step in self.steps]

    @property
    def remaining(self) -> list[Step]:
        """The steps not used yet."""
        return list(self.steps[self._position :])

    @property
    def calls(self) -> list[ModelCall]:
        """Deprecated spelling of :attr:`requests`."""
        warnings.warn(
            "ScriptedModel.calls is deprecated: read ScriptedModel.requests",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.requests

    def __call__(self, call: ModelCall) -> Any:
        """Answer ``call`` with the next step's response.

        Raises:
            ScriptedModelError: No step is left, or the call does not match the next step.
        """
        self.requests.append(call)
        if self._position >= len(self.steps):
            raise ScriptedModelError(
                f"unexpected provider call #{len(self.requests)} (force_tool={call.force_tool!r}, "
                f"directive={call.directive!r}): all {len(self.steps)} scripted steps are used. "
                "Add a Step for it, or find out why the code under test called the provider"
            )
        step = self.steps[self._position]
        problem = step.mismatch(call)
        name = step.label or f"step {self._position + 1}"
        if problem is not None:
            raise ScriptedModelError(
                f"provider call #{len(self.requests)} does not match {name}: {problem}"
            )
        self._position += 1
        response = step.respond(call)
        self.responses.append(response)
        return response

    def assert_complete(self) -> None:
        """Fail unless every scripted step was used.

        Raises:
            ScriptedModelError: Naming the unused steps.
        """
        if self._position < len(self.steps):
            unused = [
                step.label or f"step {self._position + index + 1}"
                for index, step in enumerate(self.remaining)
            ]
            raise ScriptedModelError(
                f"{len(unused)} scripted step(s) never used: {', '.join(unused)} "
                f"({len(self.requests)} provider call(s) were made)"
            )


def text_response(text: str, *, model: str = "scripted-model") -> dict[str, Any]:
    """An OpenAI chat-completion body whose message is ``text`` and calls no tool."""
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
            }
        ],
    }


def tool_call_response(
    *calls: str | tuple[str, Mapping[str, Any]], model: str = "scripted-model"
) -> dict[str, Any]:
    """An OpenAI chat-completion body calling each of ``calls`` (a name, or name and arguments).

    ``tool_call_response()`` with no call is a response with ``tool_calls: []``;
    two calls make a parallel call.
    """
    tool_calls = []
    for index, call in enumerate(calls):
        name, arguments = (call, {}) if isinstance(call, str) else call
        tool_calls.append(
            {
                "id": f"call_{index}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(dict(arguments))},
            }
        )
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": None, "tool_calls": tool_calls},
                "finish_reason": "tool_calls",
            }
        ],
    }
