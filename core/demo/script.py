"""The demo session: what the user says each turn, which paths the turns take, and what
the scripted model answers when it is asked.

Each user message is routed by the default :class:`~jevqueue.LexicalBallot` with the
default :class:`~jevqueue.Thresholds`; nothing here tells the governor where to go. The
``expect`` field only states where the turn is meant to land, so the runner can report
a turn that landed elsewhere. Two things a model cannot produce are induced locally: an
outage of the change-freeze calendar a risk rule consults (the decision fails), and a
Ctrl-C that arrives while a turn is being decided.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType
from typing import Any

from jevqueue.governor._path import Path

__all__ = ["SESSION", "DemoTurn", "Induced", "ModelReply", "OnError"]


class Induced(str, Enum):
    """An event the demo causes locally, because no model reply can cause it."""

    CALENDAR_OUTAGE = "calendar_outage"
    """The change-freeze calendar is unreachable, so the risk rule that reads it raises."""
    INTERRUPT = "interrupt"
    """The user presses Ctrl-C while the turn is being decided."""


class OnError(str, Enum):
    """Which governor the turn runs under (they differ only in ``on_error``)."""

    DELEGATE = "delegate"
    RAISE = "raise"


@dataclass(frozen=True)
class ModelReply:
    """One answer of the scripted model: prose, or one tool call.

    Attributes:
        text: The prose answer, when ``tool`` is ``None``.
        tool: The tool the model calls, if any.
        arguments: The call's arguments.
    """

    text: str = ""
    tool: str | None = None
    arguments: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    @classmethod
    def says(cls, text: str) -> ModelReply:
        """The model answers in prose."""
        return cls(text=text)

    @classmethod
    def calls(cls, tool: str, **arguments: Any) -> ModelReply:
        """The model calls ``tool`` with ``arguments``."""
        return cls(tool=tool, arguments=MappingProxyType(dict(arguments)))


@dataclass(frozen=True)
class DemoTurn:
    """One user message and everything that follows it until the assistant answers.

    Attributes:
        user: What the user says.
        expect: The paths the turn's steps are meant to take, in order (a step follows
            each tool result until the reply is prose).
        replies: What the scripted model answers, one per provider call, in order.
        shows: One line on what the turn demonstrates.
        on_error: The governor it runs under.
        induced: An event the demo causes locally, if any.
    """

    user: str
    expect: tuple[Path, ...]
    replies: tuple[ModelReply, ...] = ()
    shows: str = ""
    on_error: OnError = OnError.DELEGATE
    induced: Induced | None = None


SESSION: tuple[DemoTurn, ...] = (
    DemoTurn(
        user="Read the README file from the repository",
        expect=(Path.TOOL, Path.DELEGATE),
        replies=(
            ModelReply.calls("read_file", path="README.md"),
            ModelReply.says(
                "The README says jevqueue governs an agent's tool calls: it picks the one "
                "tool each turn needs, makes the provider call exactly that tool, and checks "
                "every call against a policy before it runs."
            ),
        ),
        shows="one tool is clearly best: the provider is forced to call it; the turn after "
        "the tool result is a plain passthrough, never forced again",
    ),
    DemoTurn(
        user="What's the CI build status of the main branch?",
        expect=(Path.STATIC_TOOL, Path.DELEGATE),
        replies=(ModelReply.says("CI on main is passing: build 1187 finished 6 minutes ago."),),
        shows="the tool's arguments are fixed (static_tools), so the call is made locally "
        "with no provider call",
    ),
    DemoTurn(
        user="Send the team a message by email or chat",
        expect=(Path.CLARIFY,),
        shows="email and chat fit about equally: the user is asked, no provider call",
    ),
    DemoTurn(
        user="Thanks! Tabs or spaces, which do you prefer?",
        expect=(Path.PROSE,),
        replies=(
            ModelReply.says(
                "Whichever the project's formatter enforces. Here that is spaces, four per "
                "indent, so the question never comes up in review."
            ),
        ),
        shows="no tool fits: the provider answers with tool calls switched off",
    ),
    DemoTurn(
        user="Drop the sessions table from the production database",
        expect=(Path.RISK_STOP,),
        shows="a risk rule fires (destructive wording aimed at an irreversible tool): its "
        "reason is said, nothing runs",
    ),
    DemoTurn(
        user="Deploy the v2.4.0 release to staging",
        expect=(Path.ERROR_DELEGATE, Path.DELEGATE),
        replies=(
            ModelReply.calls("deploy_release", tag="v2.4.0", environment="staging"),
            ModelReply.says("v2.4.0 is live on staging; all three instances are healthy."),
        ),
        shows="the change-freeze check cannot reach its calendar, so the decision fails; "
        "on_error='delegate' hands the turn to the model unchanged",
        induced=Induced.CALENDAR_OUTAGE,
    ),
    DemoTurn(
        user="Deploy the v2.4.0 release to production",
        expect=(Path.ERROR_RAISE,),
        shows="the same failure under a governor built with on_error='raise': the turn "
        "stops with DecisionError, no provider call",
        on_error=OnError.RAISE,
        induced=Induced.CALENDAR_OUTAGE,
    ),
    DemoTurn(
        user="Run the project's test suite",
        expect=(Path.INTERRUPTED,),
        shows="Ctrl-C arrives while the turn is decided: nothing runs, no provider call",
        induced=Induced.INTERRUPT,
    ),
)
"""The session ``jevqueue demo`` plays, in order."""
