"""The guard: where the policy layer meets a running agent, written once for every plugin.

Every plugin's tool-call half is a thin adapter of one :class:`Guard`::

    framework about to run a tool ─▶ plugin adapter (the framework's idiom only)
       └▶ guard.check(tool, arguments, call_id)     Action.build → PEP → Judgement:
            │                                        allowed (arguments to run, paths
            │                                        resolved) | refused (message) | pending
            │   approval ─▶ approver(ApprovalRequest) one protocol, in every plugin
            └▶ guard.run(judgement, execute)         runs the judged arguments, at most once

For one call, :meth:`Guard.judge`:

1. copies the raw arguments (the policy judges a private copy; nothing a rule does to it
   reaches the tool) and builds the canonical :class:`~jevqueue.policy.Action` — an
   undeclared tool, non-canonical or schema-breaking arguments, a path that cannot be
   resolved: refused before evaluation, and audited;
2. asks the PEP, which audits every decision, offering the approval records it was given;
3. answers a :class:`Judgement`: **allowed** with the arguments to run (the judged ones,
   each path field holding the resolved absolute path the policy judged unless the tool is
   declared ``paths_as_written``), **refused** with the message the model reads, or
   **pending** with the :class:`~jevqueue.policy.ApprovalRequest` a person must answer.

:meth:`Guard.check` (and :meth:`Guard.acheck`, which awaits an ``async`` approver) goes one
step further for a pending call: it asks the approver and judges again with the records
it gives. Frameworks with a native pause use :meth:`Guard.judge` and pause on *pending*,
then judge again with the records the person gave when the run resumes; a plugin picks
:meth:`Guard.judge` when :attr:`Guard.pauses` is true (no approver, or one that asks to
pause, as ``InboxApprover(pause=True)`` does: then ``judge`` files the pending request
through the approver's ``file(request)``, so reviewers see it while the run is paused).

Neither ever raises an ``Exception``: whatever goes wrong inside the check — the registry,
the PEP, the approver — is a refusal whose message names the failure, so nothing of ours
can fall into a framework's fail-open path.

:meth:`Guard.run` runs an allowed judgement's arguments through the framework's own
executor, once: a call whose id already ran (a framework that re-executes a whole batch
when it resumes after a pause) gets the first run's result again, not a second effect.
Call ids must therefore be unique within one guard's life: a plugin whose framework
reuses ids across messages (some local servers number calls ``call_0``, ``call_1`` in each
message) scopes them, e.g. with the message's id.
What happened — returned or raised — is kept in :attr:`Guard.outcomes`.

What the agent read. Each task (the context's ``task_id``) has a
:class:`~jevqueue.policy.Transcript`: what the user wrote (:meth:`Guard.record_user`) and
every tool output — :meth:`Guard.run` records what it ran, :meth:`Guard.record_output` the
rest. Once a task has one, each call's :class:`~jevqueue.policy.Provenance` (which
argument came from the user's request, which from an untrusted output and which one) is
part of the action: rules judge it, its digest covers it, and the approval request shows
it. Run-once keys use the call's digest without it, so a call judged again after the
agent read more is still the call that ran.
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import sys
import threading
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from enum import Enum
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypeVar

from jevqueue.errors import (
    ApprovalExpiredError,
    ApprovalRequiredError,
    ConfigurationError,
    JevError,
    PolicyDeniedError,
    ToolInterruptedError,
    UnfulfilledObligationError,
    UnregisteredToolError,
)
from jevqueue.policy._action import Action
from jevqueue.policy._approval_request import (
    ApprovalRequest,
    Approver,
    approval_records,
    check_approver,
)
from jevqueue.policy._context import ExecutionContext
from jevqueue.policy._provenance import Provenance, Transcript
from jevqueue.policy._registry import UNTRUSTED, ToolRegistry, ToolSpec, registry_from_specs
from jevqueue.policy._verdict import VerdictKind

if TYPE_CHECKING:  # pragma: no cover
    from jevqueue.policy._pep import PolicyEnforcementPoint
    from jevqueue.policy._verdict import Verdict

__all__ = ["Guard", "Judgement", "JudgementKind", "Outcome"]

T = TypeVar("T")

_EMPTY: Mapping[str, Any] = MappingProxyType({})
_SCALARS = frozenset({str, int, float, bool, type(None)})
_RAN_LIMIT = 4096  # call ids remembered as run, for frameworks that re-execute a batch
_TASKS_LIMIT = 64  # tasks whose transcript is kept (the least recently used is dropped)


def _check_wait_fits_freshness(approver: Any, pep: Any, owner: str) -> None:
    """Refuse an inbox approver that waits longer than the PEP accepts its approvals.

    An approval given early in the wait (or the first of several) would be stale by the
    time the request settles, and the call refused although the reviewers approved it.

    Raises:
        ConfigurationError: the approver's ``expires_in`` plus a minute
            (:data:`~jevqueue.approvals._inbox_request.WAIT_MARGIN`) exceeds
            ``approval_freshness``.
    """
    module = sys.modules.get("jevqueue.approvals._inbox_approver")
    if module is None or not isinstance(approver, module.InboxApprover):
        return  # never imported: approver cannot be one
    from jevqueue.approvals._inbox_request import WAIT_MARGIN

    freshness = getattr(pep, "approval_freshness", None)
    waits = approver.expires_in
    if isinstance(freshness, timedelta) and waits + WAIT_MARGIN > freshness:
        needed = (waits + WAIT_MARGIN).total_seconds()
        longest = max((freshness - WAIT_MARGIN).total_seconds(), 0)
        raise ConfigurationError(
            f"{owner}: the InboxApprover waits up to {_seconds(waits)} (expires_in) but the "
            f"PEP accepts an approval for {_seconds(freshness)} after it is given "
            "(approval_freshness), and a wait must leave a minute of that for clocks and "
            "the approved call, so an approval given early in the wait would be stale "
            "when the request settles: raise approval_freshness on the PEP "
            f"(PolicyEnforcementPoint(..., approval_freshness={needed:g})) "
            f"or shorten expires_in to at most {longest:g} seconds"
        )


def _seconds(span: timedelta) -> str:
    return f"{span.total_seconds():g} s"


class JudgementKind(str, Enum):
    """What the guard decided for one call."""

    ALLOWED = "allowed"
    REFUSED = "refused"
    PENDING = "pending"


@dataclass(frozen=True)
class Judgement:
    """The guard's answer for one call. Build one only through :class:`Guard`.

    Attributes:
        kind: allowed, refused, or pending (an approval is needed).
        tool: The tool called.
        call_id: The framework's id of the call, when it has one.
        arguments: For an allowed call, the arguments to run it with (read-only): what
            was judged, each path field as the policy resolved it. Empty otherwise.
        message: For a refused call, the text the model reads instead of a result.
        action: The canonical action, when it could be built.
        verdict: The PEP's final verdict, when the PEP was reached (``None`` for a call id
            that already ran: it is not judged again, and :meth:`Guard.run` replays it).
        request: The approval request: the one to answer when pending, the one the
            approver was shown otherwise.
        error: For a check that failed, the failure (``repr``), else ``None``.
    """

    kind: JudgementKind
    tool: str
    call_id: str | None = None
    arguments: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    message: str = ""
    action: Action | None = None
    verdict: Verdict | None = None
    request: ApprovalRequest | None = None
    error: str | None = None

    @property
    def allowed(self) -> bool:
        """True when the call may run, with :meth:`run_arguments`."""
        return self.kind is JudgementKind.ALLOWED

    @property
    def refused(self) -> bool:
        """True when the call must not run; :attr:`message` says why."""
        return self.kind is JudgementKind.REFUSED

    @property
    def pending(self) -> bool:
        """True when the call waits for an approval of :attr:`request`."""
        return self.kind is JudgementKind.PENDING

    @property
    def action_digest(self) -> str | None:
        """The canonical action's digest, when the action could be built."""
        return self.action.digest if self.action is not None else None

    @property
    def approval_requested(self) -> str | None:
        """The digest the approver was asked about (or must be asked about), if any."""
        return self.request.action_digest if self.request is not None else None

    def run_arguments(self) -> dict[str, Any]:
        """A fresh, mutable copy of :attr:`arguments` for one execution of the tool."""
        return _copy(self.arguments)


@dataclass(frozen=True)
class Outcome:
    """What happened when the guard ran an allowed call.

    Attributes:
        tool: The tool run.
        call_id: The framework's id of the call, when it has one.
        action_digest: The digest of the action that was judged and run.
        returned: True when the tool returned, False when it raised.
        error: For a tool that raised, ``repr`` of its exception.
    """

    tool: str
    call_id: str | None
    action_digest: str | None
    returned: bool
    error: str | None = None


class Guard:
    """Judges each tool call with the PEP, asks the approver, and runs what was judged once.

    Args:
        pep: The policy enforcement point (it audits every decision).
        specs: One declaration per tool (each plugin's ``tool_spec(...)``, or
            :func:`jevqueue.load_tools_file`). A call of an undeclared tool is refused.
        context: The execution context (an ``ExecutionContext`` or a mapping of its
            fields); validated now, so a bad context fails here, not on the first call.
            ``None`` when every call passes its own (a framework whose run carries it).
        approver: Who approves calls that need an explicit approval
            (:class:`~jevqueue.policy.Approver`, plain or ``async``). Without one,
            :meth:`check` refuses such calls with a message saying how to add one;
            :meth:`judge` leaves them pending for a framework's own pause.
        owner: The plugin entry point named in configuration errors.
        history: How many judgements :attr:`judgements` keeps.
        keep_transcripts: Whether :meth:`run` records each output in the task's
            transcript. ``False`` for a plugin that passes ``transcript=`` built from the
            framework's own history on every call (the guard's copy would go unread).

    Raises:
        ConfigurationError: ``pep`` is not a PEP, ``specs`` is not a collection of
            ``ToolSpec`` (or declares a tool twice), ``approver`` is not callable, or it
            is an :class:`~jevqueue.approvals.InboxApprover` whose ``expires_in`` exceeds
            the PEP's ``approval_freshness``.
        InvalidContextError: ``context`` is incomplete or ambient.
    """

    def __init__(
        self,
        pep: PolicyEnforcementPoint,
        *,
        specs: Iterable[ToolSpec] | ToolRegistry,
        context: ExecutionContext | Mapping[str, Any] | None = None,
        approver: Approver | None = None,
        owner: str = "Guard",
        history: int = 1000,
        keep_transcripts: bool = True,
    ) -> None:
        if not callable(getattr(pep, "enforce", None)):
            raise ConfigurationError(
                f"{owner} needs a jevqueue PolicyEnforcementPoint (an object with "
                f"enforce(action, approval_records)); got {type(pep).__name__}"
            )
        self.pep = pep
        self.owner = owner
        self.registry = registry_from_specs(specs, owner=owner)
        self.context = None if context is None else ExecutionContext.coerce(context)
        self.approver = check_approver(approver)
        _check_wait_fits_freshness(self.approver, pep, owner)
        self.judgements: deque[Judgement] = deque(maxlen=history)
        self.outcomes: deque[Outcome] = deque(maxlen=history)
        self._lock = threading.Lock()
        self._ran: OrderedDict[tuple[str, str], tuple[bool, Any]] = OrderedDict()
        self._transcripts: OrderedDict[str, Transcript] = OrderedDict()
        if type(keep_transcripts) is not bool:
            raise ConfigurationError(f"{owner}: keep_transcripts must be True or False")
        self._keep_transcripts = keep_transcripts

    # --- declarations -----------------------------------------------------------------

    def declares(self, name: str) -> bool:
        """True when ``name`` has a declaration (a registry that fails is judged per call)."""
        try:
            self.registry.get(name)
        except UnregisteredToolError:
            return False
        except Exception:  # refused (fail closed) when called, with the failure audited
            return True
        return True

    def require_declared(self, names: Iterable[str], how: str = "") -> None:
        """Refuse, when the agent is built, tools that could never be judged.

        Raises:
            ConfigurationError: some of ``names`` have no declaration.
        """
        missing = sorted({name for name in names if not self.declares(name)})
        if missing:
            raise ConfigurationError(
                f"{self.owner}: tools {missing} have no policy declaration, so they could never "
                "run: declare each once with the plugin's tool_spec(tool, side_effects=..., "
                f"path_fields=...) and pass specs=[...]{how}"
            )

    @property
    def pauses(self) -> bool:
        """True when a call that needs an approval should pause the run, where the
        framework can: there is no approver, or the approver asks to pause (its ``pause``
        attribute is ``True``, as ``InboxApprover(pause=True)``'s is).

        A plugin of a framework that pauses for approvals judges with :meth:`judge` when
        this is true and with :meth:`check` / :meth:`acheck` otherwise. For an approver
        that asks to pause, :meth:`judge` files each pending request through its
        ``file(request)``; a framework that cannot pause calls :meth:`check`, which asks
        the approver as usual (an approver that pauses answers the request it filed).
        """
        if self.approver is None:
            return True
        try:
            return getattr(self.approver, "pause", False) is True
        except Exception:  # an approver whose attributes fail is asked, not paused for
            return False

    @property
    def last(self) -> Judgement | None:
        """The most recent judgement, or ``None`` before the first call."""
        with self._lock:
            return self.judgements[-1] if self.judgements else None

    # --- what the agent read ---------------------------------------------------------------

    def record_user(
        self, text: str, *, context: ExecutionContext | Mapping[str, Any] | None = None
    ) -> None:
        """Record what the user wrote in this task (trusted): a value of a later call that
        occurs here is labelled ``user`` (:class:`~jevqueue.policy.Provenance`).

        Raises:
            ConfigurationError: ``text`` is not a string, or no context is known.
        """
        self.transcript(context).user(text)

    def record_output(
        self,
        tool: str,
        output: Any,
        call_id: str | None = None,
        *,
        context: ExecutionContext | Mapping[str, Any] | None = None,
    ) -> None:
        """Record a tool output the agent read, trusted as the tool's declaration says
        (an undeclared tool's output is untrusted). :meth:`run` records what it runs; call
        this for outputs the guard did not run (a framework's own tools, a history replayed
        after a pause). Recording a call id twice keeps the first."""
        name = tool if type(tool) is str else str(tool)
        trust = self.registry.output_trust(name)
        self.transcript(context).output(name, call_id, output, trust)

    def transcript(self, context: ExecutionContext | Mapping[str, Any] | None = None) -> Transcript:
        """What this task's agent has read (the task is the context's ``task_id``)."""
        task = self._context(context).task_id
        with self._lock:
            transcript = self._transcripts.get(task)
            if transcript is None:
                transcript = self._transcripts[task] = Transcript()
                while len(self._transcripts) > _TASKS_LIMIT:
                    self._transcripts.popitem(last=False)
            else:
                self._transcripts.move_to_end(task)
            return transcript

    def _provenance(
        self, ctx: ExecutionContext, arguments: dict[str, Any], given: Transcript | None
    ) -> Provenance | None:
        if given is not None and type(given) is not Transcript:
            raise ConfigurationError(
                f"transcript must be a jevqueue Transcript, not {type(given).__name__}"
            )
        transcript = given
        if transcript is None:
            with self._lock:
                transcript = self._transcripts.get(ctx.task_id)
        if transcript is None or not len(transcript):
            return None
        provenance = transcript.provenance(arguments)
        return provenance if provenance else None  # nothing traceable: the plain call

    # --- judging ------------------------------------------------------------------------

    def judge(
        self,
        tool: str,
        arguments: Any,
        call_id: str | None = None,
        *,
        records: Sequence[Any] = (),
        context: ExecutionContext | Mapping[str, Any] | None = None,
        transcript: Transcript | None = None,
    ) -> Judgement:
        """Judge one call once, without asking the approver. Never raises an ``Exception``.

        Args:
            tool: The tool's name as the framework dispatches it.
            arguments: The raw arguments (a mapping; ``None`` is no arguments).
            call_id: The framework's id of the call, when it has one.
            records: Approval records for this call (after a pause, what the person gave;
                the dicts ``jevqueue approve`` prints are read as records).
            context: This call's context, when it is not the guard's.
            transcript: What the agent read, when the framework keeps it (a LangGraph
                state's messages): used instead of the task's transcript the guard keeps.

        Returns:
            Allowed; refused; or pending, when an approval is needed and no ``records``
            were given (records that do not authorise the call make it refused, with the
            records' own refusal — "already used", "approves another action" — first).
        """
        try:
            outcome = self._judge(tool, arguments, call_id, records, context, transcript)
            if outcome.pending and self.approver is not None and self.pauses:
                outcome = self._file_pending(outcome)
        except Exception as error:  # fail closed: a failed check is a refusal
            outcome = self._failed(tool, call_id, error, context)
        return self._keep(outcome)

    def check(
        self,
        tool: str,
        arguments: Any,
        call_id: str | None = None,
        *,
        records: Sequence[Any] = (),
        context: ExecutionContext | Mapping[str, Any] | None = None,
        transcript: Transcript | None = None,
    ) -> Judgement:
        """Judge one call, asking a plain approver when an approval is needed.

        Never raises an ``Exception``; never answers pending. An ``async`` approver cannot
        be awaited here: the call is refused with a message saying to run asynchronously.
        """
        first = self.judge(
            tool, arguments, call_id, records=records, context=context, transcript=transcript
        )
        if not first.pending:
            return first
        try:
            answer = self._ask(first)
            if inspect.isawaitable(answer):
                _close(answer)
                raise ConfigurationError(
                    "the approver is async and this framework checks calls synchronously: "
                    "run the agent asynchronously, or give a plain approver"
                )
            outcome = self._answered(first, answer, context)
        except Exception as error:
            outcome = self._failed(tool, call_id, error, context, first.request)
        return self._keep(outcome)

    async def acheck(
        self,
        tool: str,
        arguments: Any,
        call_id: str | None = None,
        *,
        records: Sequence[Any] = (),
        context: ExecutionContext | Mapping[str, Any] | None = None,
        transcript: Transcript | None = None,
    ) -> Judgement:
        """Like :meth:`check`, awaiting the approver when it is ``async``."""
        first = self.judge(
            tool, arguments, call_id, records=records, context=context, transcript=transcript
        )
        if not first.pending:
            return first
        try:
            answer = self._ask(first)
            if inspect.isawaitable(answer):
                try:
                    answer = await answer
                except ApprovalRequiredError as declined:
                    answer = declined
            outcome = self._answered(first, answer, context)
        except Exception as error:
            outcome = self._failed(tool, call_id, error, context, first.request)
        return self._keep(outcome)

    def resume(
        self,
        pending: Judgement,
        answer: Any,
        *,
        context: ExecutionContext | Mapping[str, Any] | None = None,
    ) -> Judgement:
        """Judge a paused call again with what the person answered (records, ``None``, or
        an :class:`~jevqueue.errors.ApprovalDeclinedError`). Never raises an ``Exception``."""
        try:
            if pending.request is None or pending.action is None:
                raise ConfigurationError("resume() takes a pending judgement of this guard")
            outcome = self._answered(pending, answer, context)
        except Exception as error:
            outcome = self._failed(pending.tool, pending.call_id, error, context, pending.request)
        return self._keep(outcome)

    def refuse(
        self,
        tool: Any,
        error: BaseException,
        call_id: str | None = None,
        *,
        why: str | None = None,
        context: ExecutionContext | Mapping[str, Any] | None = None,
    ) -> Judgement:
        """Refuse, and audit as refused before evaluation, a call the plugin knows must not
        run before the policy is asked: arguments that are not JSON, a call without a name,
        a tool the turn did not offer. ``why`` is what the model reads (default: the
        error's message). Never raises an ``Exception``."""
        name = _safe_name(tool)
        with contextlib.suppress(Exception):
            self._audit_rejection(name, self._context(context), error)
        reason = why if why is not None else f"it was refused before evaluation: {error}"
        return self._keep(_refused(name, call_id, reason, error=repr(error)))

    # --- running --------------------------------------------------------------------------

    def has_run(self, judgement: Judgement) -> bool:
        """True when this judgement's call id already ran (``run`` would replay its result)."""
        if not judgement.call_id or judgement.action is None:
            return False
        return self._ran_before(judgement.call_id, judgement.action.call_digest)

    def _ran_before(self, call_id: str, digest: str) -> bool:
        with self._lock:
            return (call_id, digest) in self._ran

    def run(self, judgement: Judgement, execute: Callable[[dict[str, Any]], T]) -> T:
        """Run an allowed call with its judged arguments, at most once per call id.

        Args:
            judgement: An allowed judgement of this guard.
            execute: The framework's way to run the tool, given the arguments to run.

        Returns:
            What ``execute`` returned; for a call id that already ran, the first run's
            result (or its exception, raised again; :class:`ToolInterruptedError` when the
            first run was cancelled midway) without running it a second time.

        Raises:
            PolicyDeniedError: ``judgement`` is not allowed.
        """
        key, done = self._previous_run(judgement)
        if done is not None:
            replayed: T = _replay(done)
            return replayed
        with self._recorded(judgement, key) as record:
            result = execute(judgement.run_arguments())
            record(result)
        self._read(judgement, result)
        return result

    async def arun(
        self, judgement: Judgement, execute: Callable[[dict[str, Any]], Awaitable[T]]
    ) -> T:
        """Like :meth:`run`, for an ``async`` executor."""
        key, done = self._previous_run(judgement)
        if done is not None:
            replayed: T = _replay(done)
            return replayed
        with self._recorded(judgement, key) as record:
            result = await execute(judgement.run_arguments())
            record(result)
        self._read(judgement, result)
        return result

    def _read(self, judgement: Judgement, result: Any) -> None:
        """The agent reads what the tool returned: record it for later calls' provenance."""
        if judgement.action is None or not self._keep_transcripts:
            return
        with contextlib.suppress(Exception):  # a result that cannot be read is not fatal
            spec = judgement.action.spec
            trust = spec.output_trust if spec is not None else UNTRUSTED
            self.transcript(judgement.action.context).output(
                judgement.tool, judgement.call_id, result, trust
            )

    def _previous_run(
        self, judgement: Judgement
    ) -> tuple[tuple[str, str] | None, tuple[bool, Any] | None]:
        """The run-once key of ``judgement``, and how its first run ended, if it ran."""
        key = self._run_key(judgement)
        if key is None:
            return None, None
        with self._lock:
            return key, self._ran.get(key)

    @contextlib.contextmanager
    def _recorded(
        self, judgement: Judgement, key: tuple[str, str] | None
    ) -> Iterator[Callable[[Any], None]]:
        """Remember how the run inside ends: returned (through the callable), raised, or
        cancelled midway — the effect may have happened, and a replay says so, never
        re-raising this cancellation into another task."""
        try:
            yield lambda result: self._remember(judgement, key, (True, result))
        except Exception as error:
            self._remember(judgement, key, (False, error))
            raise
        except BaseException:
            self._remember(judgement, key, (False, _interrupted(judgement)))
            raise

    def _run_key(self, judgement: Judgement) -> tuple[str, str] | None:
        if not isinstance(judgement, Judgement) or not judgement.allowed:
            raise PolicyDeniedError(
                "only an allowed judgement may run: "
                + (getattr(judgement, "message", "") or "this one was not allowed"),
                getattr(judgement, "verdict", None),
            )
        if not judgement.call_id or judgement.action is None:
            return None
        return (judgement.call_id, judgement.action.call_digest)

    def _remember(
        self, judgement: Judgement, key: tuple[str, str] | None, done: tuple[bool, Any]
    ) -> None:
        returned, value = done
        outcome = Outcome(
            judgement.tool,
            judgement.call_id,
            judgement.action_digest,
            returned,
            None if returned else repr(value),
        )
        with self._lock:
            self.outcomes.append(outcome)
            if key is not None:
                self._ran[key] = done
                while len(self._ran) > _RAN_LIMIT:
                    self._ran.popitem(last=False)

    # --- the steps --------------------------------------------------------------------

    def _context(self, context: ExecutionContext | Mapping[str, Any] | None) -> ExecutionContext:
        if context is not None:
            return ExecutionContext.coerce(context)
        if self.context is None:
            raise ConfigurationError(
                f"{self.owner}: no execution context for this call: give the guard context=, "
                "or pass context= with each call"
            )
        return self.context

    def _judge(
        self,
        tool: str,
        arguments: Any,
        call_id: str | None,
        records: Sequence[Any],
        context: ExecutionContext | Mapping[str, Any] | None,
        transcript: Transcript | None = None,
    ) -> Judgement:
        ctx = self._context(context)
        name = tool if type(tool) is str else str(tool)
        judged = _plain(arguments)
        try:
            provenance = self._provenance(ctx, judged, transcript)
            action = Action.build(self.registry, name, judged, ctx, provenance=provenance)
        except JevError as rejected:
            self._audit_rejection(name, ctx, rejected)
            return _refused(
                name,
                call_id,
                f"it was refused before evaluation: {rejected}",
                error=repr(rejected),
            )
        if call_id and self._ran_before(call_id, action.call_digest):
            # A framework that re-runs a whole batch on resume asks again about a call that
            # already ran: it was judged (and approved) then, and run() replays its result;
            # judging it again would spend a fresh approval on a call that will not run.
            return Judgement(
                JudgementKind.ALLOWED,
                name,
                call_id,
                arguments=MappingProxyType(action.arguments_to_run(judged)),
                action=action,
            )
        given = approval_records(records) if records else ()
        try:
            verdict = self.pep.enforce(action, given)
        except UnfulfilledObligationError as unmet:
            request = ApprovalRequest.of(action, unmet.verdict, call_id)
            if given:
                return _refused(
                    name,
                    call_id,
                    _approval_refusal(action, unmet.verdict),
                    action=action,
                    verdict=unmet.verdict,
                    request=request,
                )
            return Judgement(
                JudgementKind.PENDING,
                name,
                call_id,
                action=action,
                verdict=unmet.verdict,
                request=request,
            )
        except PolicyDeniedError as denied:
            return _refused(
                name, call_id, _reasons(denied.verdict), action=action, verdict=denied.verdict
            )
        return _settled(action, judged, call_id, verdict, None)

    def _ask(self, pending: Judgement) -> Any:
        if self.approver is None:
            return _NoApprover()
        assert pending.request is not None
        try:
            return self.approver(pending.request)
        except ApprovalRequiredError as declined:
            return declined

    def _answered(
        self,
        pending: Judgement,
        answer: Any,
        context: ExecutionContext | Mapping[str, Any] | None,
    ) -> Judgement:
        action, request = pending.action, pending.request
        assert action is not None and request is not None
        name, call_id = pending.tool, pending.call_id
        if isinstance(answer, _NoApprover):
            return _refused(
                name,
                call_id,
                f"it needs an explicit approval of action {action.digest} ("
                + "; ".join(request.reasons or ("the policy requires one",))
                + ") and no approver is configured: pass approver=<a callable that returns "
                "ApprovalRecord(s) for the ApprovalRequest it is shown>",
                action=action,
                verdict=pending.verdict,
            )
        if isinstance(answer, ApprovalRequiredError):
            if isinstance(answer, ApprovalExpiredError):
                # The pending record says an approval was asked for; only a record written
                # now can say that nobody gave one in time.
                why = f"the approval expired: {answer}"
                if pending.verdict is not None:
                    self._audit_expired(action, pending.verdict, why)
                return _refused(
                    name,
                    call_id,
                    why,
                    action=action,
                    verdict=pending.verdict,
                    request=request,
                    expired=True,
                )
            why = f"the approver declined: {answer}"
            return _refused(
                name, call_id, why, action=action, verdict=pending.verdict, request=request
            )
        records = approval_records(answer)
        if not records:
            return _refused(
                name,
                call_id,
                f"it needs an explicit approval of action {action.digest} and the approver "
                "gave none",
                action=action,
                verdict=pending.verdict,
                request=request,
            )
        try:
            verdict = self.pep.enforce(action, records)
        except UnfulfilledObligationError as still:
            return _refused(
                name,
                call_id,
                _approval_refusal(action, still.verdict),
                action=action,
                verdict=still.verdict,
                request=request,
            )
        except PolicyDeniedError as denied:
            return _refused(
                name,
                call_id,
                _reasons(denied.verdict),
                action=action,
                verdict=denied.verdict,
                request=request,
            )
        return _settled(action, dict(action.arguments), call_id, verdict, request)

    def _failed(
        self,
        tool: Any,
        call_id: str | None,
        error: Exception,
        context: Any,
        request: ApprovalRequest | None = None,
    ) -> Judgement:
        name = _safe_name(tool)
        if request is None:
            # Refused either way; the PEP logs its own failures.
            with contextlib.suppress(Exception):
                self._audit_rejection(name, self._context(context), error)
        where = (
            "the approver failed" if request is not None else "the policy check could not complete"
        )
        return _refused(
            name,
            call_id,
            f"{where} ({type(error).__name__}: {error})",
            error=repr(error),
            request=request,
        )

    def _file_pending(self, pending: Judgement) -> Judgement:
        """File a pending call's request through an approver that asks to pause, so that
        reviewers see it while the run is paused. A filing that fails refuses the call:
        a run paused with nothing filed would wait for an answer nobody can give."""
        request = pending.request
        assert request is not None
        try:
            file = getattr(self.approver, "file", None)
            if not callable(file):
                raise ConfigurationError(
                    f"the approver {type(self.approver).__name__} asks to pause (pause=True) "
                    "but has no file(request) method to file the request with: give it one, "
                    "or set its pause to False so that it is asked inline"
                )
            filed = file(request)
            if inspect.isawaitable(filed):
                _close(filed)
                raise ConfigurationError(
                    "the approver's file(request) is async: it must file the request "
                    "synchronously, before the run pauses"
                )
        except Exception as error:
            return _refused(
                pending.tool,
                pending.call_id,
                "its approval request could not be filed, so the run was not paused for "
                f"it ({type(error).__name__}: {error}); make the approver's inbox reachable "
                "and run the call again",
                action=pending.action,
                verdict=pending.verdict,
                request=request,
                error=repr(error),
            )
        return pending

    def _keep(self, outcome: Judgement) -> Judgement:
        with self._lock:
            self.judgements.append(outcome)
        return outcome

    def _audit_expired(self, action: Action, verdict: Verdict, why: str) -> None:
        audit = getattr(self.pep, "audit_expired", None)
        if callable(audit):
            with contextlib.suppress(Exception):
                audit(action, verdict, why)

    def _audit_rejection(self, name: str, context: ExecutionContext, error: BaseException) -> None:
        audit = getattr(self.pep, "audit_rejection", None)
        if callable(audit):
            audit(name, context, error)


class _NoApprover:
    """The answer when no approver is configured."""


def refusal_message(tool: str, why: str, *, expired: bool = False) -> str:
    """The one sentence every plugin's model reads for a refused call.

    An approval that expired is not a denial: nobody decided, and the sentence says so.
    """
    if expired:
        return (
            f"jevqueue did not run the call to {tool!r}: {why}; nobody denied it, and it "
            "may be asked for again"
        )
    return f"jevqueue denied the call to {tool!r}: {why}; the call was not run"


def _refused(
    tool: str,
    call_id: str | None,
    why: str,
    *,
    action: Action | None = None,
    verdict: Verdict | None = None,
    request: ApprovalRequest | None = None,
    error: str | None = None,
    expired: bool = False,
) -> Judgement:
    return Judgement(
        JudgementKind.REFUSED,
        tool,
        call_id,
        message=refusal_message(tool, why, expired=expired),
        action=action,
        verdict=verdict,
        request=request,
        error=error,
    )


def _settled(
    action: Action,
    judged: dict[str, Any],
    call_id: str | None,
    verdict: Verdict,
    request: ApprovalRequest | None,
) -> Judgement:
    if verdict.kind is VerdictKind.REPAIR:
        return _refused(
            action.tool,
            call_id,
            "the policy proposes a repaired call instead, which was not run: "
            f"{dict(verdict.repaired or {})!r}; make that call if it does what you need",
            action=action,
            verdict=verdict,
            request=request,
        )
    if not verdict.allowed:
        return _refused(
            action.tool, call_id, _reasons(verdict), action=action, verdict=verdict, request=request
        )
    return Judgement(
        JudgementKind.ALLOWED,
        action.tool,
        call_id,
        arguments=MappingProxyType(action.arguments_to_run(judged)),
        action=action,
        verdict=verdict,
        request=request,
    )


def _reasons(verdict: Verdict) -> str:
    return "; ".join(verdict.reasons) or "the policy did not allow it"


def _approval_refusal(action: Action, verdict: Verdict) -> str:
    """Why the records given did not authorise the call, the records' own refusals first."""
    refusals = [
        reason
        for reason in verdict.reasons
        if reason.startswith(
            (
                "approval record #",
                "the approvals could not",
                "explicit approval unmet: ",
                "explicit approval refused: ",
            )
        )
    ]
    if refusals:
        return "the approval given was refused: " + "; ".join(refusals)
    return f"the approval given does not authorise this exact action ({action.digest}): " + (
        _reasons(verdict)
    )


def _plain(arguments: Any) -> dict[str, Any]:
    if arguments is None:
        return {}
    if not isinstance(arguments, Mapping):
        raise ConfigurationError(
            f"tool arguments must be a mapping of names to values, not {type(arguments).__name__}"
        )
    # The policy judges a private copy: nothing a rule does to it can change what runs.
    return _copy(arguments)


def _copy(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """A private copy, as ``copy.deepcopy`` makes it; flat arguments need only one level."""
    for value in arguments.values():
        if type(value) not in _SCALARS:
            return copy.deepcopy(dict(arguments))
    return dict(arguments)


def _interrupted(judgement: Judgement) -> ToolInterruptedError:
    return ToolInterruptedError(
        refusal_message(
            judgement.tool,
            "its first run was interrupted and may have had its effect, so it is not run again",
        )
    )


def _replay(done: tuple[bool, Any]) -> Any:
    returned, value = done
    if returned:
        return value
    raise value


def _safe_name(tool: Any) -> str:
    try:
        return tool if type(tool) is str else str(tool)
    except Exception:
        return "<unnamed tool>"


def _close(awaitable: Any) -> None:
    close = getattr(awaitable, "close", None)
    if callable(close):
        close()
