"""A ``FunctionCallingLLM`` that runs the governor on every tool-calling step.

``GovernedFunctionCallingLLM(llm, governor)`` stands in for ``llm`` wherever LlamaIndex
calls ``chat_with_tools`` / ``achat_with_tools`` / ``stream_chat_with_tools`` /
``astream_chat_with_tools`` — a ``FunctionAgent``'s ``take_step``, an ``AgentWorkflow``,
or a workflow of your own. Each such call is one governed turn (see
:mod:`.step_host` for what reaches ``llm`` in each mode). Everything else (``chat``,
``complete``, ``metadata``, ``get_tool_calls_from_response``) is ``llm``'s own.
"""

from __future__ import annotations

import inspect
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any, Literal

from jevqueue.errors import ConfigurationError
from jevqueue.governor import Decision, Governor
from jevqueue.plugins.llamaindex._framework import (
    ChatMessage,
    ChatResponse,
    CompletionResponse,
    FunctionCallingLLM,
    LLMMetadata,
    MessageRole,
    ToolCallBlock,
    ToolSelection,
)
from jevqueue.plugins.llamaindex.step_host import (
    LOCAL_RAW_KEY,
    StepCall,
    StepHost,
    StepReply,
)
from pydantic import Field, PrivateAttr

__all__ = ["Forcing", "GovernedFunctionCallingLLM"]

Forcing = Literal["tool_choice", "narrow"]

_DIRECTIVE_CACHE_SIZE = 64


def _detect_forcing(llm: Any) -> Forcing:
    """``"tool_choice"`` when the integration names it in ``_prepare_chat_with_tools``."""
    try:
        parameters = inspect.signature(type(llm)._prepare_chat_with_tools).parameters
    except (TypeError, ValueError, AttributeError):
        return "narrow"
    return "tool_choice" if "tool_choice" in parameters else "narrow"


class GovernedFunctionCallingLLM(FunctionCallingLLM):
    """Wrap a LlamaIndex ``FunctionCallingLLM`` so the governor decides every tool step.

    Args:
        llm: The wrapped function-calling LLM (``llama_index.llms.openai.OpenAI`` ...).
            It makes every provider call.
        governor: The governor (a default ``Governor()`` when omitted).
        forcing: How a forced turn is constrained. ``"tool_choice"`` passes the tool's
            name as ``tool_choice`` (with ``tool_required=True`` and parallel calls off)
            and a prose turn ``tool_choice="none"``; ``"narrow"`` — for integrations
            whose ``_prepare_chat_with_tools`` has no ``tool_choice`` and may drop it —
            offers only the forced tool, and no tools on a prose turn. Detected from the
            integration's signature when omitted. Either way the reply is read back.
        interrupted: A callable consulted after the decision and before any provider
            call; when it returns True the step raises ``TurnInterruptedError``.
        on_decision: Called with every step's :class:`~jevqueue.governor.Decision`.

    Raises:
        ConfigurationError: ``llm`` is not a function-calling LLM, or ``governor`` /
            ``forcing`` is not what it must be.
    """

    inner: Any = Field(exclude=True)
    governor: Any = Field(default=None, exclude=True)
    forcing: Forcing = "tool_choice"
    interrupted: Any = Field(default=None, exclude=True)
    on_decision: Any = Field(default=None, exclude=True)

    _decisions: deque[Decision] = PrivateAttr(default_factory=lambda: deque(maxlen=1000))
    _schemas: dict[int, tuple[Any, dict[str, Any]]] = PrivateAttr(default_factory=dict)
    _directives: dict[str, ChatMessage] = PrivateAttr(default_factory=dict)

    def __init__(
        self,
        llm: Any = None,
        governor: Governor | None = None,
        *,
        forcing: Forcing | None = None,
        interrupted: Callable[[], bool] | None = None,
        on_decision: Callable[[Decision], None] | None = None,
        **data: Any,
    ) -> None:
        llm = data.pop("inner", llm)
        if isinstance(llm, GovernedFunctionCallingLLM):
            raise ConfigurationError(
                "the LLM is already governed: wrap the plain FunctionCallingLLM once"
            )
        if not isinstance(llm, FunctionCallingLLM) or not _function_calling(llm):
            raise ConfigurationError(
                "GovernedFunctionCallingLLM wraps a LlamaIndex FunctionCallingLLM whose "
                "metadata.is_function_calling_model is true (OpenAI(...), Anthropic(...) "
                f"...); got {type(llm).__name__}. A text-only LLM cannot be forced: use "
                "GovernedReActAgent, which governs the tool calls only"
            )
        if governor is None:
            governor = Governor()
        if not isinstance(governor, Governor):
            raise ConfigurationError(
                f"governor must be a jevqueue.Governor, not {type(governor).__name__}"
            )
        if forcing is None:
            forcing = _detect_forcing(llm)
        if forcing not in ("tool_choice", "narrow"):
            raise ConfigurationError(f"forcing must be 'tool_choice' or 'narrow', not {forcing!r}")
        super().__init__(
            inner=llm,
            governor=governor,
            forcing=forcing,
            interrupted=interrupted,
            on_decision=on_decision,
            callback_manager=llm.callback_manager,
            **data,
        )

    @classmethod
    def class_name(cls) -> str:
        return "GovernedFunctionCallingLLM"

    @property
    def metadata(self) -> LLMMetadata:
        """The wrapped LLM's metadata."""
        return self.inner.metadata

    # --- records ---------------------------------------------------------------------

    @property
    def last_decision(self) -> Decision | None:
        """The decision of the most recent governed step."""
        return self._decisions[-1] if self._decisions else None

    @property
    def decisions(self) -> list[Decision]:
        """The decisions of recent governed steps, oldest first (the last 1000)."""
        return list(self._decisions)

    def _record(self) -> None:
        last = self.governor.last
        if isinstance(last, Decision):
            self._decisions.append(last)
            if self.on_decision is not None:
                self.on_decision(last)

    # --- what the host asks of the LLM -------------------------------------------------

    def tool_schemas(self, tools: Sequence[Any]) -> list[dict[str, Any]]:
        """The tools in OpenAI form for the ballot, converted once per tool metadata."""
        schemas = []
        cache = self._schemas
        for tool in tools:
            metadata = tool.metadata
            cached = cache.get(id(metadata))
            if cached is None or cached[0] is not metadata:
                cached = (metadata, metadata.to_openai_tool(skip_length_check=True))
                if len(cache) > 4096:
                    cache.clear()
                cache[id(metadata)] = cached
            schemas.append(cached[1])
        return schemas

    def forced_tools(self, tools: Sequence[Any], name: str) -> list[Any]:
        """The tools offered on a turn forced to ``name``."""
        if self.forcing == "narrow":
            return [tool for tool in tools if tool.metadata.name == name]
        return list(tools)

    def directive_message(self, directive: str) -> ChatMessage:
        """The system message that carries ``directive`` (built once per directive)."""
        message = self._directives.get(directive)
        if message is None or message.content != directive:
            message = ChatMessage(role=MessageRole.SYSTEM, content=directive)
            if len(self._directives) >= _DIRECTIVE_CACHE_SIZE:
                self._directives.clear()
            self._directives[directive] = message
        return message

    # --- the governed tool-calling entry points ----------------------------------------

    def _step_call(
        self,
        tools: Sequence[Any],
        user_msg: str | ChatMessage | None,
        chat_history: list[ChatMessage] | None,
        verbose: bool,
        allow_parallel_tool_calls: bool,
        tool_required: bool,
        kwargs: dict[str, Any],
    ) -> StepCall:
        if kwargs.get("tool_choice") is not None:
            raise ConfigurationError(
                "a governed step takes no tool_choice: the governor chooses the tool each "
                "turn (FunctionAgent(initial_tool_choice=...) is not supported under "
                "governance; remove it)"
            )
        kwargs.pop("tool_choice", None)
        return StepCall(
            tools=list(tools),
            user_msg=user_msg,
            chat_history=chat_history,
            verbose=verbose,
            allow_parallel_tool_calls=allow_parallel_tool_calls,
            tool_required=tool_required,
            kwargs=kwargs,
        )

    def _finished(self, reply: StepReply, call: StepCall) -> ChatResponse:
        response = reply.response
        if response is None:
            raise ConfigurationError("the wrapped LLM returned an empty response")
        if not reply.validated:
            # The read-back has passed (exactly the forced call, or none on a prose turn):
            # the integration's own validation cannot cut anything the governor let through.
            response = self.inner._validate_chat_with_tools_response(
                response, call.tools, allow_parallel_tool_calls=False, **call.kwargs
            )
        return response

    def chat_with_tools(
        self,
        tools: Sequence[Any],
        user_msg: str | ChatMessage | None = None,
        chat_history: list[ChatMessage] | None = None,
        verbose: bool = False,
        allow_parallel_tool_calls: bool = False,
        tool_required: bool = False,
        **kwargs: Any,
    ) -> ChatResponse:
        """One governed step: decide, call the wrapped LLM in that mode, read back."""
        call = self._step_call(
            tools, user_msg, chat_history, verbose, allow_parallel_tool_calls, tool_required, kwargs
        )
        host = StepHost(self, call, stream=False, asynchronous=False)
        try:
            reply = self.governor.step(host)
        finally:
            self._record()
        return self._finished(reply, call)

    async def achat_with_tools(
        self,
        tools: Sequence[Any],
        user_msg: str | ChatMessage | None = None,
        chat_history: list[ChatMessage] | None = None,
        verbose: bool = False,
        allow_parallel_tool_calls: bool = False,
        tool_required: bool = False,
        **kwargs: Any,
    ) -> ChatResponse:
        """The async form of :meth:`chat_with_tools` (what ``FunctionAgent`` calls)."""
        call = self._step_call(
            tools, user_msg, chat_history, verbose, allow_parallel_tool_calls, tool_required, kwargs
        )
        host = StepHost(self, call, stream=False, asynchronous=True)
        try:
            reply = await self.governor.astep(host)
        finally:
            self._record()
        return self._finished(reply, call)

    def stream_chat_with_tools(
        self,
        tools: Sequence[Any],
        user_msg: str | ChatMessage | None = None,
        chat_history: list[ChatMessage] | None = None,
        verbose: bool = False,
        allow_parallel_tool_calls: bool = False,
        tool_required: bool = False,
        **kwargs: Any,
    ) -> Iterator[ChatResponse]:
        """One governed streaming step; a forced or prose turn is read back before any
        chunk is yielded, a passthrough streams live."""
        call = self._step_call(
            tools, user_msg, chat_history, verbose, allow_parallel_tool_calls, tool_required, kwargs
        )
        host = StepHost(self, call, stream=True, asynchronous=False)
        try:
            reply = self.governor.step(host)
        finally:
            self._record()
        if reply.stream is not None:
            return reply.stream
        return iter(reply.chunks)

    async def astream_chat_with_tools(
        self,
        tools: Sequence[Any],
        user_msg: str | ChatMessage | None = None,
        chat_history: list[ChatMessage] | None = None,
        verbose: bool = False,
        allow_parallel_tool_calls: bool = False,
        tool_required: bool = False,
        **kwargs: Any,
    ) -> AsyncIterator[ChatResponse]:
        """The async form of :meth:`stream_chat_with_tools` (``FunctionAgent(streaming=True)``)."""
        call = self._step_call(
            tools, user_msg, chat_history, verbose, allow_parallel_tool_calls, tool_required, kwargs
        )
        host = StepHost(self, call, stream=True, asynchronous=True)
        try:
            reply = await self.governor.astep(host)
        finally:
            self._record()
        if reply.stream is not None:
            return reply.stream
        chunks = reply.chunks

        async def replay() -> AsyncIterator[ChatResponse]:
            for chunk in chunks:
                yield chunk

        return replay()

    def _prepare_chat_with_tools(
        self,
        tools: Sequence[Any],
        user_msg: str | ChatMessage | None = None,
        chat_history: list[ChatMessage] | None = None,
        verbose: bool = False,
        allow_parallel_tool_calls: bool = False,
        tool_required: bool = False,
        **kwargs: Any,
    ) -> dict[str, Any]:
        """The wrapped LLM's preparation (used by ``predict_and_call`` and the like)."""
        return self.inner._prepare_chat_with_tools_compat(
            tools,
            user_msg=user_msg,
            chat_history=chat_history,
            verbose=verbose,
            allow_parallel_tool_calls=allow_parallel_tool_calls,
            tool_required=tool_required,
            **kwargs,
        )

    def get_tool_calls_from_response(
        self, response: ChatResponse, error_on_no_tool_call: bool = True, **kwargs: Any
    ) -> list[ToolSelection]:
        """The calls of ``response``: read locally for a ``say`` reply, else by the wrapped LLM."""
        raw = response.raw
        if isinstance(raw, dict) and raw.get(LOCAL_RAW_KEY):
            calls = [
                ToolSelection(
                    tool_id=block.tool_call_id or "",
                    tool_name=block.tool_name,
                    tool_kwargs=dict(block.tool_kwargs)
                    if isinstance(block.tool_kwargs, dict)
                    else {},
                )
                for block in response.message.blocks
                if isinstance(block, ToolCallBlock)
            ]
            if not calls and error_on_no_tool_call:
                raise ValueError("Expected at least one tool call, but got 0 tool calls.")
            return calls
        return self.inner.get_tool_calls_from_response(
            response, error_on_no_tool_call=error_on_no_tool_call, **kwargs
        )

    # --- everything else is the wrapped LLM's ------------------------------------------

    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        return self.inner.chat(messages, **kwargs)

    async def achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        return await self.inner.achat(messages, **kwargs)

    def stream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> Any:
        return self.inner.stream_chat(messages, **kwargs)

    async def astream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> Any:
        return await self.inner.astream_chat(messages, **kwargs)

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return self.inner.complete(prompt, formatted=formatted, **kwargs)

    async def acomplete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponse:
        return await self.inner.acomplete(prompt, formatted=formatted, **kwargs)

    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
        return self.inner.stream_complete(prompt, formatted=formatted, **kwargs)

    async def astream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
        return await self.inner.astream_complete(prompt, formatted=formatted, **kwargs)


def _function_calling(llm: Any) -> bool:
    try:
        return bool(llm.metadata.is_function_calling_model)
    except Exception:
        return False
