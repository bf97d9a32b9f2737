"""The governor as a Pydantic AI capability: one decision per model request of a run.

::

    agent = Agent(model, tools=[...], capabilities=[GovernorCapability(governor), policy])

:class:`GovernorCapability` hooks ``wrap_model_request``: for each request the agent
loop makes, it hands the governor a host over that one request (its messages, settings,
parameters and the handler that calls the model). The host sends the request in the
shape :mod:`.request_shape` describes, and the governor reads the reply back with
``ModelResponse.tool_calls`` before Pydantic AI gets it. A reply that does not make
exactly the forced call (or that calls a tool on a prose turn) raises
:class:`~jevqueue.errors.ProviderDisobeyedError` out of the run: the loop never reaches
its tool step, so none of the reply's calls executes.

Nothing persists between requests: the narrowed tools and the named ``tool_choice``
exist only in the copy handed to the model for that request, so a tool forced once is
never forced again, and the directive never enters the run's message history.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from jevqueue.governor import Governor
from jevqueue.plugins.pydantic_ai._framework import (
    AbstractCapability,
    ModelRequestContext,
    ModelResponse,
    RunContext,
)
from jevqueue.plugins.pydantic_ai.openai_forms import openai_messages, openai_tools
from jevqueue.plugins.pydantic_ai.request_shape import (
    called_tools,
    governed_request,
    local_response,
)

__all__ = ["GovernorCapability"]


def _request_context(
    original: ModelRequestContext, messages: Any, settings: Any, parameters: Any
) -> ModelRequestContext:
    changed = ModelRequestContext(
        model=original.model,
        messages=list(messages),
        model_settings=settings,
        model_request_parameters=parameters,
    )
    # Not init fields: carry them over, or a streamed run would be sent as a plain one.
    changed.model_id = original.model_id
    changed.streaming = original.streaming
    return changed


class _RequestHost:
    """The seven-method host over one model request of an agent run."""

    def __init__(
        self,
        request: ModelRequestContext,
        handler: Callable[[ModelRequestContext], Any],
        interrupted: Callable[[], bool] | None,
    ) -> None:
        self._request = request
        self._handler = handler
        self._interrupted = interrupted

    def tools(self) -> list[dict[str, Any]]:
        return openai_tools(self._request.model_request_parameters.function_tools)

    def messages(self) -> list[dict[str, Any]]:
        return openai_messages(self._request.messages)

    def generate(self, *, force_tool: str | None, directive: str) -> Any:
        request = self._request
        if force_tool is None and not directive:
            return self._handler(request)  # the passthrough: the request as the loop built it
        messages, settings, parameters = governed_request(
            request.messages,
            request.model_settings,
            request.model_request_parameters,
            force_tool=force_tool,
            directive=directive,
        )
        return self._handler(_request_context(request, messages, settings, parameters))

    def called_tools(self, response: Any) -> list[str]:
        return called_tools(response, self._request.model_request_parameters)

    def say(self, text: str) -> ModelResponse:
        return local_response(text)

    def say_tool_call(self, name: str, arguments: Mapping[str, Any]) -> ModelResponse:
        return local_response(tool_call=(name, arguments))

    def interrupted(self) -> bool:
        return bool(self._interrupted()) if self._interrupted is not None else False


@dataclass
class GovernorCapability(AbstractCapability[Any]):
    """Runs the governor on every model request of a Pydantic AI agent.

    Attributes:
        governor: The governor (``Governor()`` when omitted); ``governor.last`` holds the
            latest decision.
        interrupted: Consulted after each decision, before the model is called. Pydantic
            AI cancels a run by cancelling its task, so there is usually nothing to
            consult; pass a callable when your application keeps a flag of its own.
    """

    governor: Governor = dataclasses.field(default_factory=Governor)
    interrupted: Callable[[], bool] | None = None

    async def wrap_model_request(
        self,
        ctx: RunContext[Any],
        *,
        request_context: ModelRequestContext,
        handler: Callable[[ModelRequestContext], Any],
    ) -> ModelResponse:
        """Decide the request's path, send it in that shape, read the reply back.

        Raises:
            ProviderDisobeyedError: The reply did not obey the constraint; nothing runs.
            TurnInterruptedError: ``interrupted()`` was true; the model was not called.
        """
        host = _RequestHost(request_context, handler, self.interrupted)
        response: ModelResponse = await self.governor.astep(host)
        return response
