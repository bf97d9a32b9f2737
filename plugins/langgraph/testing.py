"""A scripted LangChain chat model: the provider double for LangGraph tests and notebooks.

:class:`ScriptedChatModel` is a real ``BaseChatModel`` with ``bind_tools``: it answers
with the steps it was given, in order, and records every request (messages, the bound
``tool_choice`` and ``parallel_tool_calls``, the tools offered). It fails loudly on a
request beyond its script, and :meth:`ScriptedChatModel.assert_complete` fails when
steps were never used — so a test cannot pass by accident.
"""

from __future__ import annotations

import asyncio
import time
import uuid
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from jevqueue.plugins.langgraph._framework import (
    AIMessage,
    BaseChatModel,
    BaseMessage,
    ChatGeneration,
    ChatResult,
    PrivateAttr,
    convert_to_openai_tool,
)

__all__ = ["ScriptedCall", "ScriptedChatModel", "scripted_tool_call"]

_UNSET: Any = object()


@dataclass(frozen=True)
class ScriptedCall:
    """One request the scripted model received.

    Attributes:
        messages: The messages sent, as LangChain messages.
        tool_choice: The bound ``tool_choice`` (absent or ``None``: ``None``, and
            ``tool_choice_set`` is False).
        tool_choice_set: True when the request carried a ``tool_choice`` at all.
        parallel_tool_calls: The bound ``parallel_tool_calls``, ``None`` when unset.
        tools: The names of the tools bound to the request.
        kwargs: Every other keyword the request carried.
    """

    messages: tuple[BaseMessage, ...]
    tool_choice: Any
    tool_choice_set: bool
    parallel_tool_calls: bool | None
    tools: tuple[str, ...]
    kwargs: Mapping[str, Any] = field(default_factory=dict)


def _tool_name(tool: Mapping[str, Any]) -> str:
    # A provider-executed tool ({"type": "web_search"}) has no function, only a type.
    function = tool.get("function")
    return str(function["name"] if isinstance(function, Mapping) else tool.get("type"))


def scripted_tool_call(name: str, arguments: Mapping[str, Any], *, text: str = "") -> AIMessage:
    """An ``AIMessage`` that calls ``name`` once with ``arguments`` (a fresh call id)."""
    return AIMessage(
        content=text,
        tool_calls=[
            {
                "name": name,
                "args": dict(arguments),
                "id": f"call_{uuid.uuid4().hex[:12]}",
                "type": "tool_call",
            }
        ],
    )


class ScriptedChatModel(BaseChatModel):
    """A chat model that answers from a script and records what it was asked.

    Args:
        steps: The answers, in order: an ``AIMessage``, a string (prose), or a callable
            that receives the :class:`ScriptedCall` and returns one of those.
        latency: Seconds each answer takes (``time.sleep`` / ``asyncio.sleep``), for
            benchmarks.
        model_name: Reported in ``response_metadata["model_name"]``.

    Example:
        >>> model = ScriptedChatModel(steps=[scripted_tool_call("get_weather", {"city": "Oslo"})])
    """

    steps: list[Any]
    latency: float = 0.0
    model_name: str = "scripted-chat-model"
    _requests: list[ScriptedCall] = PrivateAttr(default_factory=list)
    _responses: list[AIMessage] = PrivateAttr(default_factory=list)
    _position: int = PrivateAttr(default=0)

    @property
    def _llm_type(self) -> str:
        return "jevqueue-scripted"

    @property
    def requests(self) -> list[ScriptedCall]:
        """Every request so far, oldest first (what the model was asked)."""
        return self._requests

    @property
    def responses(self) -> list[AIMessage]:
        """Every answer so far, oldest first."""
        return self._responses

    @property
    def remaining(self) -> list[Any]:
        """The scripted steps not used yet."""
        return list(self.steps[self._position :])

    @property
    def calls(self) -> list[ScriptedCall]:
        """Deprecated spelling of :attr:`requests`."""
        warnings.warn(
            "ScriptedChatModel.calls is deprecated: read ScriptedChatModel.requests",
            DeprecationWarning,
            stacklevel=2,
        )
        return self._requests

    def bind_tools(
        self,
        tools: Sequence[Any],
        *,
        tool_choice: Any = _UNSET,
        **kwargs: Any,
    ) -> Any:
        """Bind tools the way provider integrations do: as request keywords."""
        formatted = [convert_to_openai_tool(tool) for tool in tools]
        # Like the provider integrations, None means "not set".
        if tool_choice is not _UNSET and tool_choice is not None:
            kwargs["tool_choice"] = tool_choice
        if kwargs.get("parallel_tool_calls", 0) is None:
            del kwargs["parallel_tool_calls"]
        return self.bind(tools=formatted, **kwargs)

    def assert_complete(self) -> None:
        """Fail when scripted steps were never used.

        Raises:
            AssertionError: ``steps`` holds answers no request consumed.
        """
        left = len(self.steps) - self._position
        if left:
            raise AssertionError(
                f"ScriptedChatModel: {left} scripted step(s) never used "
                f"(consumed {self._position} of {len(self.steps)})"
            )

    def _record(self, messages: list[BaseMessage], kwargs: dict[str, Any]) -> AIMessage:
        options = dict(kwargs)
        tools = options.pop("tools", [])
        has_choice = "tool_choice" in options
        call = ScriptedCall(
            messages=tuple(messages),
            tool_choice=options.pop("tool_choice", None),
            tool_choice_set=has_choice,
            parallel_tool_calls=options.pop("parallel_tool_calls", None),
            tools=tuple(_tool_name(tool) for tool in tools),
            kwargs=options,
        )
        self._requests.append(call)
        if self._position >= len(self.steps):
            raise AssertionError(
                f"ScriptedChatModel: unexpected request #{len(self._requests)} — the script has "
                f"{len(self.steps)} step(s) (tool_choice={call.tool_choice!r}, "
                f"last message={messages[-1].content!r})"
            )
        step = self.steps[self._position]
        self._position += 1
        if callable(step) and not isinstance(step, BaseMessage):
            step = step(call)
        if isinstance(step, str):
            step = AIMessage(content=step)
        if not isinstance(step, AIMessage):
            raise AssertionError(
                f"ScriptedChatModel: step {self._position} is a {type(step).__name__}; "
                "script AIMessages, strings or callables returning one"
            )
        metadata = {"model_name": self.model_name, **step.response_metadata}
        response = step.model_copy(update={"response_metadata": metadata})
        self._responses.append(response)
        return response

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        if self.latency:
            time.sleep(self.latency)
        return ChatResult(generations=[ChatGeneration(message=self._record(messages, kwargs))])

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        if self.latency:
            await asyncio.sleep(self.latency)
        return ChatResult(generations=[ChatGeneration(message=self._record(messages, kwargs))])
