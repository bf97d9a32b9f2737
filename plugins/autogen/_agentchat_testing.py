"""A scripted AgentChat ``ChatCompletionClient``: the provider boundary, with no network.

:class:`ScriptedChatCompletionClient` is a real ``ChatCompletionClient``: give it to an
``AssistantAgent`` (directly or inside a
:class:`~jevqueue.plugins.autogen.GovernedChatCompletionClient`) and a real agent runs
against it. Each call consumes the next step and is recorded as a :class:`ModelRequest`;
a call beyond the script fails loudly (and is remembered, in case the caller swallows
it), and :meth:`~ScriptedChatCompletionClient.assert_complete` fails on an unexpected call
or an unconsumed step::

    model = ScriptedChatCompletionClient([tool_call("get_weather", {"city": "Lisbon"})])
    agent = AssistantAgent("assistant", model_client=GovernedChatCompletionClient(model, governor),
                           workbench=PolicyWorkbench(StaticWorkbench(tools), pep=pep, ...))
    await agent.run(task="What is the weather in Lisbon?")
    model.assert_complete()

A step is a ``str`` (a text answer), a :class:`FunctionCall` or a list of them (tool
calls; :func:`tool_call` builds one), a ``CreateResult``, an exception to raise, or a
callable ``(ModelRequest) -> step``. Streamed calls yield a text answer word by word,
then the ``CreateResult``.
"""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from collections.abc import AsyncGenerator, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from jevqueue.plugins.autogen._agentchat_framework import (
    ChatCompletionClient,
    CreateResult,
    FunctionCall,
    ModelInfo,
    RequestUsage,
)
from jevqueue.plugins.autogen.agentchat_messages import openai_messages, tool_name

__all__ = [
    "DEFAULT_MODEL_INFO",
    "ModelRequest",
    "ScriptedChatCompletionClient",
    "UnexpectedModelCallError",
    "tool_call",
]

DEFAULT_MODEL_INFO: ModelInfo = {
    "vision": False,
    "function_calling": True,
    "json_output": False,
    "family": "unknown",
    "structured_output": False,
    "multiple_system_messages": True,
}


class UnexpectedModelCallError(AssertionError):
    """The scripted client was called with no step left."""


def tool_call(name: str, arguments: Mapping[str, Any], *, call_id: str | None = None) -> Any:
    """One ``FunctionCall`` as a model would return it."""
    return FunctionCall(
        id=call_id or f"call_{uuid.uuid4().hex[:12]}",
        name=name,
        arguments=json.dumps(dict(arguments)),
    )


@dataclass(frozen=True)
class ModelRequest:
    """One call that reached the scripted provider boundary.

    Attributes:
        messages: The ``LLMMessage`` s as passed (AgentChat's messages are immutable
            pydantic models; the tuple is a copy of the list).
        openai: The same messages in OpenAI form.
        tool_names: The names of the tools passed.
        tool_choice: ``"auto"``, ``"none"``, ``"required"``, or the forced tool's name.
        forced_tool: The forced tool's name, when ``tool_choice`` was a ``Tool``.
        extra_create_args: A read-only copy of the extra create arguments.
        json_output: The ``json_output`` argument.
        streamed: True for ``create_stream``.
    """

    messages: tuple[Any, ...]
    openai: tuple[Mapping[str, Any], ...]
    tool_names: tuple[str, ...]
    tool_choice: str
    forced_tool: str | None
    extra_create_args: Mapping[str, Any]
    json_output: Any
    streamed: bool

    @property
    def parallel_tool_calls(self) -> bool | None:
        """The ``parallel_tool_calls`` extra argument, ``None`` when unset."""
        value = self.extra_create_args.get("parallel_tool_calls")
        return value if isinstance(value, bool) else None


def _result(step: Any) -> CreateResult:
    if isinstance(step, CreateResult):
        return step
    usage = RequestUsage(prompt_tokens=0, completion_tokens=0)
    if isinstance(step, str):
        return CreateResult(finish_reason="stop", content=step, usage=usage, cached=False)
    calls = [step] if isinstance(step, FunctionCall) else list(step)
    for call in calls:
        if not isinstance(call, FunctionCall):
            raise TypeError(f"a scripted step holds a {type(call).__name__}, not a FunctionCall")
    return CreateResult(finish_reason="function_calls", content=calls, usage=usage, cached=False)


class ScriptedChatCompletionClient(ChatCompletionClient):
    """An AgentChat model client that answers from a script and records every call.

    Args:
        steps: The answers, in order.
        model_info: What the client reports about its model (default:
            :data:`DEFAULT_MODEL_INFO`, function calling and several system messages).
        latency: Seconds each answer takes (``asyncio.sleep``), for benchmarks.
    """

    def __init__(
        self,
        steps: Sequence[Any] = (),
        *,
        model_info: ModelInfo | None = None,
        latency: float = 0.0,
    ) -> None:
        self.latency = latency
        self._steps = list(steps)
        self._info: ModelInfo = dict(model_info or DEFAULT_MODEL_INFO)  # type: ignore[assignment]
        self._requests: list[ModelRequest] = []
        self._responses: list[CreateResult] = []
        self._unexpected: list[ModelRequest] = []
        self._lock = threading.Lock()

    @property
    def requests(self) -> list[ModelRequest]:
        """Every call made so far, oldest first."""
        with self._lock:
            return list(self._requests)

    @property
    def responses(self) -> list[CreateResult]:
        """What the client answered, oldest first."""
        with self._lock:
            return list(self._responses)

    @property
    def remaining(self) -> int:
        """How many steps are still unconsumed."""
        with self._lock:
            return len(self._steps)

    def add(self, *steps: Any) -> None:
        """Append steps to the script."""
        with self._lock:
            self._steps.extend(steps)

    def assert_complete(self) -> None:
        """Fail when a call found no step, or a step was never consumed."""
        with self._lock:
            unexpected, left = list(self._unexpected), list(self._steps)
        assert not unexpected, (
            f"{len(unexpected)} unexpected model call(s) beyond the script; the first offered "
            f"tools {list(unexpected[0].tool_names)}"
        )
        assert not left, f"{len(left)} scripted step(s) never consumed: {left!r:.300}"

    def _answer(
        self,
        messages: Sequence[Any],
        tools: Sequence[Any],
        tool_choice: Any,
        json_output: Any,
        extra_create_args: Mapping[str, Any],
        streamed: bool,
    ) -> CreateResult:
        forced = None if isinstance(tool_choice, str) else tool_choice.schema["name"]
        request = ModelRequest(
            messages=tuple(messages),
            openai=tuple(openai_messages(messages)),
            tool_names=tuple(tool_name(tool) for tool in tools),
            tool_choice=forced if forced is not None else str(tool_choice),
            forced_tool=forced,
            extra_create_args=MappingProxyType(dict(extra_create_args)),
            json_output=json_output,
            streamed=streamed,
        )
        with self._lock:
            self._requests.append(request)
            if not self._steps:
                self._unexpected.append(request)
                step: Any = None
                exhausted = True
            else:
                step, exhausted = self._steps.pop(0), False
        if exhausted:
            raise UnexpectedModelCallError(
                f"unexpected model call #{len(self._requests)}: the script has no step left "
                f"(tools offered: {list(request.tool_names)}, tool_choice: {request.tool_choice})"
            )
        if callable(step) and not isinstance(step, (FunctionCall, CreateResult)):
            step = step(request)
        if isinstance(step, BaseException):
            raise step
        result = _result(step)
        with self._lock:
            self._responses.append(result)
        return result

    async def create(
        self,
        messages: Sequence[Any],
        *,
        tools: Sequence[Any] = [],
        tool_choice: Any = "auto",
        json_output: Any = None,
        extra_create_args: Mapping[str, Any] = {},
        cancellation_token: Any = None,
    ) -> CreateResult:
        """Record the call and return the next step."""
        if self.latency:
            await asyncio.sleep(self.latency)
        return self._answer(messages, tools, tool_choice, json_output, extra_create_args, False)

    async def create_stream(  # type: ignore[override]
        self,
        messages: Sequence[Any],
        *,
        tools: Sequence[Any] = [],
        tool_choice: Any = "auto",
        json_output: Any = None,
        extra_create_args: Mapping[str, Any] = {},
        cancellation_token: Any = None,
    ) -> AsyncGenerator[str | CreateResult, None]:
        """Record the call; yield a text answer word by word, then the ``CreateResult``."""
        if self.latency:
            await asyncio.sleep(self.latency)
        result = self._answer(messages, tools, tool_choice, json_output, extra_create_args, True)
        if isinstance(result.content, str):
            words = result.content.split(" ")
            for index, word in enumerate(words):
                yield word if index == len(words) - 1 else word + " "
        yield result

    async def close(self) -> None:
        """Nothing to close."""

    def actual_usage(self) -> RequestUsage:
        """No tokens are spent."""
        return RequestUsage(prompt_tokens=0, completion_tokens=0)

    def total_usage(self) -> RequestUsage:
        """No tokens are spent."""
        return RequestUsage(prompt_tokens=0, completion_tokens=0)

    def count_tokens(self, messages: Sequence[Any], *, tools: Sequence[Any] = []) -> int:
        """A rough count: four characters a token."""
        return sum(len(str(m)) for m in messages) // 4

    def remaining_tokens(self, messages: Sequence[Any], *, tools: Sequence[Any] = []) -> int:
        """A large window."""
        return 128_000 - self.count_tokens(messages, tools=tools)

    @property
    def capabilities(self) -> Any:
        """The model info (AgentChat's deprecated name)."""
        return self._info

    @property
    def model_info(self) -> ModelInfo:
        """What the client reports about its model."""
        return self._info
