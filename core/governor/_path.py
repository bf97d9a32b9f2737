"""The nine paths a governed turn can take."""

from __future__ import annotations

from enum import Enum

__all__ = ["Path"]


class Path(str, Enum):
    """Which of the nine paths a turn took; the values are part of the public contract.

    ===================  ==================================================================
    ``tool``             one tool is confidently best: the provider is forced to call it
    ``static_tool``      that tool has a validated ``static_tools`` payload: called locally
    ``prose``            no tool fits: the provider answers without tools
    ``clarify``          two or more tools fit about equally: the user is asked which
    ``risk_stop``        a risk rule fired: its reason is said, nothing else happens
    ``delegate``         not confident either way: a true passthrough
    ``error_delegate``   the decision failed and ``on_error="delegate"``: a passthrough
    ``error_raise``      the decision failed and ``on_error="raise"``: ``DecisionError``
    ``interrupted``      the host was interrupted before any effect
    ===================  ==================================================================
    """

    TOOL = "tool"
    STATIC_TOOL = "static_tool"
    PROSE = "prose"
    CLARIFY = "clarify"
    RISK_STOP = "risk_stop"
    DELEGATE = "delegate"
    ERROR_DELEGATE = "error_delegate"
    ERROR_RAISE = "error_raise"
    INTERRUPTED = "interrupted"

    def __str__(self) -> str:
        return self.value

    @property
    def provider_calls(self) -> int:
        """How many provider calls this path makes: 1 for ``generate`` paths, else 0."""
        return 1 if self in _GENERATING else 0


_GENERATING = frozenset({Path.TOOL, Path.PROSE, Path.DELEGATE, Path.ERROR_DELEGATE})
