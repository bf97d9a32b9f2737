"""A host that records what it was asked to do and answers from a script.

:class:`ScriptedHost` implements the seven :class:`~jevqueue.host.Host` methods over plain
data: a toolset, a conversation, and a :class:`~jevqueue.testing.ScriptedModel` (or a list
of canned responses) standing in for the provider. It records every ``generate``, ``say``
and ``say_tool_call`` with its arguments, the message copy it built and the request an
OpenAI-compatible host would have sent, and counts provider calls. Responses are OpenAI
chat-completion bodies; ``say`` and ``say_tool_call`` stamp theirs with
:data:`~jevqueue.host.LOCAL_MODEL_ID`. :class:`AsyncScriptedHost` is the same host with
``async`` methods, for :meth:`Governor.astep <jevqueue.Governor.astep>`.

Example:
    >>> from jevqueue import Governor
    >>> from jevqueue.testing import ScriptedHost, tool_call_response
    >>> host = ScriptedHost(
    ...     tools=[{"name": "read_file", "description": "Read a text file from disk."}],
    ...     messages=[{"role": "user", "content": "read the file notes.txt"}],
    ...     responses=[tool_call_response(("read_file", {"path": "notes.txt"}))],
    ... )
    >>> response = Governor().step(host)  # doctest: +SKIP
    >>> host.calls[0].force_tool  # doctest: +SKIP
    'read_file'
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from jevqueue.governor._messages import with_directive
from jevqueue.host import LOCAL_MODEL_ID
from jevqueue.testing.scripted_model import ModelCall, ScriptedModel, Step

__all__ = ["AsyncScriptedHost", "HostCall", "ScriptedHost", "called_tool_names"]


@dataclass(frozen=True)
class HostCall:
    """One effect the host was asked for.

    Attributes:
        kind: ``"generate"``, ``"say"`` or ``"say_tool_call"``.
        force_tool: ``generate``'s ``force_tool``.
        directive: ``generate``'s directive (``""`` for the passthrough and for says).
        messages: The message list ``generate`` built and sent (a copy: the directive is
            appended only when non-empty); ``None`` for says.
        request: The body an OpenAI-compatible host would send for this ``generate``:
            ``tool_choice`` and ``parallel_tool_calls`` appear only when constrained.
        text: ``say``'s text.
        name: ``say_tool_call``'s tool name.
        arguments: ``say_tool_call``'s arguments.
        response: What the host returned.
    """

    kind: Literal["generate", "say", "say_tool_call"]
    force_tool: str | None = None
    directive: str = ""
    messages: Sequence[Mapping[str, Any]] | None = None
    request: Mapping[str, Any] | None = None
    text: str | None = None
    name: str | None = None
    arguments: Mapping[str, Any] | None = None
    response: Any = None


def called_tool_names(response: Any) -> list[str]:
    """The tool names an OpenAI chat-completion body calls, in order (``[]`` for prose).

    Raises:
        TypeError: ``response`` is not a chat-completion body.
    """
    try:
        message = response["choices"][0]["message"]
    except (KeyError, IndexError, TypeError) as exc:
        raise TypeError(
            f"expected an OpenAI chat-completion body with choices[0].message, got {response!r}; "
            "script responses with text_response() or tool_call_response()"
        ) from exc
    return [call["function"]["name"] for call in message.get("tool_calls") or ()]


def _local_response(message: dict[str, Any], finish_reason: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-local",
        "object": "chat.completion",
        "model": LOCAL_MODEL_ID,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
    }


class ScriptedHost:
    """A recording host over plain data, with a scripted provider.

    Args:
        tools: The toolset ``tools()`` returns (either OpenAI shape), as given.
        messages: The conversation ``messages()`` returns: this very list, never copied
            and never mutated by the host.
        responses: The provider: a :class:`~jevqueue.testing.ScriptedModel`, or a list of
            responses (each accepts any call) that ``generate`` returns in order.
        interrupted: What ``interrupted()`` reports until :meth:`interrupt` is called.
        model_id: The model id an OpenAI-compatible request would name.

    Attributes:
        toolset: The tools list (replace or edit it between turns).
        conversation: The messages list (append tool results to it between turns).
        model: The scripted provider.
        calls: Every ``generate``/``say``/``say_tool_call``, in order.
        provider_calls: How many times the provider was called.
        interrupted_checks: How many times ``interrupted()`` was consulted.
    """

    def __init__(
        self,
        tools: list[dict[str, Any]] | None = None,
        messages: list[dict[str, Any]] | None = None,
        responses: ScriptedModel | Sequence[Any] = (),
        *,
        interrupted: bool = False,
        model_id: str = "scripted-model",
    ) -> None:
        self.toolset: list[dict[str, Any]] = tools if tools is not None else []
        self.conversation: list[dict[str, Any]] = messages if messages is not None else []
        self.model: ScriptedModel = (
            responses
            if isinstance(responses, ScriptedModel)
            else ScriptedModel([Step(response) for response in responses])
        )
        self.model_id = model_id
        self.calls: list[HostCall] = []
        self.provider_calls = 0
        self.interrupted_checks = 0
        self._interrupted = interrupted

    # --- the seven Host methods ----------------------------------------------------

    def tools(self) -> list[dict[str, Any]]:
        """The toolset, as given."""
        return self.toolset

    def messages(self) -> list[dict[str, Any]]:
        """The conversation: the very list given, never copied."""
        return self.conversation

    def generate(self, *, force_tool: str | None, directive: str) -> Any:
        """Build the message copy and request, record them, and ask the scripted provider.

        Raises:
            ScriptedModelError: The call is not the one the script expects next.
        """
        sent = with_directive(self.conversation, directive)
        request: dict[str, Any] = {"model": self.model_id, "messages": sent}
        if self.toolset:
            request["tools"] = self.toolset
        if force_tool is not None:
            request["tool_choice"] = {"type": "function", "function": {"name": force_tool}}
            request["parallel_tool_calls"] = False
        elif directive:
            request["tool_choice"] = "none"
        self.provider_calls += 1
        call = HostCall(
            "generate", force_tool=force_tool, directive=directive, messages=sent, request=request
        )
        try:
            response = self.model(ModelCall(sent, self.toolset, force_tool, directive))
        except BaseException:
            self.calls.append(call)  # recorded even when the script rejects the call
            raise
        self.calls.append(replace(call, response=response))
        return response

    def called_tools(self, response: Any) -> list[str]:
        """The tool names the response calls (see :func:`called_tool_names`)."""
        return called_tool_names(response)

    def say(self, text: str) -> dict[str, Any]:
        """A local response carrying ``text``, model id ``jevqueue-local``; no provider call."""
        response = _local_response({"role": "assistant", "content": text}, "stop")
        self.calls.append(HostCall("say", text=text, response=response))
        return response

    def say_tool_call(self, name: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """A local response calling ``name`` with ``arguments``; no provider call."""
        call = {
            "id": "call_local_0",
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(dict(arguments))},
        }
        response = _local_response(
            {"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls"
        )
        self.calls.append(
            HostCall("say_tool_call", name=name, arguments=arguments, response=response)
        )
        return response

    def interrupted(self) -> bool:
        """The interruption flag (counted in ``interrupted_checks``)."""
        self.interrupted_checks += 1
        return self._interrupted

    # --- test helpers --------------------------------------------------------------

    def interrupt(self, value: bool = True) -> None:
        """Set what ``interrupted()`` reports from now on."""
        self._interrupted = value

    @property
    def generate_calls(self) -> list[HostCall]:
        """The recorded ``generate`` calls."""
        return [call for call in self.calls if call.kind == "generate"]

    @property
    def local_calls(self) -> list[HostCall]:
        """The recorded ``say`` and ``say_tool_call`` calls."""
        return [call for call in self.calls if call.kind != "generate"]


class AsyncScriptedHost:
    """:class:`ScriptedHost` with ``async`` methods, for ``await governor.astep(host)``.

    Takes the same arguments; ``.host`` is the recording host underneath, and ``calls``,
    ``provider_calls``, ``model`` and the helpers are read through to it.
    """

    def __init__(
        self,
        tools: list[dict[str, Any]] | None = None,
        messages: list[dict[str, Any]] | None = None,
        responses: ScriptedModel | Sequence[Any] = (),
        *,
        interrupted: bool = False,
        model_id: str = "scripted-model",
    ) -> None:
        self.host = ScriptedHost(
            tools, messages, responses, interrupted=interrupted, model_id=model_id
        )

    async def tools(self) -> list[dict[str, Any]]:
        """See :meth:`ScriptedHost.tools`."""
        return self.host.tools()

    async def messages(self) -> list[dict[str, Any]]:
        """See :meth:`ScriptedHost.messages`."""
        return self.host.messages()

    async def generate(self, *, force_tool: str | None, directive: str) -> Any:
        """See :meth:`ScriptedHost.generate`."""
        return self.host.generate(force_tool=force_tool, directive=directive)

    async def called_tools(self, response: Any) -> list[str]:
        """See :meth:`ScriptedHost.called_tools`."""
        return self.host.called_tools(response)

    async def say(self, text: str) -> dict[str, Any]:
        """See :meth:`ScriptedHost.say`."""
        return self.host.say(text)

    async def say_tool_call(self, name: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """See :meth:`ScriptedHost.say_tool_call`."""
        return self.host.say_tool_call(name, arguments)

    async def interrupted(self) -> bool:
        """See :meth:`ScriptedHost.interrupted`."""
        return self.host.interrupted()

    @property
    def calls(self) -> list[HostCall]:
        """The underlying host's recorded calls."""
        return self.host.calls

    @property
    def provider_calls(self) -> int:
        """The underlying host's provider call count."""
        return self.host.provider_calls

    @property
    def model(self) -> ScriptedModel:
        """The scripted provider."""
        return self.host.model

    def interrupt(self, value: bool = True) -> None:
        """See :meth:`ScriptedHost.interrupt`."""
        self.host.interrupt(value)
