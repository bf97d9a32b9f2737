"""A scripted ``FunctionCallingLLM``: the provider double for LlamaIndex tests and notebooks.

:class:`ScriptedFunctionCallingLLM` is a real LlamaIndex ``FunctionCallingLLM`` that stands
where the provider would be. It prepares tool requests the way the OpenAI integration
does (``tool_choice`` resolved to the named form, ``parallel_tool_calls`` from
``allow_parallel_tool_calls``), truncates a multi-call reply to its first call in
``_validate_chat_with_tools_response`` exactly as ``force_single_tool_call`` does, and
streams a reply in chunks whose early ones show a partial call. It answers with the steps
it was given, in order, and records every provider call:

* :attr:`~ScriptedFunctionCallingLLM.requests` — one frozen :class:`ScriptedRequest` per
  call (what it was asked);
* :attr:`~ScriptedFunctionCallingLLM.responses` — what it answered;
* :attr:`~ScriptedFunctionCallingLLM.remaining` — steps left.

A call beyond the script fails loudly, and
:meth:`~ScriptedFunctionCallingLLM.assert_complete` fails when steps were never used, so a
test cannot pass by accident.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from jevqueue.plugins.llamaindex._framework import (
    ChatMessage,
    ChatResponse,
    CompletionResponse,
    FunctionCallingLLM,
    LLMMetadata,
    MessageRole,
    TextBlock,
    ToolCallBlock,
    ToolSelection,
)
from pydantic import Field, PrivateAttr

__all__ = [
    "ScriptedFunctionCallingLLM",
    "ScriptedRequest",
    "scripted_reply",
    "scripted_tool_calls",
]


@dataclass(frozen=True)
class ScriptedRequest:
    """One provider call the scripted LLM received.

    Attributes:
        messages: The messages sent, as LlamaIndex ``ChatMessage`` copies.
        tools: The names of the tools offered (empty when none were sent).
        tool_choice: The resolved ``tool_choice`` (``None`` when no tools were sent).
        parallel_tool_calls: The ``parallel_tool_calls`` flag, ``None`` when unset.
        stream: True for a streaming call.
        kwargs: Every other keyword the call carried.
    """

    messages: tuple[ChatMessage, ...]
    tools: tuple[str, ...] = ()
    tool_choice: Any = None
    parallel_tool_calls: bool | None = None
    stream: bool = False
    kwargs: Mapping[str, Any] = field(default_factory=dict)

    @property
    def forced_tool(self) -> str | None:
        """The tool a named ``tool_choice`` constrains the call to, or ``None``."""
        choice = self.tool_choice
        if isinstance(choice, Mapping):
            function = choice.get("function")
            if isinstance(function, Mapping):
                return str(function.get("name"))
        return None


def scripted_tool_calls(
    *calls: tuple[str, Mapping[str, Any]], text: str = "", ids: Sequence[str] | None = None
) -> ChatMessage:
    """An assistant message that calls each ``(name, arguments)`` once, with fresh ids (or
    the ``ids`` given, one per call)."""
    if ids is not None and len(ids) != len(calls):
        raise ValueError(f"{len(ids)} ids were given for {len(calls)} calls: give one per call")
    blocks: list[Any] = [TextBlock(text=text)] if text else []
    blocks += [
        ToolCallBlock(
            tool_call_id=ids[index] if ids is not None else f"call_{uuid.uuid4().hex[:12]}",
            tool_name=name,
            tool_kwargs=dict(arguments),
        )
        for index, (name, arguments) in enumerate(calls)
    ]
    return ChatMessage(role=MessageRole.ASSISTANT, blocks=blocks)


def scripted_reply(text: str) -> ChatMessage:
    """An assistant message that answers in prose."""
    return ChatMessage(role=MessageRole.ASSISTANT, content=text)


def _tool_calls(message: ChatMessage) -> list[ToolCallBlock]:
    return [block for block in message.blocks if isinstance(block, ToolCallBlock)]


class ScriptedFunctionCallingLLM(FunctionCallingLLM):
    """A function-calling LLM that answers from a script and records what it was asked.

    Args:
        steps: The answers, in order: an assistant ``ChatMessage`` (build one with
            :func:`scripted_tool_calls` / :func:`scripted_reply`), a string (prose), or a
            callable that receives the :class:`ScriptedRequest` and returns one of those.
        latency: Seconds each answer takes (``time.sleep`` / ``asyncio.sleep``), for
            benchmarks.
        model: The model name reported in ``metadata`` and in each response's ``raw``.

    Example:
        >>> llm = ScriptedFunctionCallingLLM(
        ...     steps=[scripted_tool_calls(("get_weather", {"city": "Oslo"})), "Sunny."]
        ... )
    """

    steps: list[Any] = Field(default_factory=list)
    latency: float = 0.0
    model: str = "scripted-function-calling-llm"
    _requests: list[ScriptedRequest] = PrivateAttr(default_factory=list)
    _responses: list[ChatResponse] = PrivateAttr(default_factory=list)
    _position: int = PrivateAttr(default=0)

    @classmethod
    def class_name(cls) -> str:
        return "ScriptedFunctionCallingLLM"

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(
            context_window=128_000,
            num_output=1024,
            is_chat_model=True,
            is_function_calling_model=True,
            model_name=self.model,
        )

    # --- what the double recorded ------------------------------------------------------

    @property
    def requests(self) -> list[ScriptedRequest]:
        """Every provider call so far, oldest first."""
        return self._requests

    @property
    def responses(self) -> list[ChatResponse]:
        """Every answer so far (the final response of a stream), oldest first."""
        return self._responses

    @property
    def remaining(self) -> int:
        """How many scripted steps are still unused."""
        return len(self.steps) - self._position

    def assert_complete(self) -> None:
        """Fail when scripted steps were never used.

        Raises:
            AssertionError: ``steps`` holds answers no call consumed.
        """
        if self.remaining:
            raise AssertionError(
                f"ScriptedFunctionCallingLLM: {self.remaining} scripted step(s) never used "
                f"(consumed {self._position} of {len(self.steps)})"
            )

    # --- the provider boundary ------------------------------------------------------------

    def _prepare_chat_with_tools(
        self,
        tools: Sequence[Any],
        user_msg: str | ChatMessage | None = None,
        chat_history: list[ChatMessage] | None = None,
        verbose: bool = False,
        allow_parallel_tool_calls: bool = False,
        tool_required: bool = False,
        tool_choice: str | dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> dict[str, Any]:
        # As llama-index-llms-openai does it: a named choice becomes the function form.
        specs = [tool.metadata.to_openai_tool(skip_length_check=True) for tool in tools]
        messages = list(chat_history or [])
        if isinstance(user_msg, str):
            user_msg = ChatMessage(role=MessageRole.USER, content=user_msg)
        if user_msg is not None:
            messages.append(user_msg)
        prepared: dict[str, Any] = {"messages": messages, "tools": specs or None, **kwargs}
        if specs:
            if tool_choice is None:
                tool_choice = "required" if tool_required else "auto"
            if isinstance(tool_choice, str) and tool_choice not in ("none", "auto", "required"):
                tool_choice = {"type": "function", "function": {"name": tool_choice}}
            prepared["tool_choice"] = tool_choice
            prepared["parallel_tool_calls"] = allow_parallel_tool_calls
        return prepared

    def _validate_chat_with_tools_response(
        self,
        response: ChatResponse,
        tools: Sequence[Any],
        allow_parallel_tool_calls: bool = False,
        **kwargs: Any,
    ) -> ChatResponse:
        # The stock truncation (llama-index-llms-openai's force_single_tool_call).
        calls = _tool_calls(response.message)
        if not allow_parallel_tool_calls and len(calls) > 1:
            response.message.blocks = [
                block for block in response.message.blocks if not isinstance(block, ToolCallBlock)
            ] + [calls[0]]
        return response

    def get_tool_calls_from_response(
        self, response: ChatResponse, error_on_no_tool_call: bool = True, **kwargs: Any
    ) -> list[ToolSelection]:
        calls = _tool_calls(response.message)
        if not calls and error_on_no_tool_call:
            raise ValueError("Expected at least one tool call, but got 0 tool calls.")
        selections = []
        for call in calls:
            arguments = call.tool_kwargs
            if isinstance(arguments, str):
                try:
                    arguments = json.loads(arguments)
                except ValueError:
                    arguments = {}
            selections.append(
                ToolSelection(
                    tool_id=call.tool_call_id or "",
                    tool_name=call.tool_name,
                    tool_kwargs=arguments,
                )
            )
        return selections

    def _answer(self, messages: Sequence[ChatMessage], kwargs: dict[str, Any], *, stream: bool):
        options = dict(kwargs)
        tools = options.pop("tools", None) or []
        request = ScriptedRequest(
            messages=tuple(message.model_copy(deep=True) for message in messages),
            tools=tuple(spec["function"]["name"] for spec in tools),
            tool_choice=options.pop("tool_choice", None),
            parallel_tool_calls=options.pop("parallel_tool_calls", None),
            stream=stream,
            kwargs=options,
        )
        self._requests.append(request)
        if self._position >= len(self.steps):
            raise AssertionError(
                f"ScriptedFunctionCallingLLM: unexpected provider call #{len(self._requests)} "
                f"— the script has {len(self.steps)} step(s) (tool_choice="
                f"{request.tool_choice!r}, last message={messages[-1].content!r})"
            )
        step = self.steps[self._position]
        self._position += 1
        if callable(step) and not isinstance(step, ChatMessage):
            step = step(request)
        if isinstance(step, str):
            step = scripted_reply(step)
        if not isinstance(step, ChatMessage):
            raise AssertionError(
                f"ScriptedFunctionCallingLLM: step {self._position} is a "
                f"{type(step).__name__}; script ChatMessages, strings or callables returning one"
            )
        response = ChatResponse(
            message=step.model_copy(deep=True), raw={"model": self.model, "id": uuid.uuid4().hex}
        )
        self._responses.append(response)
        return response

    def _chunks(self, response: ChatResponse) -> list[ChatResponse]:
        # Like a provider stream: text deltas, then a chunk whose call is still partial
        # (arguments not yet complete), then the complete message.
        message = response.message
        text = message.content or ""
        calls = _tool_calls(message)
        chunks: list[ChatResponse] = []
        sofar = ""
        for word in text.split(" ") if text else []:
            delta = word if not sofar else f" {word}"
            sofar += delta
            chunks.append(
                ChatResponse(
                    message=ChatMessage(role=MessageRole.ASSISTANT, content=sofar),
                    delta=delta,
                    raw=response.raw,
                )
            )
        if calls:
            partial = ToolCallBlock(
                tool_call_id=calls[0].tool_call_id, tool_name=calls[0].tool_name, tool_kwargs="{"
            )
            chunks.append(
                ChatResponse(
                    message=ChatMessage(
                        role=MessageRole.ASSISTANT, blocks=[TextBlock(text=sofar), partial]
                    ),
                    delta="",
                    raw=response.raw,
                )
            )
        chunks.append(response.model_copy(update={"delta": ""}))
        return chunks

    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        if self.latency:
            time.sleep(self.latency)
        return self._answer(messages, kwargs, stream=False)

    async def achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        if self.latency:
            await asyncio.sleep(self.latency)
        return self._answer(messages, kwargs, stream=False)

    def stream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> Iterator[ChatResponse]:
        if self.latency:
            time.sleep(self.latency)
        chunks = self._chunks(self._answer(messages, kwargs, stream=True))
        return iter(chunks)

    async def astream_chat(
        self, messages: Sequence[ChatMessage], **kwargs: Any
    ) -> AsyncIterator[ChatResponse]:
        if self.latency:
            await asyncio.sleep(self.latency)
        chunks = self._chunks(self._answer(messages, kwargs, stream=True))

        async def stream() -> AsyncIterator[ChatResponse]:
            for chunk in chunks:
                yield chunk

        return stream()

    # Completion endpoints: the agents never use them; a call is a script error.
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        raise AssertionError("ScriptedFunctionCallingLLM: complete() is not scripted")

    async def acomplete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponse:
        raise AssertionError("ScriptedFunctionCallingLLM: acomplete() is not scripted")

    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
        raise AssertionError("ScriptedFunctionCallingLLM: stream_complete() is not scripted")

    async def astream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
        raise AssertionError("ScriptedFunctionCallingLLM: astream_complete() is not scripted")
