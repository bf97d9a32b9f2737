"""What one model turn allows: the constraint the governed LLM set, and who can read it.

CrewAI's executor runs any tool the agent owns, even one that was not offered to the model
that turn. The governed LLM records each turn's :class:`ToolConstraint` in a
:class:`TurnScope`; the tool guard reads it and refuses a call the turn did not allow. A
turn lasts from one model call to the next: forcing is per turn and never persists.

During the provider call the constraint is also published in a context variable, so a
``BaseLLM`` that can honour a named ``tool_choice`` (CrewAI's ``call()`` has no parameter
for it) reads it with :func:`current_tool_constraint`.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from jevqueue.errors import ControlSignal

__all__ = [
    "ToolConstraint",
    "ToolNotOfferedError",
    "TurnScope",
    "current_tool_constraint",
    "tool_constraint_scope",
]


class ToolNotOfferedError(ControlSignal):
    """A call of a tool the current turn did not offer; it was refused, not run."""


@dataclass(frozen=True)
class ToolConstraint:
    """What the model may call this turn.

    Attributes:
        force_tool: The one tool the turn is constrained to, or ``None``.
        forbid_tools: True when the turn allows no tool call at all (prose, or a reply
            built locally by ``say``).
        parallel_tool_calls: ``False`` on a forced turn (exactly one call); ``None`` when
            the turn says nothing about it.
        offered: The tool names passed to the provider this turn.
        local: True when the reply was built locally (``say`` / ``say_tool_call``) and no
            provider saw the turn.
    """

    force_tool: str | None = None
    forbid_tools: bool = False
    parallel_tool_calls: bool | None = None
    offered: tuple[str, ...] = ()
    local: bool = False

    @classmethod
    def forced(cls, name: str, *, local: bool = False) -> ToolConstraint:
        """Exactly one call of ``name``."""
        return cls(force_tool=name, parallel_tool_calls=False, offered=(name,), local=local)

    @classmethod
    def no_tools(cls, *, local: bool = False) -> ToolConstraint:
        """No tool call at all."""
        return cls(forbid_tools=True, local=local)

    def refusal(self, tool_name: str) -> str | None:
        """Why a call of ``tool_name`` breaks this constraint, or ``None`` when it does not."""
        if self.force_tool is not None and tool_name != self.force_tool:
            return (
                f"tool {tool_name!r} was not offered this turn: the turn is constrained to "
                f"{self.force_tool!r}"
            )
        if self.forbid_tools:
            return f"tool {tool_name!r} was not offered this turn: the turn allows no tool call"
        return None


class TurnScope:
    """The constraint of the current turn, shared by a governed LLM and its tool guard.

    One scope belongs to one agent: two agents running at the same time need two guards
    (or two scopes), or one agent's forced turn would refuse the other's calls.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._constraint: ToolConstraint | None = None

    @property
    def constraint(self) -> ToolConstraint | None:
        """The current turn's constraint; ``None`` when the turn constrains nothing."""
        with self._lock:
            return self._constraint

    def begin(self, constraint: ToolConstraint | None) -> None:
        """Start a new turn with ``constraint`` (``None``: unconstrained passthrough)."""
        with self._lock:
            self._constraint = constraint

    def refusal(self, tool_name: str) -> str | None:
        """Why the current turn refuses a call of ``tool_name``, or ``None``."""
        constraint = self.constraint
        return None if constraint is None else constraint.refusal(tool_name)


_CURRENT: ContextVar[ToolConstraint | None] = ContextVar(
    "jevqueue_crewai_tool_constraint", default=None
)


def current_tool_constraint() -> ToolConstraint | None:
    """The constraint of the provider call in progress, for a ``BaseLLM`` that can honour it.

    ``None`` outside a governed call and on the passthrough.
    """
    return _CURRENT.get()


@contextmanager
def tool_constraint_scope(constraint: ToolConstraint | None) -> Iterator[None]:
    """Publish ``constraint`` to :func:`current_tool_constraint` for the duration of a call."""
    token = _CURRENT.set(constraint)
    try:
        yield
    finally:
        _CURRENT.reset(token)
