"""The PEP in front of every Hermes tool call: a ``pre_tool_call`` hook and an execution gate.

:class:`PolicyGuard` adapts :class:`jevqueue.policy.Guard` to Hermes with two callbacks that
work as a pair:

* :meth:`PolicyGuard.pre_tool_call` — Hermes' ``pre_tool_call`` hook. It hands the call's
  name, arguments and id to :meth:`Guard.check <jevqueue.policy.Guard.check>`, which judges
  it (audited, fail closed) and asks the approver inline when the policy wants an explicit
  approval. A refusal is ``{"action": "block", "message": ...}``: the message is the tool
  result the model reads. An allowed judgement is kept for the gate, keyed by the call.
* :meth:`PolicyGuard.tool_execution` — Hermes' ``tool_execution`` middleware, which wraps
  the tool itself. A Hermes hook cannot change the arguments a tool runs with; this
  middleware can (``next_call(arguments)``). It runs the call only if the hook allowed
  exactly this call (same call, same name, same arguments), through
  :meth:`Guard.run <jevqueue.policy.Guard.run>` with the judgement's ``run_arguments()``
  — each path field as the resolved absolute path the policy judged, an absent optional
  working directory as the workspace — so the tool touches what was judged, not a path
  relative to the process's working directory, and each call runs at most once. A call
  the hook never judged (``skip_pre_tool_call_hook``), changed since, or already run is
  refused, and the refusal audited.

A third callback tells the guard what the agent read: :meth:`PolicyGuard.pre_api_request`,
Hermes' ``pre_api_request`` hook, keeps the conversation each model call is sent, under
that call's ``api_request_id``; the ``pre_tool_call`` of every tool call its reply makes
carries the same id, and the call is judged with the transcript of those messages (see
:mod:`~jevqueue.plugins.hermes.request_transcript`): the user's words and the tool outputs
the model had read, so the policy knows which argument came from where and an approval
request says so. A call whose model request the hook never saw (a tool dispatched outside
the agent loop) is judged with what the guard itself ran.

Hermes swallows exceptions raised by hooks and middleware and then runs the tool anyway
(fail-open), so neither callback raises: any failure inside a check is a block whose
message names it — an approver's own error included. Hermes' own human-approval gate
(``{"action": "approve"}``) answers once / session / always, which binds to no action
digest; the guard does not use it.
"""

from __future__ import annotations

import contextvars
import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from jevqueue.errors import InvalidToolArgumentsError
from jevqueue.plugins.hermes._framework import coerce_tool_args
from jevqueue.plugins.hermes.request_transcript import request_transcript
from jevqueue.policy import (
    ApprovalRequest,
    Approver,
    ExecutionContext,
    Guard,
    Judgement,
    ToolSpec,
    Transcript,
)
from jevqueue.policy._approval_request import deprecated_approver

__all__ = ["ApprovalCallback", "ApprovalRequest", "GuardOutcome", "PolicyGuard"]

ApprovalCallback = Approver
"""Deprecated name of :class:`jevqueue.policy.Approver`, kept for existing code."""

GuardOutcome = Judgement
"""Deprecated name of :class:`jevqueue.policy.Judgement`, what the guard decided for a call."""

# The judgement whose tool is running in this thread: Hermes' concurrent executor runs a
# registry tool through the ``tool_execution`` chain twice (``invoke_tool`` around
# ``handle_function_call``), and the inner pass belongs to the call the outer one runs.
_RUNNING: contextvars.ContextVar[tuple[tuple[str, str, str], Judgement] | None] = (
    contextvars.ContextVar("jevqueue_hermes_running", default=None)
)
_REQUESTS_KEPT = 64  # model requests whose conversation is kept for the calls they make


class PolicyGuard:
    """Judges every tool call of a Hermes agent with the PEP before it runs.

    Args:
        pep: The policy enforcement point (it audits every decision).
        specs: One declaration per tool (:func:`~jevqueue.plugins.hermes.tool_spec`).
        context: The execution context; validated now.
        approver: Who approves calls that need an explicit approval
            (:class:`~jevqueue.policy.Approver`: shown the core
            :class:`~jevqueue.policy.ApprovalRequest`, answers with records, ``None``, or
            raises :class:`~jevqueue.errors.ApprovalDeclinedError`). Hermes checks calls
            synchronously, so it must be a plain callable. ``None`` refuses such calls,
            with a message naming the digest to approve.
        session_id: Judge only this Hermes session's calls; calls of every other session,
            a subagent's included, then run unjudged, so set it only when another guard
            covers them. ``None`` (the default) judges every call in the process.
        approvals: Deprecated name of ``approver``.

    Attributes:
        guard: The core :class:`~jevqueue.policy.Guard` that judges, asks and runs.

    Raises:
        ConfigurationError: ``pep`` has no ``enforce`` method, a spec is not a ToolSpec,
            or the approver is not callable (or given under two keywords).
        InvalidContextError: ``context`` is incomplete or ambient.
    """

    def __init__(
        self,
        *,
        pep: Any,
        specs: Iterable[ToolSpec],
        context: ExecutionContext | Mapping[str, Any],
        approver: Approver | None = None,
        session_id: str | None = None,
        approvals: Approver | None = None,
    ) -> None:
        approver = deprecated_approver(approver, "PolicyGuard", approvals=approvals)
        self.guard = Guard(
            pep, specs=specs, context=context, approver=approver, owner="PolicyGuard"
        )
        self.session_id = session_id
        self._judged: dict[tuple[str, str, str], tuple[str, dict[str, Any], Judgement]] = {}
        # What each recent model request was sent (its messages, then their transcript).
        self._read: OrderedDict[tuple[str, str], Sequence[Any] | Transcript] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def pep(self) -> Any:
        """The policy enforcement point."""
        return self.guard.pep

    @property
    def registry(self) -> Any:
        """The tools' declarations."""
        return self.guard.registry

    @property
    def context(self) -> ExecutionContext:
        """The execution context calls are judged in."""
        return self.guard.context

    @property
    def approver(self) -> Approver | None:
        """The approver asked for calls that need an explicit approval."""
        return self.guard.approver

    @property
    def outcomes(self) -> list[Judgement]:
        """The guard's recent judgements, oldest first."""
        return list(self.guard.judgements)

    def _mine(self, session_id: str) -> bool:
        return self.session_id is None or session_id == self.session_id

    # --- what the agent read ---------------------------------------------------------

    def pre_api_request(
        self,
        *,
        session_id: str = "",
        api_request_id: str = "",
        conversation_history: Any = None,
        request_messages: Any = None,
        **_: Any,
    ) -> None:
        """The ``pre_api_request`` hook: keep the conversation this model call is sent,
        for the calls its reply makes (Hermes' own messages, in chat form in every API
        mode; the request's messages when it gives none)."""
        if not self._mine(session_id) or not api_request_id:
            return
        messages = conversation_history if isinstance(conversation_history, list) else None
        if messages is None and isinstance(request_messages, list):
            messages = request_messages
        if messages is None:
            return
        key = (str(session_id or ""), str(api_request_id))
        with self._lock:
            self._read[key] = list(messages)
            self._read.move_to_end(key)
            while len(self._read) > _REQUESTS_KEPT:
                self._read.popitem(last=False)

    def _transcript(self, session_id: str, api_request_id: str) -> Transcript | None:
        """What the model had read when it made a call of request ``api_request_id``;
        ``None`` when the hook never saw that request."""
        key = (str(session_id or ""), str(api_request_id or ""))
        with self._lock:
            read = self._read.get(key)
        if read is None or isinstance(read, Transcript):
            return read
        transcript = request_transcript(self.guard, read)
        with self._lock:
            if key in self._read:
                self._read[key] = transcript
        return transcript

    # --- the hook -------------------------------------------------------------------

    def pre_tool_call(
        self,
        *,
        tool_name: str,
        args: Any,
        session_id: str = "",
        tool_call_id: str = "",
        api_request_id: str = "",
        **_: Any,
    ) -> dict[str, str] | None:
        """The ``pre_tool_call`` hook: ``None`` lets the call through, a dict blocks it."""
        if not self._mine(session_id):
            return None
        key = _key(session_id, api_request_id, tool_call_id)
        name = str(tool_name)
        try:
            given = json.loads(json.dumps(args)) if isinstance(args, Mapping) else args
            # Judge what the tool would get: Hermes coerces "5" to 5 by the tool's schema, on
            # some paths only after this hook.
            judged = coerce_tool_args(name, json.loads(json.dumps(given))) if given else given
            transcript = self._transcript(session_id, api_request_id)
            judgement = self.guard.check(name, judged, _call_id(key), transcript=transcript)
            if not judgement.allowed:
                return {"action": "block", "message": judgement.message}
            with self._lock:
                self._judged[key] = (name, given, judgement)
        except Exception as exc:  # fail closed: Hermes would run the tool on an exception
            return {
                "action": "block",
                "message": self.guard.refuse(name, exc, _call_id(key)).message,
            }
        return None

    # --- the execution gate ------------------------------------------------------------

    def tool_execution(
        self,
        *,
        tool_name: str,
        args: Any,
        next_call: Callable[[dict[str, Any]], Any],
        session_id: str = "",
        tool_call_id: str = "",
        api_request_id: str = "",
        **_: Any,
    ) -> Any:
        """The ``tool_execution`` middleware: run only what the hook allowed, as judged."""
        if not self._mine(session_id):
            return next_call(args)
        key = _key(session_id, api_request_id, tool_call_id)
        running = _RUNNING.get()
        if running is not None and running[0] == key and running[1].tool == tool_name:
            # Hermes' inner pass of the call the outer pass is running: the same arguments.
            return next_call(running[1].run_arguments())
        with self._lock:
            judged = self._judged.pop(key, None)
        if judged is None or judged[0] != tool_name or not _same(tool_name, judged[1], args):
            unjudged = InvalidToolArgumentsError(
                str(tool_name),
                "it was not the call the policy judged (unjudged, changed since, or already run)",
            )
            refused = self.guard.refuse(tool_name, unjudged, _call_id(key))  # audited
            return json.dumps({"error": refused.message})
        judgement = judged[2]
        token = _RUNNING.set((key, judgement))
        try:
            return self.guard.run(judgement, next_call)
        finally:
            _RUNNING.reset(token)


def _key(session_id: str, api_request_id: str, tool_call_id: str) -> tuple[str, str, str]:
    return (str(session_id or ""), str(api_request_id or ""), str(tool_call_id or ""))


def _call_id(key: tuple[str, str, str]) -> str | None:
    """The call's id for the guard, scoped to the model message that made it.

    Some servers number calls per message (``call_0``), so the bare id repeats across
    turns; the guard runs a call id at most once, so it gets the message's id too.
    """
    session_id, api_request_id, tool_call_id = key
    if not tool_call_id:
        return None  # nothing identifies the call (a sandbox's tool call): never deduplicated
    return "/".join(part for part in (api_request_id or session_id, tool_call_id) if part)


def _same(tool: str, judged: Mapping[str, Any], args: Any) -> bool:
    """Whether ``args`` are the judged arguments, before or after Hermes' type coercion."""
    given = _json(args)
    if given is None:
        return False
    if _json(judged) == given:
        return True
    try:
        coerced = coerce_tool_args(tool, json.loads(json.dumps(judged)))
    except Exception:
        return False
    return _json(coerced) == given


def _json(value: Any) -> str | None:
    try:
        return json.dumps(value, sort_keys=True)
    except (TypeError, ValueError):
        return None
