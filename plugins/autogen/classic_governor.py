"""``GovernorCapability``: the governor on every LLM reply of a classic AutoGen agent.

``GovernorCapability(governor).add_to_agent(assistant)`` registers a reply function, a
plain one and an ``async`` one (so sync and async chats are both governed), directly in
front of the agent's own LLM reply (``generate_oai_reply``): termination, the auto-reply
limit, human input and tool or code execution keep their places before it, and the LLM
is never asked twice. Each time the agent would ask its LLM, the reply function runs the
governor over the conversation and calls ``generate_oai_reply`` itself with the turn's
constraint (see :mod:`.classic_host`); the reply's ``tool_calls`` are read back before the
agent sends it, so a disobeying reply never reaches the executor.

``OpenAIWrapper.create`` lets each ``llm_config`` entry override the per-call arguments,
so an agent whose config holds ``tool_choice`` or ``parallel_tool_calls`` cannot be forced
per turn: the capability refuses it (when added and on every turn) with a
``ConfigurationError`` rather than send a constraint that would be replaced.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any, Literal

from jevqueue.errors import ConfigurationError, ProviderDisobeyedError
from jevqueue.governor import Decision
from jevqueue.plugins.autogen._classic_framework import Agent, AgentCapability, ConversableAgent
from jevqueue.plugins.autogen.classic_host import ClassicTurnHost

__all__ = ["OVERRIDING_KEYS", "GovernorCapability"]

OVERRIDING_KEYS = ("tool_choice", "parallel_tool_calls")
"""``llm_config`` keys that would override the per-turn constraint."""

_LLM_REPLIES = (ConversableAgent.generate_oai_reply, ConversableAgent.a_generate_oai_reply)


def _overriding(agent: Any, *, config_too: bool = False) -> list[str]:
    """The overriding keys in what the agent's client sends (and, when asked, its config)."""
    entries = getattr(getattr(agent, "client", None), "_config_list", None) or []
    found = sorted({key for entry in entries for key in OVERRIDING_KEYS if key in entry})
    config = getattr(agent, "llm_config", None)
    if config_too and config and hasattr(config, "get"):
        found += [
            key for key in OVERRIDING_KEYS if config.get(key) is not None and key not in found
        ]
    return found


class GovernorCapability(AgentCapability):  # type: ignore[misc]
    """Run the governor on every LLM reply of a classic AutoGen agent.

    Args:
        governor: The governor (default: ``Governor()`` with the lexical ballot). One
            governor per agent: ``governor.last`` describes that agent's latest turn.
        on_disobey: ``"raise"`` (default) raises ``ProviderDisobeyedError`` out of the chat;
            ``"message"`` replies with a local text that says the provider's reply was
            blocked. Nothing of the blocked reply runs either way.
        directive_role: The role of the appended directive (``"system"``; use ``"user"``
            for a client that accepts a system message only first).
        interrupted: A callable returning True when the user cancelled; consulted after
            the decision, before any provider call.

    Raises:
        ConfigurationError: An argument of the wrong kind.
    """

    def __init__(
        self,
        governor: Any = None,
        *,
        on_disobey: Literal["raise", "message"] = "raise",
        directive_role: Literal["system", "user"] = "system",
        interrupted: Callable[[], bool] | None = None,
    ) -> None:
        super().__init__()
        if governor is None:
            from jevqueue.governor import Governor

            governor = Governor()
        if not callable(getattr(governor, "step", None)) or not callable(
            getattr(governor, "astep", None)
        ):
            raise ConfigurationError(
                "governor must be a jevqueue Governor (step and astep); got "
                f"{type(governor).__name__}"
            )
        if on_disobey not in ("raise", "message"):
            raise ConfigurationError(f"on_disobey must be 'raise' or 'message', not {on_disobey!r}")
        if directive_role not in ("system", "user"):
            raise ConfigurationError(
                f"directive_role must be 'system' or 'user', not {directive_role!r}"
            )
        if interrupted is not None and not callable(interrupted):
            raise ConfigurationError("interrupted must be a callable returning a bool")
        self.governor = governor
        self.on_disobey = on_disobey
        self.directive_role = directive_role
        self._interrupted = interrupted
        self._decisions: deque[Decision] = deque(maxlen=1000)
        self.agents: list[Any] = []

    @property
    def last_decision(self) -> Decision | None:
        """The decision of the most recent governed reply."""
        return self._decisions[-1] if self._decisions else None

    @property
    def decisions(self) -> list[Decision]:
        """The decisions of recent replies, oldest first (the last 1000)."""
        return list(self._decisions)

    def add_to_agent(self, agent: ConversableAgent) -> None:
        """Govern ``agent``'s LLM replies, in sync and async chats.

        Raises:
            ConfigurationError: ``agent`` is not a ``ConversableAgent``, has no LLM, is
                already governed, or its ``llm_config`` sets ``tool_choice`` or
                ``parallel_tool_calls``.
        """
        if not isinstance(agent, ConversableAgent):
            raise ConfigurationError(
                f"GovernorCapability governs a ConversableAgent, not {type(agent).__name__}"
            )
        if agent.client is None:
            raise ConfigurationError(
                f"agent {agent.name!r} has no LLM (llm_config=False): there is no model turn to "
                "govern; add the capability to the agent that calls the model"
            )
        self._check(agent, config_too=True)
        entries = agent._reply_func_list
        if any(getattr(e["reply_func"], "__self__", None) is self for e in entries):
            raise ConfigurationError(f"agent {agent.name!r} is already governed by this capability")
        if any(getattr(e["reply_func"], "__name__", "") == "governed_reply" for e in entries):
            raise ConfigurationError(
                f"agent {agent.name!r} is already governed: add one capability"
            )
        position = next((i for i, e in enumerate(entries) if e["reply_func"] in _LLM_REPLIES), None)
        if position is None:
            raise ConfigurationError(
                f"agent {agent.name!r} has no generate_oai_reply registered (was it removed?): "
                "there is no LLM reply to govern"
            )
        # The async form is named a_<sync name> and marked ignore_async_in_sync_chat, so
        # AutoGen skips the sync form in async chats and the async form in sync chats.
        agent.register_reply(
            [Agent, None], self.a_governed_reply, position=position, ignore_async_in_sync_chat=True
        )
        agent.register_reply([Agent, None], self.governed_reply, position=position)
        self.agents.append(agent)

    def _check(self, agent: Any, *, config_too: bool = False) -> None:
        # Every turn reads the client's config entries: they are what OpenAIWrapper merges
        # over the per-call arguments, and AutoGen rebuilds them when a tool is registered.
        found = _overriding(agent, config_too=config_too)
        if found:
            raise ConfigurationError(
                f"agent {agent.name!r} sets {found} in its llm_config; AutoGen lets the config "
                "override every per-call value, so no turn could be forced or kept to prose. "
                "Remove them from llm_config: the capability sets them per turn"
            )

    def _host(self, agent: Any, messages: Any, sender: Any, asynchronous: bool) -> ClassicTurnHost:
        self._check(agent)
        if messages is None:
            messages = agent._oai_messages[sender]
        return ClassicTurnHost(
            agent,
            messages,
            sender,
            asynchronous=asynchronous,
            directive_role=self.directive_role,
            interrupted=self._interrupted,
        )

    def governed_reply(
        self, recipient: Any, messages: Any = None, sender: Any = None, config: Any = None
    ) -> tuple[bool, Any]:
        """The reply function of sync chats."""
        host = self._host(recipient, messages, sender, asynchronous=False)
        try:
            reply = self.governor.step(host)
        except ProviderDisobeyedError as exc:
            return True, self._blocked(exc)
        finally:
            self._record()
        return True, reply if reply is not None else recipient._default_auto_reply

    async def a_governed_reply(
        self, recipient: Any, messages: Any = None, sender: Any = None, config: Any = None
    ) -> tuple[bool, Any]:
        """The reply function of async chats."""
        host = self._host(recipient, messages, sender, asynchronous=True)
        try:
            reply = await self.governor.astep(host)
        except ProviderDisobeyedError as exc:
            return True, self._blocked(exc)
        finally:
            self._record()
        return True, reply if reply is not None else recipient._default_auto_reply

    def _blocked(self, exc: ProviderDisobeyedError) -> Any:
        if self.on_disobey == "raise":
            raise exc
        return {
            "content": f"jevqueue blocked the model's reply: {exc}. Nothing it asked for was run.",
            "role": "assistant",
        }

    def _record(self) -> None:
        last = getattr(self.governor, "last", None)
        if isinstance(last, Decision):
            self._decisions.append(last)
