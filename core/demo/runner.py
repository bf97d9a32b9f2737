"""Plays the demo session through a real governor and the real OpenAI-compatible host.

On embedded defaults the host talks to :class:`ScriptedDemoModel` through an in-process
``httpx.MockTransport``: no API key, no server, no network. Given an :class:`Endpoint` it
talks to that endpoint instead; the tools still run locally with fixed results, and the
calendar outage and the Ctrl-C are still induced locally.

The runner is the agent loop an application would write: append the user's message, let
the governor take a step, run the tools the reply calls, append their results, and step
again until the reply is prose.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from jevqueue.demo.change_freeze import ChangeFreezeCalendar, change_freeze
from jevqueue.demo.script import SESSION, DemoTurn, Induced, OnError
from jevqueue.demo.scripted_model import SCRIPTED_MODEL_ID, ScriptedDemoModel, ScriptMismatchError
from jevqueue.demo.toolset import IRREVERSIBLE_TOOLS, STATIC_TOOLS, TOOLS, run_tool
from jevqueue.errors import JevError, ProviderHTTPError
from jevqueue.governor._decision import Decision
from jevqueue.governor._lexical_ballot import LexicalBallot
from jevqueue.governor._path import Path
from jevqueue.governor._risk_rules import default_risk_rules
from jevqueue.governor._thresholds import Thresholds

if TYPE_CHECKING:  # pragma: no cover
    from jevqueue.governor._governor import Governor
    from jevqueue.plugins.openai import OpenAIChatHost

__all__ = [
    "SYSTEM_PROMPT",
    "DemoSession",
    "Endpoint",
    "StepReport",
    "ToolRun",
    "demo_thresholds",
]

SYSTEM_PROMPT = (
    "You are a repository assistant for the jevqueue project. Use the tools when they help; "
    "keep answers short."
)
_MAX_STEPS = 4  # per user turn: a step follows each tool result until the reply is prose
_DEMO_FLOOR = 0.001


def demo_thresholds(defaults: Thresholds | None = None) -> tuple[Thresholds, str | None]:
    """The default thresholds, unless they leave the ``prose`` path unreachable.

    A floor of 0 sends nothing to prose (no score is below 0): calibration picks it when
    even a zero lexical score still comes with relevant requests. The demo then raises the
    floor just enough to show the path, and says so.

    Returns:
        The thresholds to play with, and a note on what differs from the defaults (or
        ``None`` when they are the defaults).
    """
    thresholds = defaults or Thresholds()
    if thresholds.floor > 0.0:
        return thresholds, None
    raised = Thresholds(
        confident=thresholds.confident,
        margin=thresholds.margin,
        floor=min(_DEMO_FLOOR, thresholds.confident),
    )
    return raised, (
        f"the calibrated default floor is {thresholds.floor:g}, which sends no turn to prose "
        f"(on the benchmark data a higher one costs relevant turns); the demo raises it to "
        f"{raised.floor:g}, so that a request no tool matches at all can show that path"
    )


@dataclass(frozen=True)
class Endpoint:
    """A real OpenAI-compatible endpoint to run the session against.

    Attributes:
        base_url: The ``/v1`` base URL.
        model: The model id.
        api_key: The bearer token, or ``None`` for servers without authentication.
    """

    base_url: str
    model: str
    api_key: str | None = field(default=None, repr=False)


@dataclass(frozen=True)
class ToolRun:
    """One tool call from a reply, run locally."""

    name: str
    arguments: Mapping[str, Any]
    result: str


@dataclass(frozen=True)
class StepReport:
    """What one governed step did.

    Attributes:
        turn: The user turn, from 1.
        step: The step within the turn, from 1 (a step follows each tool result).
        user: The user's message, on a turn's first step; ``None`` after a tool result.
        shows: What the turn demonstrates, on its first step.
        induced: What the demo caused locally for this turn, if anything.
        expected: The path the script meant this step to take (``None``: unscripted).
        decision: The governor's record of the step.
        provider_calls: Requests the host actually sent to the provider in this step.
        request: The body of the request sent, if any.
        reply: The assistant's text, if the step produced one.
        tool_runs: The tool calls the reply made, run locally.
        error: The error that ended the step (``"TypeName: message"``), if any.
    """

    turn: int
    step: int
    user: str | None
    shows: str
    induced: Induced | None
    expected: Path | None
    decision: Decision | None
    provider_calls: int
    request: Mapping[str, Any] | None
    reply: str | None
    tool_runs: tuple[ToolRun, ...]
    error: str | None

    @property
    def path(self) -> Path | None:
        """The path the step took."""
        return self.decision.path if self.decision is not None else None

    @property
    def as_expected(self) -> bool:
        """True when the step took the scripted path (or none was scripted)."""
        return self.expected is None or self.path == self.expected


class DemoSession:
    """The scripted session, ready to play.

    Args:
        endpoint: A real endpoint, or ``None`` for the embedded scripted model.
        script: The turns to play.
        thresholds: The routing thresholds; by default :func:`demo_thresholds`.

    Raises:
        ImportError: The OpenAI plugin's extra is missing (``pip install "jevqueue[openai]"``).
    """

    def __init__(
        self,
        endpoint: Endpoint | None = None,
        *,
        script: Sequence[DemoTurn] = SESSION,
        thresholds: Thresholds | None = None,
    ) -> None:
        from jevqueue.governor._governor import Governor
        from jevqueue.plugins.openai import OpenAIChatHost, ScriptedChatTransport

        self.endpoint = endpoint
        self.script = tuple(script)
        if thresholds is None:
            self.thresholds, self.thresholds_note = demo_thresholds()
        else:
            self.thresholds, self.thresholds_note = thresholds, None
        self.messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM_PROMPT}]
        self.tools = [dict(tool) for tool in TOOLS]
        self.calendar = ChangeFreezeCalendar(frozen={"production"})
        self.interrupt = threading.Event()
        self.model: ScriptedDemoModel | None = None
        if endpoint is None:
            self.model = ScriptedDemoModel()
            self.host: OpenAIChatHost = OpenAIChatHost(
                model=SCRIPTED_MODEL_ID,
                messages=self.messages,
                tools=self.tools,
                base_url="http://scripted-model.invalid/v1",
                transport=ScriptedChatTransport(self.model),
                interrupt=self.interrupt,
            )
        else:
            self.host = OpenAIChatHost(
                model=endpoint.model,
                messages=self.messages,
                tools=self.tools,
                base_url=endpoint.base_url,
                api_key=endpoint.api_key,
                interrupt=self.interrupt,
            )
        ballot = LexicalBallot()
        rules = (*default_risk_rules(irreversible=IRREVERSIBLE_TOOLS), change_freeze(self.calendar))
        self.governors: dict[OnError, Governor] = {
            on_error: Governor(
                ballot,
                thresholds=self.thresholds,
                static_tools=STATIC_TOOLS,
                risk_rules=rules,
                on_error=on_error.value,
            )
            for on_error in OnError
        }

    @property
    def scripted(self) -> bool:
        """True on embedded defaults (the scripted model), False against an endpoint."""
        return self.model is not None

    def close(self) -> None:
        """Release the HTTP client."""
        self.host.close()

    def play(self) -> Iterator[StepReport]:
        """Play every turn, yielding a report per governed step.

        Raises:
            ProviderHTTPError: The endpoint failed (wrong URL, key or model).
            ScriptMismatchError: On embedded defaults, the session left its script.
        """
        for number, turn in enumerate(self.script, start=1):
            yield from self._play_turn(number, turn)

    def _play_turn(self, number: int, turn: DemoTurn) -> Iterator[StepReport]:
        governor = self.governors[turn.on_error]
        self.messages.append({"role": "user", "content": turn.user})
        self.calendar.reachable = turn.induced is not Induced.CALENDAR_OUTAGE
        if self.model is not None:
            self.model.expect(turn.replies)
        taken: list[str] = []
        try:
            for step in range(1, _MAX_STEPS + 1):
                if turn.induced is Induced.INTERRUPT and step == 1:
                    # What a Ctrl-C handler does: set the flag the host reports.
                    self.interrupt.set()
                report = self._step(governor, number, step, turn)
                taken.append(report.path.value if report.path else "?")
                yield report
                if report.error is not None or not report.tool_runs:
                    break
            if self.model is not None:
                try:
                    self.model.assert_complete()
                except ScriptMismatchError as exc:
                    raise ScriptMismatchError(
                        f"turn {number} ({turn.user!r}) took {taken} where the script expects "
                        f"{[path.value for path in turn.expect]}: {exc}"
                    ) from exc
        finally:
            self.interrupt.clear()
            self.calendar.reachable = True

    def _step(self, governor: Governor, number: int, step: int, turn: DemoTurn) -> StepReport:
        sent_before = self.host.request_count
        response: Any = None
        error: str | None = None
        expected = turn.expect[step - 1] if step <= len(turn.expect) else None
        try:
            response = governor.step(self.host)
        except ProviderHTTPError:
            raise
        except ScriptMismatchError as exc:
            decision = governor.last
            took = decision.path.value if decision is not None else "no path"
            scores = dict(decision.scores) if decision is not None else {}
            raise ScriptMismatchError(
                f"turn {number} ({turn.user!r}), step {step}: took {took} where the script "
                f"expects {expected.value if expected else 'no further step'} "
                f"(scores {_rounded(scores)}): {exc}"
            ) from exc
        except JevError as exc:
            error = f"{type(exc).__name__}: {exc}"
        provider_calls = self.host.request_count - sent_before
        reply, runs = (None, ()) if response is None else self._record(response)
        return StepReport(
            turn=number,
            step=step,
            user=turn.user if step == 1 else None,
            shows=turn.shows if step == 1 else "",
            induced=turn.induced if step == 1 else None,
            expected=expected,
            decision=governor.last,
            provider_calls=provider_calls,
            request=self.host.last_request if provider_calls else None,
            reply=reply,
            tool_runs=runs,
            error=error,
        )

    def _record(self, response: Mapping[str, Any]) -> tuple[str | None, tuple[ToolRun, ...]]:
        """Append the reply (and the results of the tools it calls) to the conversation."""
        message = response["choices"][0]["message"]
        content = message.get("content")
        text = content if isinstance(content, str) and content else None
        calls = [
            call
            for call in message.get("tool_calls") or ()
            if isinstance(call, Mapping) and isinstance(call.get("function"), Mapping)
        ]
        assistant: dict[str, Any] = {"role": "assistant", "content": text}
        if calls:
            assistant["tool_calls"] = [dict(call) for call in calls]
        self.messages.append(assistant)
        runs: list[ToolRun] = []
        for call in calls:
            function = call["function"]
            arguments = _arguments(function.get("arguments"))
            result = run_tool(str(function.get("name")), arguments)
            runs.append(ToolRun(str(function.get("name")), arguments, result))
            self.messages.append(
                {"role": "tool", "tool_call_id": call.get("id", ""), "content": result}
            )
        return text, tuple(runs)


def _rounded(scores: Mapping[str, float]) -> dict[str, float]:
    return {name: round(score, 2) for name, score in list(scores.items())[:3]}


def _arguments(raw: Any) -> dict[str, Any]:
    if isinstance(raw, Mapping):
        return dict(raw)
    try:
        parsed = json.loads(raw) if isinstance(raw, str) and raw else {}
    except ValueError:
        return {"_unparsed": raw}
    return parsed if isinstance(parsed, dict) else {"_value": parsed}
