"""A scripted CrewAI LLM for tests: the provider boundary, with no network.

:class:`ScriptedLLM` is a real ``BaseLLM``: hand it to an ``Agent`` (directly or inside a
:class:`~jevqueue.plugins.crewai.GovernedLLM`) and a real ``Crew`` runs against it. Each
call consumes the next scripted step and is recorded as a :class:`LLMRequest` (a copy of
the messages and tools exactly as they reached the provider boundary, plus the
:class:`~jevqueue.plugins.crewai.ToolConstraint` published for it). A call beyond the
script fails loudly — and is also remembered, because CrewAI may catch and retry
exceptions — and :meth:`ScriptedLLM.assert_complete` fails on an unexpected call or an
unconsumed step::

    llm = ScriptedLLM([tool_call("get_weather", {"city": "Lisbon"}), "Sunny in Lisbon."])
    ...
    crew.kickoff()
    llm.assert_complete()

A step is a reply — a ``str`` final answer, one tool call as :func:`tool_call` builds it,
or a list of them (parallel calls) — an exception to raise, or a callable
``(LLMRequest) -> reply``. With ``native=False``
the LLM reports no native function calling, so CrewAI runs the agent in ReAct text mode;
script text replies (:func:`react_action`, :func:`react_answer`) for that mode.
"""

from __future__ import annotations

import copy
import json
import threading
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from crewai.llms.base_llm import BaseLLM
from jevqueue.plugins.crewai.turn import ToolConstraint, current_tool_constraint
from pydantic import ConfigDict, PrivateAttr

__all__ = [
    "LLMRequest",
    "ScriptedLLM",
    "UnexpectedModelCallError",
    "react_action",
    "react_answer",
    "tool_call",
]


class UnexpectedModelCallError(AssertionError):
    """The scripted LLM was called with no step left."""


def tool_call(
    name: str, arguments: Mapping[str, Any], *, call_id: str | None = None
) -> dict[str, Any]:
    """One native tool call in the OpenAI shape CrewAI's executor reads."""
    return {
        "id": call_id or f"call_{uuid.uuid4().hex[:12]}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(dict(arguments))},
    }


def react_action(
    name: str, arguments: Mapping[str, Any], thought: str = "I should use a tool."
) -> str:
    """A ReAct text reply that calls ``name`` (for ``native=False``)."""
    return f"Thought: {thought}\nAction: {name}\nAction Input: {json.dumps(dict(arguments))}"


def react_answer(text: str, thought: str = "I now know the final answer.") -> str:
    """A ReAct text reply that gives the final answer (for ``native=False``)."""
    return f"Thought: {thought}\nFinal Answer: {text}"


@dataclass(frozen=True)
class LLMRequest:
    """One call that reached the scripted provider boundary.

    Attributes:
        messages: A deep copy of the messages as passed.
        tools: A deep copy of the tool schemas passed, or ``None``.
        tool_names: The names of those tools.
        constraint: The tool constraint published by a governed LLM, if any.
        available_functions: The names of the functions passed, or ``None``.
        stop: The stop words in force for the call.
    """

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None
    tool_names: tuple[str, ...]
    constraint: ToolConstraint | None
    available_functions: tuple[str, ...] | None
    stop: tuple[str, ...]


def _name(tool: Mapping[str, Any]) -> str:
    function = tool.get("function")
    if isinstance(function, Mapping):
        return str(function.get("name"))
    return str(tool.get("name"))


Step = Any  # a reply, or a callable (LLMRequest) -> reply


class ScriptedLLM(BaseLLM):
    """A CrewAI ``BaseLLM`` that answers from a script and records every call.

    Args:
        steps: The replies, in order.
        native: Whether the LLM reports native function calling (``False``: ReAct mode).
        model: The model id it reports.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    native: bool = True

    _steps: list[Step] = PrivateAttr(default_factory=list)
    _requests: list[LLMRequest] = PrivateAttr(default_factory=list)
    _responses: list[Any] = PrivateAttr(default_factory=list)
    _unexpected: list[LLMRequest] = PrivateAttr(default_factory=list)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    def __init__(
        self,
        steps: Sequence[Step] = (),
        *,
        native: bool = True,
        model: str = "scripted-model",
        **data: Any,
    ) -> None:
        super().__init__(model=model, native=native, provider="scripted", **data)
        self._steps = list(steps)

    @property
    def requests(self) -> list[LLMRequest]:
        """Every call made so far, oldest first."""
        with self._lock:
            return list(self._requests)

    @property
    def responses(self) -> list[Any]:
        """Every reply given so far, oldest first."""
        with self._lock:
            return list(self._responses)

    @property
    def remaining(self) -> list[Step]:
        """The scripted steps not used yet."""
        with self._lock:
            return list(self._steps)

    def add(self, *steps: Step) -> None:
        """Append steps to the script."""
        with self._lock:
            self._steps.extend(steps)

    def supports_function_calling(self) -> bool:
        """``native``: True runs CrewAI's native tool calling, False its ReAct text mode."""
        return self.native

    def supports_stop_words(self) -> bool:
        """ReAct mode uses stop words; native mode does not need them."""
        return not self.native

    def get_input_tokens_count(
        self, messages: Any, tools: Any = None, response_model: Any = None
    ) -> int:
        """A rough count (four characters a token), without the base class's warning."""
        text = messages if isinstance(messages, str) else json.dumps(messages, default=str)
        return (len(text) + 3) // 4

    def call(
        self,
        messages: Any,
        tools: list[dict[str, Any]] | None = None,
        callbacks: list[Any] | None = None,
        available_functions: dict[str, Any] | None = None,
        from_task: Any = None,
        from_agent: Any = None,
        response_model: Any = None,
    ) -> Any:
        """Record the call and return the next scripted reply."""
        request = LLMRequest(
            messages=copy.deepcopy(
                [{"role": "user", "content": messages}]
                if isinstance(messages, str)
                else [dict(m) for m in messages]
            ),
            tools=copy.deepcopy(tools) if tools is not None else None,
            tool_names=tuple(_name(tool) for tool in tools or ()),
            constraint=current_tool_constraint(),
            available_functions=(
                tuple(available_functions) if available_functions is not None else None
            ),
            stop=tuple(self.stop_sequences),
        )
        with self._lock:
            self._requests.append(request)
            if not self._steps:
                self._unexpected.append(request)
                step: Step = None
                exhausted = True
            else:
                step = self._steps.pop(0)
                exhausted = False
        if exhausted:
            raise UnexpectedModelCallError(
                f"unexpected model call #{len(self._requests)}: the script has no step left "
                f"(tools offered: {list(request.tool_names)}, last message: "
                f"{(request.messages[-1] if request.messages else {})!r:.200})"
            )
        reply = step(request) if callable(step) else step
        if isinstance(reply, BaseException):
            raise reply
        if isinstance(reply, Mapping):
            reply = [reply]  # one tool call, as tool_call() builds it
        with self._lock:
            self._responses.append(copy.deepcopy(reply))
        return copy.deepcopy(reply)

    async def acall(
        self,
        messages: Any,
        tools: list[dict[str, Any]] | None = None,
        callbacks: list[Any] | None = None,
        available_functions: dict[str, Any] | None = None,
        from_task: Any = None,
        from_agent: Any = None,
        response_model: Any = None,
    ) -> Any:
        """Same as :meth:`call`."""
        return self.call(
            messages, tools, callbacks, available_functions, from_task, from_agent, response_model
        )

    def assert_complete(self) -> None:
        """Fail when a call found no step, or a scripted step was never consumed."""
        with self._lock:
            unexpected = list(self._unexpected)
            left = list(self._steps)
        assert not unexpected, (
            f"{len(unexpected)} unexpected model call(s) beyond the script; the first offered "
            f"tools {list(unexpected[0].tool_names)}"
        )
        assert not left, f"{len(left)} scripted step(s) never consumed: {left!r:.300}"
