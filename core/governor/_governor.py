"""The governor: on every turn, pick one of nine paths, make the host enforce it, check it.

``Governor.decide(messages, tools)`` is the pure part: the ballot scores the tools, the
risk rules run, and the thresholds turn the scores into a :class:`~jevqueue.governor.Path`.
``Governor.step(host)`` adds the effect: it reads the host, decides, consults
``host.interrupted()``, then makes exactly the one host call the path calls for, and on
the ``generate`` paths reads back what the provider actually called. ``astep`` is the same
for hosts whose methods return awaitables.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Generator, Mapping, Sequence
from time import perf_counter
from types import MappingProxyType
from typing import Any, Literal

from jevqueue.errors import (
    ConfigurationError,
    DecisionError,
    ProviderDisobeyedError,
    TurnInterruptedError,
)
from jevqueue.governor._argument_sufficiency import missing_arguments, missing_question
from jevqueue.governor._ballot import Ballot
from jevqueue.governor._decision import Decision
from jevqueue.governor._messages import follows_tool_result, is_user_turn
from jevqueue.governor._path import Path
from jevqueue.governor._policy_probe import PolicyProbe
from jevqueue.governor._risk_rules import RiskRule
from jevqueue.governor._static_tools import (
    StaticPayload,
    check_static_tools,
    payload_problem,
    plain_arguments,
    resolve_payload,
)
from jevqueue.governor._thresholds import Thresholds
from jevqueue.governor._tool_schema import normalize_tool, tool_names
from jevqueue.host import Host

__all__ = ["PROSE_DIRECTIVE", "Governor", "tool_directive"]

_logger = logging.getLogger("jevqueue.governor")

Messages = Sequence[Mapping[str, Any]]
Tools = Sequence[Mapping[str, Any]]

PROSE_DIRECTIVE = (
    "Answer in plain prose and do not call any tool: none of the available tools fits this request."
)
"""The directive of the ``prose`` path."""

_DISOBEYED_TOOL = "The provider ignored the selected tool; execution blocked"
_DISOBEYED_PROSE = "The provider called a tool on a turn constrained to prose; execution blocked"
_CLARIFY_LIMIT = 4
# Leads are differences of floats: 0.6 - 0.4 is 0.19999999999999996. A lead within this
# tolerance of the margin counts as reaching it, so boundaries behave as written.
_LEAD_TOLERANCE = 1e-9
_NO_SCORES: Mapping[str, float] = MappingProxyType({})
# What synchronous host methods return on every turn (tool lists, message lists, response
# bodies, flags): never awaitable, so the check for an async host can skip them.
_PLAIN = frozenset({dict, list, tuple, str, bool, type(None)})


def tool_directive(name: str) -> str:
    """The directive of the ``tool`` path: name the tool, once, arguments from the conversation."""
    return f"Call the tool `{name}` now, exactly once, taking its arguments from the conversation."


def _by_score(item: tuple[str, float]) -> float:
    return item[1]


def _awaitable(value: Any) -> bool:
    return value.__class__ not in _PLAIN and inspect.isawaitable(value)


def _first_sentence(text: str, limit: int = 80) -> str:
    sentence = text.strip().split("\n", 1)[0].split(". ", 1)[0].rstrip(".")
    return sentence if len(sentence) <= limit else sentence[: limit - 1].rstrip() + "…"


class Governor:
    """Routes each agent turn to one of nine paths and makes the host enforce it.

    Args:
        ballot: Scores the tools against the conversation; ``None`` uses
            :class:`~jevqueue.governor.LexicalBallot`.
        thresholds: Turn scores into a path; ``None`` uses the ballot's own calibrated
            ``thresholds`` attribute when it has one (every shipped ballot does), else the
            defaults of :class:`~jevqueue.governor.Thresholds` (calibrated for
            :class:`~jevqueue.governor.LexicalBallot`).
        static_tools: Tool name to fixed arguments (a mapping, or a callable of the
            messages returning one). When a turn routes to such a tool and the payload
            validates against the tool's schema, it is called locally (``static_tool``).
        risk_rules: Callables ``(messages, tools, scores) -> str | None`` run before
            routing; the first string stops the turn (``risk_stop``). None by default.
        on_error: What a failed decision does: ``"delegate"`` passes the turn through
            unchanged (``error_delegate``), ``"raise"`` raises
            :class:`~jevqueue.errors.DecisionError` with no effect (``error_raise``).
        check_arguments: Before forcing a tool, check that the conversation plausibly
            supplies its required arguments
            (:func:`~jevqueue.governor.missing_arguments`); when one is
            missing the turn takes ``clarify`` with a question naming it. On by default.
        recorder: Called with the final :class:`~jevqueue.governor.Decision` of every turn
            whose effect completed (for example a
            :class:`~jevqueue.governor.TurnRecorder`); a recorder that raises is
            logged and the turn goes on;
            with a recorder, delegated turns also read back which tools the model called
            (``Decision.called``), the label ``jevqueue calibrate`` learns from.
        shadow: Decide and record every turn, but always delegate (a true passthrough);
            the path the governor would have taken is kept in ``Decision.proposed``.
            :meth:`decide` still returns that path: shadow mode changes what
            :meth:`step` and :meth:`astep` do.
        pep: A :class:`~jevqueue.policy.PolicyEnforcementPoint`. When exactly one tool is
            plausible (it would be forced) and the policy is certain to deny any call of
            it — the tool is not in the PDP's registry, or the PDP denies it with no
            arguments at all (a tool without path or working-directory fields) — the turn
            takes ``risk_stop`` instead of spending a provider call. Needs ``context``.
        context: The :class:`~jevqueue.policy.ExecutionContext` the calls would run in.

    Raises:
        ConfigurationError: Any setting is of the wrong kind, or ``on_error`` is neither
            ``"delegate"`` nor ``"raise"``.

    ``last`` holds the latest :class:`~jevqueue.governor.Decision`. One governor serves one
    conversation at a time; give concurrent conversations a governor each, so that
    ``last`` describes the turn you just ran.

    Example:
        >>> from jevqueue import Governor
        >>> governor = Governor()
        >>> response = governor.step(host)  # doctest: +SKIP
        >>> governor.last.path  # doctest: +SKIP
        <Path.TOOL: 'tool'>
    """

    last: Decision | None

    def __init__(
        self,
        ballot: Ballot | None = None,
        *,
        thresholds: Thresholds | None = None,
        static_tools: Mapping[str, StaticPayload] | None = None,
        risk_rules: Sequence[RiskRule] = (),
        on_error: Literal["delegate", "raise"] = "delegate",
        check_arguments: bool = True,
        recorder: Callable[[Decision], Any] | None = None,
        shadow: bool = False,
        pep: Any = None,
        context: Any = None,
    ) -> None:
        if on_error not in ("delegate", "raise"):
            raise ConfigurationError(
                f"on_error must be 'delegate' or 'raise', got {on_error!r}: 'delegate' passes a "
                "turn whose decision failed through unchanged, 'raise' raises DecisionError"
            )
        if ballot is None:
            # Imported here so that a governor with its own ballot never loads the default.
            from jevqueue.governor._lexical_ballot import LexicalBallot

            ballot = LexicalBallot()
        elif not callable(getattr(ballot, "score", None)):
            raise ConfigurationError(
                f"ballot must have a score(messages, tools) method, got a {type(ballot).__name__}"
            )
        if thresholds is None:
            own = getattr(ballot, "thresholds", None)
            thresholds = own if isinstance(own, Thresholds) else Thresholds()
        elif not isinstance(thresholds, Thresholds):
            raise ConfigurationError(
                f"thresholds must be a jevqueue.Thresholds, got a {type(thresholds).__name__}: "
                "pass Thresholds(confident=..., margin=..., floor=...)"
            )
        if callable(risk_rules) or isinstance(risk_rules, (str, bytes, Mapping)):
            raise ConfigurationError(
                "risk_rules must be a sequence of rules, got a single "
                f"{type(risk_rules).__name__}: wrap it, as risk_rules=(rule,)"
            )
        rules = tuple(risk_rules)
        for rule in rules:
            if not callable(rule):
                raise ConfigurationError(
                    f"every risk rule must be a callable (messages, tools, scores) -> str | None, "
                    f"got a {type(rule).__name__}"
                )
        self._ballot: Ballot = ballot
        # The default ballot validates the toolset while indexing it and returns every
        # offered tool, highest first, with a float in [0, 1]: for it (and not for a
        # subclass, which may score differently) the governor need not check the toolset
        # and the scores a second time.
        self._ranked: Callable[[Messages, Tools], tuple[Sequence[str], dict[str, float]]] | None
        self._ranked = None
        if type(ballot).__name__ == "LexicalBallot":
            from jevqueue.governor._lexical_ballot import LexicalBallot

            if type(ballot) is LexicalBallot:
                self._ranked = ballot._ranked
        self._thresholds = thresholds
        self._confident = float(thresholds.confident)
        self._margin = float(thresholds.margin)
        self._floor = float(thresholds.floor)
        self._static_tools = check_static_tools(static_tools)
        self._risk_rules: tuple[RiskRule, ...] = rules
        self._on_error: Literal["delegate", "raise"] = on_error
        for flag, value in (("check_arguments", check_arguments), ("shadow", shadow)):
            if not isinstance(value, bool):
                raise ConfigurationError(f"{flag} must be True or False, got {value!r}")
        if recorder is not None and not callable(recorder):
            raise ConfigurationError(
                f"recorder must be a callable taking a Decision, got a {type(recorder).__name__}: "
                "pass jevqueue.TurnRecorder(path) or a function"
            )
        self._check_arguments = check_arguments
        self._recorder = recorder
        self._shadow = shadow
        self._policy = None if pep is None else PolicyProbe(pep, context)
        self._routable = False
        self.last = None

    # --- settings, read-only -------------------------------------------------------

    @property
    def ballot(self) -> Ballot:
        """The ballot that scores the tools."""
        return self._ballot

    @property
    def thresholds(self) -> Thresholds:
        """The thresholds that turn scores into a path."""
        return self._thresholds

    @property
    def risk_rules(self) -> tuple[RiskRule, ...]:
        """The risk rules, in the order they run."""
        return self._risk_rules

    @property
    def static_tools(self) -> Mapping[str, StaticPayload]:
        """Tool name to static payload (read-only)."""
        return MappingProxyType(self._static_tools)

    @property
    def on_error(self) -> Literal["delegate", "raise"]:
        """What a failed decision does: ``"delegate"`` or ``"raise"``."""
        return self._on_error

    def __repr__(self) -> str:
        return (
            f"Governor(ballot={type(self._ballot).__name__}(), thresholds={self._thresholds!r}, "
            f"static_tools={sorted(self._static_tools)!r}, risk_rules={len(self._risk_rules)}, "
            f"on_error={self._on_error!r})"
        )

    # --- the decision --------------------------------------------------------------

    def decide(self, messages: Messages, tools: Tools) -> Decision:
        """Decide the path of a turn, with no effect on any host.

        Records the decision in ``last`` and returns it.

        Args:
            messages: The conversation, oldest first, in OpenAI message form (read only).
            tools: The tools offered this turn, in either OpenAI shape.

        Returns:
            The decision. When deciding fails and ``on_error="delegate"`` it is an
            ``error_delegate`` decision carrying the error.

        Raises:
            DecisionError: Deciding failed (the tools are malformed, the ballot or a rule
                raised or returned nonsense) and ``on_error="raise"``.
        """
        start = perf_counter()
        scores: Mapping[str, float] = _NO_SCORES
        self._routable = False
        try:
            ranked = self._ranked
            if ranked is not None and tools.__class__ is list:
                try:
                    names, checked = ranked(messages, tools)
                except Exception:  # the checked path below reports it, exactly as it would
                    pass
                else:
                    scores = MappingProxyType(checked)
                    return self._route(messages, tools, names, scores, start)
            names = tool_names(tools)
            scores = MappingProxyType(self._scores(messages, tools, names))
            return self._route(messages, tools, names, scores, start)
        except Exception as exc:
            return self._failed(exc, perf_counter() - start, scores)

    def _scores(self, messages: Messages, tools: Tools, names: Sequence[str]) -> dict[str, float]:
        raw = self._ballot.score(messages, tools)
        if not isinstance(raw, Mapping):
            raise DecisionError(
                f"the ballot returned a {type(raw).__name__}; Ballot.score must return a "
                "mapping of tool name to a score in [0, 1]"
            )
        offered = set(names)
        checked: dict[str, float] = {}
        previous = 1.0
        ordered = True
        for name, score in raw.items():
            if name not in offered:
                raise DecisionError(
                    f"the ballot scored {name!r}, which is not an offered tool "
                    f"(offered: {sorted(offered)}); score only the tools passed in"
                )
            if score.__class__ is not float:
                if isinstance(score, bool) or not isinstance(score, (int, float)):
                    raise DecisionError(
                        f"the ballot scored {name!r} with a {type(score).__name__}; scores are "
                        "floats in [0, 1]"
                    )
                score = float(score)
            if not 0.0 <= score <= 1.0:  # also rejects NaN
                raise DecisionError(
                    f"the ballot scored {name!r} {score!r}; scores are floats in [0, 1]"
                )
            if score > previous:
                ordered = False
            previous = score
            checked[name] = score
        if len(checked) < len(names):
            for name in names:
                checked.setdefault(name, 0.0)
        if ordered:  # ballots usually return highest first already
            return checked
        return dict(sorted(checked.items(), key=_by_score, reverse=True))

    def _route(
        self,
        messages: Messages,
        tools: Tools,
        names: Sequence[str],
        scores: Mapping[str, float],
        start: float,
    ) -> Decision:
        top_name: str | None = None
        top = second = 0.0
        for position, (name, score) in enumerate(scores.items()):
            if position == 0:
                top_name, top = name, score
            else:
                second = score
                break

        for rule in self._risk_rules:
            reason = rule(messages, tools, scores)
            if reason is None:
                continue
            if not isinstance(reason, str) or not reason.strip():
                raise DecisionError(
                    f"risk rule {getattr(rule, '__name__', rule)!r} returned {reason!r}; a rule "
                    "returns None to let the turn pass, or a sentence for the user to stop it"
                )
            return self._record(Path.RISK_STOP, start, top_name, scores, reason=reason)

        if not names:
            return self._record(
                Path.DELEGATE, start, None, scores, reason="no tools are offered this turn"
            )
        if not is_user_turn(messages):
            note = (
                "the turn follows a tool result: the agent continues unforced"
                if follows_tool_result(messages)
                else "the newest message is not the user's: there is no request to route"
            )
            return self._record(Path.DELEGATE, start, top_name, scores, reason=note)

        assert top_name is not None  # names is non-empty, so scores is too
        self._routable = True
        if top >= self._confident:
            if top - second >= self._margin - _LEAD_TOLERANCE:
                return self._forced(messages, tools, names, top_name, scores, start)
            return self._record(
                Path.CLARIFY, start, top_name, scores, reason=self._question(tools, names, scores)
            )
        if top < self._floor:
            return self._record(
                Path.PROSE,
                start,
                None,
                scores,
                directive=PROSE_DIRECTIVE,
                reason=f"no tool reached the floor {self._floor:g} (best: {top_name}, {top:.2f})",
            )
        return self._record(
            Path.DELEGATE,
            start,
            top_name,
            scores,
            reason=f"{top_name} at {top:.2f} is between the floor and the confident threshold",
        )

    def _forced(
        self,
        messages: Messages,
        tools: Tools,
        names: Sequence[str],
        name: str,
        scores: Mapping[str, float],
        start: float,
    ) -> Decision:
        if self._policy is not None:
            denial = self._policy.certain_denial(name)
            if denial is not None:
                return self._record(Path.RISK_STOP, start, name, scores, reason=denial)
        entry = self._static_tools.get(name)
        if entry is None:
            if self._check_arguments:
                schema = normalize_tool(tools[names.index(name)], where=f"tool {name!r}")
                missing = missing_arguments(messages, schema)
                if missing:
                    return self._record(
                        Path.CLARIFY, start, name, scores, reason=missing_question(schema, missing)
                    )
            return self._record(Path.TOOL, start, name, scores, directive=tool_directive(name))
        arguments = plain_arguments(resolve_payload(entry, messages))
        schema = normalize_tool(tools[names.index(name)], where=f"tool {name!r}")
        problem = payload_problem(arguments, schema.parameters)
        if problem is not None:
            return self._record(
                Path.TOOL,
                start,
                name,
                scores,
                directive=tool_directive(name),
                reason=(
                    f"the static payload for {name} was not sent ({problem}); the provider "
                    "is forced to call the tool instead"
                ),
            )
        return self._record(
            Path.STATIC_TOOL, start, name, scores, arguments=MappingProxyType(arguments)
        )

    def _question(self, tools: Tools, names: Sequence[str], scores: Mapping[str, float]) -> str:
        top = next(iter(scores.values()))
        tied = [
            name for name, score in scores.items() if top - score < self._margin - _LEAD_TOLERANCE
        ]
        shown = tied[:_CLARIFY_LIMIT]
        described = []
        for name in shown:
            description = normalize_tool(
                tools[names.index(name)], where=f"tool {name!r}"
            ).description
            summary = _first_sentence(description)
            described.append(f"`{name}` ({summary})" if summary else f"`{name}`")
        choices = ", ".join(described[:-1]) + f" or {described[-1]}"
        return (
            f"I can do this in more than one way. Which should I use: {choices}? "
            "Say which one, or tell me more about what you need."
        )

    def _record(
        self,
        path: Path,
        start: float,
        tool: str | None,
        scores: Mapping[str, float],
        *,
        directive: str = "",
        reason: str | None = None,
        arguments: Mapping[str, Any] | None = None,
    ) -> Decision:
        decision = Decision(
            path=path,
            tool=tool,
            scores=scores,
            directive=directive,
            reason=reason,
            provider_calls=path.provider_calls,
            timings={"decide": perf_counter() - start},
            arguments=arguments,
            routable=self._routable,
        )
        self._routable = False
        self.last = decision
        return decision

    def _failed(self, exc: Exception, elapsed: float, scores: Mapping[str, float]) -> Decision:
        if self._on_error == "raise":
            self.last = Decision(
                path=Path.ERROR_RAISE, scores=scores, error=repr(exc), timings={"decide": elapsed}
            )
            raise DecisionError(
                f"the governor could not decide this turn, so nothing was sent: {exc}. Fix the "
                "host's tools, the ballot or the risk rule named here, or build the Governor "
                "with on_error='delegate' to pass such turns through unchanged"
            ) from exc
        decision = Decision(
            path=Path.ERROR_DELEGATE,
            scores=scores,
            reason="the decision failed; the turn passes through unchanged",
            error=repr(exc),
            provider_calls=1,
            timings={"decide": elapsed},
        )
        self.last = decision
        return decision

    # --- the turn --------------------------------------------------------------------

    def step(self, host: Host) -> Any:
        """Run one governed turn on a synchronous host.

        Reads ``host.messages()`` and ``host.tools()``, decides, consults
        ``host.interrupted()``, then makes the path's one host call and returns the host's
        response. ``last`` records the decision, the effect's timing and any error.

        Args:
            host: Any object with the seven :class:`~jevqueue.host.Host` methods.

        Returns:
            The host's response: from ``generate`` (``tool``, ``prose``, ``delegate``,
            ``error_delegate``), ``say`` (``clarify``, ``risk_stop``) or ``say_tool_call``
            (``static_tool``).

        Raises:
            ProviderDisobeyedError: The provider did not make exactly the forced call, or
                called a tool on a prose turn; the response is withheld.
            TurnInterruptedError: ``host.interrupted()`` was true; nothing was sent.
            DecisionError: Deciding failed and ``on_error="raise"``; nothing was sent.
            ConfigurationError: A host method returned an awaitable: use :meth:`astep`.
        """
        turn = self._turn(host)
        value: Any = None
        while True:
            try:
                request = turn.send(value)
            except StopIteration as done:
                return done.value
            if _awaitable(request):
                _discard(request)
                turn.close()
                raise ConfigurationError(
                    f"{type(host).__name__} returned an awaitable from a host method; this is "
                    "an async host: run the turn with `await governor.astep(host)`"
                )
            value = request

    async def astep(self, host: Any) -> Any:
        """Run one governed turn on a host whose methods may return awaitables.

        Same as :meth:`step`; every host method's result is awaited when it is awaitable,
        so a host may mix ``async def`` and plain methods.

        Args:
            host: An object with the seven :class:`~jevqueue.host.Host` methods, any of
                them ``async``.

        Returns:
            The host's (awaited) response.

        Raises:
            ProviderDisobeyedError: See :meth:`step`.
            TurnInterruptedError: See :meth:`step`.
            DecisionError: See :meth:`step`.
        """
        turn = self._turn(host)
        value: Any = None
        failure: BaseException | None = None
        while True:
            try:
                request = turn.throw(failure) if failure is not None else turn.send(value)
            except StopIteration as done:
                return done.value
            failure = None
            if _awaitable(request):
                try:
                    value = await request
                except BaseException as exc:  # recorded in `last`, then re-raised
                    failure = exc
            else:
                value = request

    def _turn(self, host: Any) -> Generator[Any, Any, Any]:
        """One turn as a generator: it yields each host method's result and is sent it back
        resolved, so that :meth:`step` and :meth:`astep` share every line of the logic."""
        start = perf_counter()
        try:
            messages = yield host.messages()
            tools = yield host.tools()
        except Exception as exc:
            decision = self._failed(exc, perf_counter() - start, _NO_SCORES)
        else:
            decision = self.decide(messages, tools)
            if self._shadow and decision.path is not Path.ERROR_DELEGATE:
                decision = decision.evolve(
                    path=Path.DELEGATE,
                    proposed=decision.path,
                    directive="",
                    provider_calls=1,
                    arguments=None,
                    reason=f"shadow mode: would have taken {decision.path.value}"
                    + (f" ({decision.tool})" if decision.tool else "")
                    + (f": {decision.reason}" if decision.reason else ""),
                )
                self.last = decision
        effect_start = perf_counter()
        try:
            if (yield host.interrupted()):
                self.last = decision.evolve(
                    path=Path.INTERRUPTED,
                    directive="",
                    provider_calls=0,
                    arguments=None,
                    reason=f"interrupted before the {decision.path.value} effect; nothing was sent",
                )
                raise TurnInterruptedError(
                    f"the host reported an interruption before the {decision.path.value} "
                    "effect; nothing was sent. Start a new turn when the user is ready"
                )
            response, called = yield from self._effect(host, decision)
        except BaseException as exc:
            if not isinstance(exc, (GeneratorExit, TurnInterruptedError)):
                self.last = decision.evolve(
                    error=repr(exc),
                    timings={**decision.timings, "effect": perf_counter() - effect_start},
                )
            raise
        # The record with the effect's timing, built directly (as evolve() would, minus the
        # generic field-by-field copy): this runs on every turn.
        self.last = Decision(
            decision.path,
            decision.tool,
            decision.scores,
            decision.directive,
            decision.reason,
            decision.error,
            decision.provider_calls,
            {**decision.timings, "effect": perf_counter() - effect_start},
            decision.arguments,
            called,
            decision.proposed,
            decision.routable,
        )
        if self._recorder is not None:
            try:
                self._recorder(self.last)
            except Exception:  # a record is advice for calibration; the turn has happened
                _logger.exception("the governor's recorder failed; the turn is not recorded")
        return response

    def _effect(
        self, host: Any, decision: Decision
    ) -> Generator[Any, Any, tuple[Any, tuple[str, ...] | None]]:
        """Make the path's host call; return the response and, where it was read back,
        the tools the provider called."""
        path = decision.path
        if path is Path.TOOL:
            assert decision.tool is not None
            response = yield host.generate(force_tool=decision.tool, directive=decision.directive)
            called = list((yield host.called_tools(response)))
            if called != [decision.tool]:
                raise ProviderDisobeyedError(
                    f"{_DISOBEYED_TOOL}: expected exactly one call of {decision.tool!r}, the "
                    f"response calls {called!r}. Check that the host constrains the provider "
                    "(tool_choice, parallel calls off)",
                    expected=[decision.tool],
                    called=called,
                )
            return response, tuple(called)
        if path is Path.PROSE:
            response = yield host.generate(force_tool=None, directive=decision.directive)
            called = list((yield host.called_tools(response)))
            if called:
                raise ProviderDisobeyedError(
                    f"{_DISOBEYED_PROSE}: the response calls {called!r}. Check that the host "
                    "forbids tool calls when force_tool is None and the directive is non-empty",
                    expected=[],
                    called=called,
                )
            return response, ()
        if path is Path.STATIC_TOOL:
            assert decision.tool is not None and decision.arguments is not None
            # The host gets its own copy: nothing it does can alter the record or the setting.
            sent = yield host.say_tool_call(decision.tool, plain_arguments(decision.arguments))
            return sent, None
        if path is Path.CLARIFY or path is Path.RISK_STOP:
            assert decision.reason is not None
            return (yield host.say(decision.reason)), None
        # delegate and error_delegate: the true passthrough
        response = yield host.generate(force_tool=None, directive="")
        if self._recorder is None:
            return response, None
        # With a recorder, what the model chose on its own is the label calibration needs;
        # a host that cannot say leaves the turn unlabelled rather than failing it.
        try:
            chosen: tuple[str, ...] = tuple((yield host.called_tools(response)))
        except Exception:
            _logger.warning("called_tools failed on a delegated turn; it is not labelled")
            return response, None
        return response, chosen


def _discard(awaitable: Awaitable[Any]) -> None:
    """Close a coroutine that will never be awaited, so it never runs and never warns."""
    close = getattr(awaitable, "close", None)
    if callable(close):
        close()
