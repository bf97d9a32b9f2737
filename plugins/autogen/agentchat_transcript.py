"""What an AgentChat agent read, recorded in its workbench guard's transcript.

The guard labels every argument of a call by where its value occurs in what the agent read
(:class:`jevqueue.policy.Transcript`). Given ``guard=`` (the agent's
``PolicyWorkbench(...).guard``), :class:`~.agentchat_client.GovernedChatCompletionClient`
reads the messages of every model call into that transcript before it answers:

* **The user's words** are the ``UserMessage`` s whose ``source`` is one of
  ``user_sources`` (``"user"``: the ``TextMessage`` a run's ``task="..."`` becomes; add
  the name of a ``UserProxyAgent`` through which a person answers). Not the user's words:
  another agent's message handed over in a team (AgentChat shows it as a
  ``UserMessage`` whose ``source`` is that agent's name) and the system message.
* **Tool outputs.** ``guard.arun`` records each call the workbench runs; every other
  ``FunctionExecutionResult`` the model is shown (a tool of another workbench, a result
  restored with the agent's state) is recorded under its ``call_id``. Recording a call id
  twice keeps one copy; a call the guard refused holds its denial, not an output; a result
  without a call id (some models give none) cannot be told from the one the workbench
  recorded and is left to it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from jevqueue.errors import ConfigurationError
from jevqueue.plugins.autogen._agentchat_framework import (
    FunctionExecutionResultMessage,
    UserMessage,
)
from jevqueue.policy import Guard

__all__ = ["USER_SOURCES", "message_sources", "read_messages"]

USER_SOURCES = ("user",)
"""The sources whose messages are the user's words by default: a run's ``task``."""


def message_sources(sources: Iterable[str]) -> frozenset[str]:
    """``sources`` as a set of names.

    Raises:
        ConfigurationError: ``sources`` is a string, or holds something else than names.
    """
    try:
        names = None if isinstance(sources, str) else tuple(sources)
    except TypeError:  # not a collection at all
        names = None
    if names is None or not all(isinstance(name, str) and name for name in names):
        raise ConfigurationError(
            "user_sources must be a list of message sources, such as ['user', 'user_proxy'], "
            f"not {sources!r}"
        )
    return frozenset(names)


def read_messages(guard: Guard, messages: Sequence[Any], sources: frozenset[str]) -> None:
    """Record what ``messages`` show the model, as described above."""
    allowed = {j.call_id: j.allowed for j in list(guard.judgements) if j.call_id}
    for message in messages:
        if isinstance(message, UserMessage) and message.source in sources:
            text = _text(message.content)
            if text.strip():
                guard.record_user(text)
        elif isinstance(message, FunctionExecutionResultMessage):
            for result in message.content:
                if result.call_id and allowed.get(result.call_id, True):
                    guard.record_output(result.name, result.content, result.call_id)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(part for part in content if isinstance(part, str))  # text, not images
