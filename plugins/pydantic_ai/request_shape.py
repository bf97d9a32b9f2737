"""The three request shapes of ``generate``, on Pydantic AI's own request objects.

Pydantic AI sends a model request as three things: the messages, the ``ModelSettings``
and the ``ModelRequestParameters`` (the tool definitions, the output mode, whether text
may end the turn). :func:`governed_request` returns the three for one mode:

* **forced** (``force_tool`` set): the parameters are narrowed to the one chosen tool
  (``function_tools=[chosen]``, ``allow_text_output=False``) and the settings name it
  (``tool_choice=[name]``, ``parallel_tool_calls=False``). Pydantic AI folds a choice that
  names every offered tool into ``"required"``, so an OpenAI-compatible model receives
  ``tools=[chosen]``, ``tool_choice="required"``, ``parallel_tool_calls=false``: it must
  call a tool, exactly one, and only one is offered (a form that servers without named
  choices, llama.cpp among them, also honour). The directive is appended to a copy of the
  messages.
* **prose** (``force_tool=None``, a directive): no function tool is offered and the
  settings forbid them (``tool_choice="none"``); output tools stay, so an agent with a
  structured output type can still give its answer.
* **passthrough** (``force_tool=None``, ``directive=""``): the three objects the caller
  gave, unchanged and not copied.

:func:`called_tools` is the read-back: ``ModelResponse.tool_calls`` (Pydantic AI's own
view of the reply), minus the output tools, which carry an answer rather than an effect.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from jevqueue.errors import ConfigurationError
from jevqueue.host import LOCAL_MODEL_ID
from jevqueue.plugins.pydantic_ai._framework import (
    ModelMessage,
    ModelRequest,
    ModelRequestParameters,
    ModelResponse,
    ModelSettings,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
)

__all__ = [
    "called_tools",
    "governed_request",
    "local_response",
    "with_directive",
]


def with_directive(messages: Sequence[ModelMessage], directive: str) -> list[ModelMessage]:
    """A new message list whose last request also carries ``directive`` as a system part.

    The caller's list and its messages are left as they are: the last ``ModelRequest`` is
    replaced by a copy with one more part, so the prompt-cache prefix stays intact.
    """
    copied = list(messages)
    if copied and isinstance(copied[-1], ModelRequest):
        last = copied[-1]
        copied[-1] = dataclasses.replace(
            last, parts=[*last.parts, SystemPromptPart(content=directive)]
        )
    else:
        copied.append(ModelRequest(parts=[SystemPromptPart(content=directive)]))
    return copied


def governed_request(
    messages: Sequence[ModelMessage],
    settings: ModelSettings | None,
    parameters: ModelRequestParameters,
    *,
    force_tool: str | None,
    directive: str,
) -> tuple[Sequence[ModelMessage], ModelSettings | None, ModelRequestParameters]:
    """The messages, settings and parameters to send for one ``generate`` mode.

    Args:
        messages: The request's messages (never changed).
        settings: The request's model settings (never changed).
        parameters: The request's parameters (never changed).
        force_tool: The one tool the model must call, or ``None``.
        directive: The governor's note; ``""`` with ``force_tool=None`` is the passthrough.

    Returns:
        ``(messages, settings, parameters)``: the inputs themselves for the passthrough,
        new objects otherwise.

    Raises:
        ConfigurationError: ``force_tool`` is not among the request's function tools.
    """
    if force_tool is None and not directive:
        return messages, settings, parameters
    if force_tool is not None:
        chosen = [tool for tool in parameters.function_tools if tool.name == force_tool]
        if not chosen:
            offered = sorted(tool.name for tool in parameters.function_tools)
            raise ConfigurationError(
                f"cannot force {force_tool!r}: the request offers no function tool by that "
                f"name (it offers {offered}); force only a tool the agent has this step"
            )
        narrowed = dataclasses.replace(
            parameters, function_tools=chosen[:1], allow_text_output=False
        )
        forced: ModelSettings = {
            **(settings or {}),
            "tool_choice": [force_tool],
            "parallel_tool_calls": False,
        }
        return with_directive(messages, directive), forced, narrowed
    silent = dataclasses.replace(parameters, function_tools=[])
    forbidden: ModelSettings = {**(settings or {}), "tool_choice": "none"}
    return with_directive(messages, directive), forbidden, silent


def called_tools(response: Any, parameters: ModelRequestParameters | None = None) -> list[str]:
    """The function tools ``response`` calls, in order; ``[]`` for prose.

    Args:
        response: The model's ``ModelResponse``.
        parameters: The request's parameters; calls of its output tools are left out.
    """
    output = {tool.name for tool in parameters.output_tools} if parameters is not None else set()
    calls = getattr(response, "tool_calls", None) or []
    return [call.tool_name for call in calls if call.tool_name not in output]


def local_response(
    text: str = "", *, tool_call: tuple[str, Mapping[str, Any]] | None = None
) -> ModelResponse:
    """A ``ModelResponse`` built locally, stamped ``model_name="jevqueue-local"``.

    Args:
        text: The response text.
        tool_call: ``(name, arguments)`` to make it call one tool, with a fresh call id.
    """
    if tool_call is not None:
        name, arguments = tool_call
        part: Any = ToolCallPart(
            tool_name=name,
            args=dict(arguments),
            tool_call_id=f"call_jevqueue_{uuid.uuid4().hex[:16]}",
        )
    else:
        part = TextPart(content=text)
    return ModelResponse(parts=[part], model_name=LOCAL_MODEL_ID)
