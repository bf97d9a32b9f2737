"""The :class:`~jevqueue.host.Host` over one CrewAI model call.

CrewAI's executor calls ``llm.call(messages, tools=..., ...)`` once per agent turn, in
native function-calling mode with the agent's tools as OpenAI-style schemas. The host
serves the governor that call's messages and tools and maps the three ``generate`` modes
onto the only lever ``BaseLLM.call`` offers — the ``tools`` it passes on:

==========  ==========  ==============================================================
force_tool  directive   the host passes on
==========  ==========  ==============================================================
a name      non-empty   that tool's schema only (and only its function, if CrewAI
                        passed ``available_functions``), the directive on a copy of the
                        messages, and a :class:`~.turn.ToolConstraint` published for a
                        ``BaseLLM`` that can set a named ``tool_choice``
None        non-empty   no tools, the directive on a copy of the messages
None        ``""``      exactly what CrewAI passed, the same objects: a true passthrough
==========  ==========  ==============================================================

Replies are read back with CrewAI's own normaliser (``extract_tool_call_info``), so the
governor checks what the executor will dispatch, not a second reading of the reply.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from crewai.utilities.agent_utils import extract_tool_call_info, is_tool_call_list
from jevqueue.errors import ConfigurationError
from jevqueue.governor import normalize_tool, with_directive
from jevqueue.host import LOCAL_MODEL_ID
from jevqueue.plugins.crewai.turn import ToolConstraint, TurnScope, tool_constraint_scope

__all__ = ["UNREADABLE_CALL", "CrewTurnHost", "LocalText", "local_tool_call"]

UNREADABLE_CALL = "<unreadable tool call>"
"""The name :meth:`CrewTurnHost.called_tools` reports for a call CrewAI cannot read."""


class LocalText(str):
    """A reply built locally by ``say``: a plain ``str`` to CrewAI, stamped with a model id."""

    model: str = LOCAL_MODEL_ID


def local_tool_call(name: str, arguments: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A one-call native reply built locally, in the OpenAI shape CrewAI's executor reads."""
    return [
        {
            "id": f"{LOCAL_MODEL_ID}-{uuid.uuid4().hex[:12]}",
            "type": "function",
            "model": LOCAL_MODEL_ID,
            "function": {"name": name, "arguments": json.dumps(dict(arguments))},
        }
    ]


def _as_messages(messages: Any) -> list[Mapping[str, Any]]:
    if isinstance(messages, str):
        return [{"role": "user", "content": messages}]
    return list(messages)


class CrewTurnHost:
    """The seven host methods over one ``BaseLLM.call`` (or ``acall``).

    Args:
        llm: The user's LLM, which makes the provider call.
        messages: The messages CrewAI passed (a ``str`` or a list of message dicts).
        tools: The tool schemas CrewAI passed.
        call_kwargs: The remaining ``call`` arguments, passed on unchanged.
        turn: The turn scope the constraint of this turn is recorded in.
        interrupted: A callable that reports a user cancellation, if any.
        asynchronous: Use ``llm.acall`` (the host's ``generate`` returns an awaitable).
    """

    def __init__(
        self,
        llm: Any,
        messages: Any,
        tools: list[dict[str, Any]],
        call_kwargs: Mapping[str, Any],
        *,
        turn: TurnScope,
        interrupted: Callable[[], bool] | None = None,
        asynchronous: bool = False,
    ) -> None:
        self._llm = llm
        self._given_messages = messages
        self._messages = _as_messages(messages)
        self._given_tools = tools
        self._tools = list(tools)
        self._kwargs = dict(call_kwargs)
        self._turn = turn
        self._interrupted = interrupted
        self._asynchronous = asynchronous
        self._by_name = {normalize_tool(tool).name: tool for tool in self._tools}

    # --- reading ----------------------------------------------------------------------

    def tools(self) -> list[dict[str, Any]]:
        """The tools CrewAI offered this turn, as it passed them."""
        return list(self._tools)

    def messages(self) -> list[dict[str, Any]]:
        """The conversation CrewAI built, oldest first (a new list; messages not copied)."""
        return [
            message if isinstance(message, dict) else dict(message) for message in self._messages
        ]

    # --- effects ----------------------------------------------------------------------

    def generate(self, *, force_tool: str | None, directive: str) -> Any:
        """Call the user's LLM in one of the three modes (see the module docstring)."""
        if force_tool is None and not directive:
            self._turn.begin(None)
            return self._call(self._given_messages, self._given_tools, self._kwargs, None)
        messages = with_directive(self._messages, directive)
        kwargs = dict(self._kwargs)
        available = kwargs.get("available_functions")
        if force_tool is not None:
            schema = self._by_name.get(force_tool)
            if schema is None:
                raise ConfigurationError(
                    f"the governor forced {force_tool!r}, which CrewAI did not offer this turn "
                    f"(offered: {sorted(self._by_name)})"
                )
            constraint = ToolConstraint.forced(force_tool)
            tools: list[dict[str, Any]] | None = [schema]
            if isinstance(available, Mapping):
                kwargs["available_functions"] = {
                    name: fn for name, fn in available.items() if name == force_tool
                }
        else:
            constraint = ToolConstraint.no_tools()
            tools = None
            if available is not None:
                kwargs["available_functions"] = None
        self._turn.begin(constraint)
        return self._call(messages, tools, kwargs, constraint)

    def _call(
        self,
        messages: Any,
        tools: list[dict[str, Any]] | None,
        kwargs: Mapping[str, Any],
        constraint: ToolConstraint | None,
    ) -> Any:
        if self._asynchronous:
            return self._acall(messages, tools, kwargs, constraint)
        with tool_constraint_scope(constraint):
            return self._llm.call(messages, tools=tools, **kwargs)

    async def _acall(
        self,
        messages: Any,
        tools: list[dict[str, Any]] | None,
        kwargs: Mapping[str, Any],
        constraint: ToolConstraint | None,
    ) -> Any:
        with tool_constraint_scope(constraint):
            return await self._llm.acall(messages, tools=tools, **kwargs)

    def called_tools(self, response: Any) -> list[str]:
        """The tools the reply calls, read the way CrewAI's executor reads them."""
        if not (isinstance(response, list) and response and is_tool_call_list(response)):
            return []
        names: list[str] = []
        for call in response:
            info = extract_tool_call_info(call)
            names.append(info[1] if info is not None else UNREADABLE_CALL)
        return names

    def say(self, text: str) -> LocalText:
        """A final answer built locally; no provider call, no tool may run this turn."""
        self._turn.begin(ToolConstraint.no_tools(local=True))
        return LocalText(text)

    def say_tool_call(self, name: str, arguments: Mapping[str, Any]) -> list[dict[str, Any]]:
        """A one-call reply built locally; the executor runs it through the tool guard."""
        self._turn.begin(ToolConstraint.forced(name, local=True))
        return local_tool_call(name, arguments)

    def interrupted(self) -> bool:
        """Whether the user cancelled; ``False`` when no callable was given."""
        return bool(self._interrupted()) if self._interrupted is not None else False
