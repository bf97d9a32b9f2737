"""A scripted Pydantic AI model for tests: the provider boundary, with no network.

:class:`ScriptedModel` wraps Pydantic AI's own ``FunctionModel``: hand ``scripted.model``
to a real ``Agent`` and the real agent loop runs against it. Each model request consumes
the next scripted step and is recorded as a :class:`ModelCall` (what the model was asked:
the messages in OpenAI form, the tools offered, ``allow_text_output``, ``tool_choice`` and
``parallel_tool_calls`` as the model received them). A request beyond the script fails
loudly, and :meth:`ScriptedModel.assert_complete` fails on an unconsumed step::

    scripted = ScriptedModel([tool_call("get_weather", {"city": "Lisbon"}), "Sunny."])
    agent = Agent(scripted.model, tools=[...], capabilities=[...])
    agent.run_sync("What is the weather in Lisbon?")
    scripted.assert_complete()

A step is a ``str`` (a text reply), a ``ToolCallPart`` from :func:`tool_call`, a list of
parts (several calls at once), a ``ModelResponse``, or a callable ``(ModelCall) -> step``.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jevqueue.plugins.pydantic_ai._framework import (
    AgentInfo,
    FunctionModel,
    ModelMessage,
    ModelResponse,
    TextPart,
    ToolCallPart,
)
from jevqueue.plugins.pydantic_ai.openai_forms import openai_messages

__all__ = ["ModelCall", "ScriptedModel", "UnexpectedModelCallError", "tool_call"]


class UnexpectedModelCallError(AssertionError):
    """The scripted model was asked for a response with no step left."""


def tool_call(
    name: str, arguments: Mapping[str, Any], *, call_id: str | None = None
) -> ToolCallPart:
    """One tool call part, with a fresh call id unless one is given."""
    return ToolCallPart(
        tool_name=name,
        args=dict(arguments),
        tool_call_id=call_id or f"call_{uuid.uuid4().hex[:12]}",
    )


@dataclass(frozen=True)
class ModelCall:
    """One request that reached the scripted model.

    Attributes:
        messages: The conversation as sent, in OpenAI message form.
        tools: The names of the function tools offered.
        output_tools: The names of the output tools offered.
        allow_text_output: Whether text may end the turn.
        tool_choice: The ``tool_choice`` setting the model received (``None`` when unset).
        parallel_tool_calls: The ``parallel_tool_calls`` setting (``None`` when unset).
        history: The Pydantic AI messages themselves, as sent.
    """

    messages: tuple[Mapping[str, Any], ...]
    tools: tuple[str, ...]
    output_tools: tuple[str, ...]
    allow_text_output: bool
    tool_choice: Any
    parallel_tool_calls: bool | None
    history: tuple[ModelMessage, ...]

    @property
    def forced_tool(self) -> str | None:
        """The one tool the request constrains the model to, or ``None``.

        Both levers must be pulled: the tools narrowed to exactly that one, and the
        setting naming it.
        """
        choice = self.tool_choice
        if (
            isinstance(choice, list)
            and len(choice) == 1
            and self.tools == (choice[0],)
            and not self.allow_text_output
        ):
            return str(choice[0])
        return None

    @property
    def tools_forbidden(self) -> bool:
        """True when no function tool is offered and the setting forbids them."""
        return not self.tools and self.tool_choice == "none"


Step = Any


class ScriptedModel:
    """A Pydantic AI model double that answers from a script and records every request.

    Args:
        steps: The replies, in order.
        model_name: The model name the replies carry.

    Attributes:
        model: The ``FunctionModel`` to hand to an ``Agent`` (or to a host).
        requests: One :class:`ModelCall` per request received.
        responses: The ``ModelResponse`` returned for each request.
    """

    def __init__(self, steps: Sequence[Step] = (), *, model_name: str = "scripted") -> None:
        self._steps = list(steps)
        self._unexpected = 0
        self.requests: list[ModelCall] = []
        self.responses: list[ModelResponse] = []
        self.model = FunctionModel(self._answer, model_name=model_name)
        self._model_name = model_name

    @property
    def remaining(self) -> int:
        """How many scripted steps are left."""
        return len(self._steps)

    def assert_complete(self) -> None:
        """Fail when a request came with no step left, or a step was never consumed."""
        assert self._unexpected == 0, f"{self._unexpected} unexpected model request(s)"
        assert not self._steps, f"{len(self._steps)} scripted step(s) never consumed"

    def _answer(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        settings = info.model_settings or {}
        call = ModelCall(
            messages=tuple(openai_messages(messages)),
            tools=tuple(tool.name for tool in info.function_tools),
            output_tools=tuple(tool.name for tool in info.output_tools),
            allow_text_output=info.allow_text_output,
            tool_choice=settings.get("tool_choice"),
            parallel_tool_calls=settings.get("parallel_tool_calls"),
            history=tuple(messages),
        )
        self.requests.append(call)
        if not self._steps:
            self._unexpected += 1
            raise UnexpectedModelCallError(
                f"unexpected model request #{len(self.requests)}: the script has no step left "
                f"(tools offered {call.tools}, tool_choice {call.tool_choice!r})"
            )
        step: Step = self._steps.pop(0)
        while callable(step) and not isinstance(step, (ModelResponse, ToolCallPart)):
            step = step(call)
        response = self._response(step)
        self.responses.append(response)
        return response

    def _response(self, step: Step) -> ModelResponse:
        if isinstance(step, ModelResponse):
            return step
        if isinstance(step, str):
            parts: list[Any] = [TextPart(content=step)]
        elif isinstance(step, ToolCallPart):
            parts = [step]
        elif isinstance(step, list):
            parts = list(step)
        else:
            raise TypeError(
                f"a scripted step must be a str, a ToolCallPart, a list of parts, a "
                f"ModelResponse or a callable, not {type(step).__name__}"
            )
        return ModelResponse(parts=parts, model_name=self._model_name)
