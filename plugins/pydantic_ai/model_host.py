"""A host for callers who drive a Pydantic AI model directly, without an agent loop.

::

    host = PydanticAIHost(OpenAIChatModel("gpt-5", provider=...), messages, tool_defs)
    response = Governor().step(host)            # or: await governor.astep(AsyncPydanticAIHost(...))

``generate`` sends one request through ``pydantic_ai.direct.model_request_sync`` (or
``model_request``), in the shape :mod:`.request_shape` describes for the mode; the
passthrough sends the caller's messages, settings and parameters unchanged. The reply is
read back with ``ModelResponse.tool_calls``; running a call the reply makes is the
caller's business, judged first with :class:`~jevqueue.plugins.pydantic_ai.PolicyCapability`
``.judge`` or any PEP.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from jevqueue.errors import ConfigurationError
from jevqueue.plugins.pydantic_ai._framework import (
    Model,
    ModelMessage,
    ModelRequestParameters,
    ModelResponse,
    ModelSettings,
    ToolDefinition,
    model_request,
    model_request_sync,
)
from jevqueue.plugins.pydantic_ai.openai_forms import openai_messages, openai_tools
from jevqueue.plugins.pydantic_ai.request_shape import (
    called_tools,
    governed_request,
    local_response,
)

__all__ = ["AsyncPydanticAIHost", "PydanticAIHost"]


class PydanticAIHost:
    """The seven-method host over a Pydantic AI model, messages and tool definitions.

    Args:
        model: The model (a ``Model`` instance or a model name Pydantic AI knows).
        messages: The conversation (``ModelRequest`` / ``ModelResponse``), oldest first;
            read, never changed.
        tools: The function tools offered, as ``ToolDefinition`` s.
        settings: Model settings sent on every request.
        parameters: Request parameters to start from (output mode, output tools); their
            ``function_tools`` are replaced by ``tools``.
        interrupted: Consulted after the decision, before the model is called.

    Raises:
        ConfigurationError: ``tools`` holds something other than ``ToolDefinition`` s,
            or two tools share a name.
    """

    def __init__(
        self,
        model: Model | str,
        messages: Sequence[ModelMessage],
        tools: Sequence[ToolDefinition] = (),
        *,
        settings: ModelSettings | None = None,
        parameters: ModelRequestParameters | None = None,
        interrupted: Callable[[], bool] | None = None,
    ) -> None:
        tools = list(tools)
        for tool in tools:
            if not isinstance(tool, ToolDefinition):
                raise ConfigurationError(
                    f"tools must be pydantic_ai ToolDefinition objects (tool.tool_def), not "
                    f"{type(tool).__name__}"
                )
        names = [tool.name for tool in tools]
        if len(set(names)) != len(names):
            raise ConfigurationError(f"two tools share a name: {names}; give each its own")
        self.model = model
        self._messages = messages
        self._settings = settings
        base = parameters if parameters is not None else ModelRequestParameters()

        self._parameters = dataclasses.replace(base, function_tools=tools)
        self._interrupted = interrupted

    @property
    def parameters(self) -> ModelRequestParameters:
        """The request parameters a passthrough sends."""
        return self._parameters

    def tools(self) -> list[dict[str, Any]]:
        """The function tools, as OpenAI-style schemas."""
        return openai_tools(self._parameters.function_tools)

    def messages(self) -> list[dict[str, Any]]:
        """The conversation projected into OpenAI message form (new dicts)."""
        return openai_messages(self._messages)

    def request(
        self, *, force_tool: str | None, directive: str
    ) -> tuple[Sequence[ModelMessage], ModelSettings | None, ModelRequestParameters]:
        """The messages, settings and parameters ``generate`` sends, without sending them."""
        return governed_request(
            self._messages,
            self._settings,
            self._parameters,
            force_tool=force_tool,
            directive=directive,
        )

    def generate(self, *, force_tool: str | None, directive: str) -> ModelResponse:
        """Send one request in the mode ``force_tool`` / ``directive`` name."""
        messages, settings, parameters = self.request(force_tool=force_tool, directive=directive)
        return model_request_sync(
            self.model,
            list(messages),
            model_settings=settings,
            model_request_parameters=parameters,
        )

    def called_tools(self, response: Any) -> list[str]:
        """The function tools the reply calls (``ModelResponse.tool_calls``), in order."""
        return called_tools(response, self._parameters)

    def say(self, text: str) -> ModelResponse:
        """A ``ModelResponse`` with ``text``, built locally: no model call."""
        return local_response(text)

    def say_tool_call(self, name: str, arguments: Mapping[str, Any]) -> ModelResponse:
        """A ``ModelResponse`` calling ``name`` with ``arguments``, built locally."""
        return local_response(tool_call=(name, arguments))

    def interrupted(self) -> bool:
        """The ``interrupted`` callable's answer; False without one."""
        return bool(self._interrupted()) if self._interrupted is not None else False


class AsyncPydanticAIHost(PydanticAIHost):
    """:class:`PydanticAIHost` whose ``generate`` is a coroutine: use ``governor.astep``."""

    async def generate(  # type: ignore[override]
        self, *, force_tool: str | None, directive: str
    ) -> ModelResponse:
        """Send one request in the mode ``force_tool`` / ``directive`` name."""
        messages, settings, parameters = self.request(force_tool=force_tool, directive=directive)
        return await model_request(
            self.model,
            list(messages),
            model_settings=settings,
            model_request_parameters=parameters,
        )
