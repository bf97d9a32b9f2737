"""The errors the CrewAI plugin raises out of a crew, shaped so CrewAI lets them through.

CrewAI retries a task whose agent raised (``Agent.max_retry_limit``) and swallows
exceptions raised inside hooks (fail-open). Only ``HookAborted`` is treated as a
deliberate stop everywhere: it is never retried and never swallowed. Each class here is
therefore both the jevqueue error (catch it as such) and a ``HookAborted``::

    ProviderDisobeyedError + HookAborted  -> CrewProviderDisobeyedError
    TurnInterruptedError   + HookAborted  -> CrewTurnInterruptedError
    ConfigurationError     + HookAborted  -> ForcingUnavailableError
"""

from __future__ import annotations

from crewai.hooks.dispatch import HookAborted
from jevqueue.errors import ConfigurationError, ProviderDisobeyedError, TurnInterruptedError

__all__ = ["CrewProviderDisobeyedError", "CrewTurnInterruptedError", "ForcingUnavailableError"]


class CrewProviderDisobeyedError(ProviderDisobeyedError, HookAborted):
    """The provider did not make exactly the forced call (or called a tool on a prose
    turn); nothing executed and the crew stops instead of retrying the task."""

    def __init__(
        self,
        message: str,
        *,
        expected: list[str] | None = None,
        called: list[str] | None = None,
    ) -> None:
        ProviderDisobeyedError.__init__(self, message, expected=expected, called=called)
        self.reason = message
        self.source = "jevqueue"


class CrewTurnInterruptedError(TurnInterruptedError, HookAborted):
    """The turn was interrupted after the decision and before any effect."""

    def __init__(self, message: str) -> None:
        TurnInterruptedError.__init__(self, message)
        self.reason = message
        self.source = "jevqueue"


class ForcingUnavailableError(ConfigurationError, HookAborted):
    """The governed LLM was asked to refuse ReAct text mode (``react="raise"``) and CrewAI
    is running the agent in it: no tool schemas reach the model, so nothing can be forced."""

    def __init__(self, message: str) -> None:
        ConfigurationError.__init__(self, message)
        self.reason = message
        self.source = "jevqueue"
