"""Runs the tool calls of a chat completion, each judged by the guard before it runs.

The governor decides which tool the model must call; the runner decides nothing. It reads
each call of ``choices[0].message.tool_calls`` (and the legacy ``function_call``) with
:func:`~jevqueue.plugins.openai.completion.read_called_tools` — the governor's read-back
reader, so the tool that runs is the tool the read-back checked — hands it to one
:class:`~jevqueue.policy.Guard` as (tool, arguments, ``tool_calls[i].id``), and writes the
:class:`~jevqueue.policy.Judgement` back as the ``tool`` message the model reads.

The guard judges the call with the PEP (audited, fail closed), asks the approver when the
policy requires an explicit approval, and runs the function with the arguments it judged
(each path field as the resolved absolute path), at most once per call id: running the
same response again — for instance with the approval records a call was waiting for —
does not run again a call that already ran.

What the agent read. Given the conversation (``messages=``, the list the host sends), the
runner judges each call with the :class:`~jevqueue.policy.Transcript` of the messages
before the assistant message that made it: what the user wrote and every tool output, each
with its tool and call id (:mod:`~jevqueue.plugins.openai.transcript`). The policy then
knows which argument came from the user's request and which from an untrusted output, and
an approval request says which output. Read from the conversation, the labels are the same
when the response runs again after the caller appended the first run's ``tool`` messages,
so an approval given for the digest shown still matches.

Approvals. ``approver=`` asks inline (plain for :meth:`PolicyToolRunner.run`, plain or
``async`` for :meth:`PolicyToolRunner.arun`); it is shown the core
:class:`~jevqueue.policy.ApprovalRequest` and declines by raising
:class:`~jevqueue.errors.ApprovalDeclinedError`. Without an approver a call that needs an
approval pauses: it does not run, and its result carries ``approval_requested`` (the
digest) and the request (``result.judgement.request``). Obtain records for it and run the
same response again with ``approval_records=[...]``.

Routes around the guard:

* refused when the runner is built (:class:`~jevqueue.errors.ConfigurationError`): a
  function for a tool that has no declaration — including one keyed by another spelling
  of a declared name — a key that is not a string, and a function that is not callable;
* refused per call, audited, never run: a call whose name cannot be read, arguments that
  are not a JSON object, a response with several choices, a declared tool this runner has
  no function for, and an ``async`` function under the synchronous :meth:`run`;
* judged like any call: a legacy ``function_call`` and a direct :meth:`run_call`. The
  function dispatched is the one for the name the guard judged, from a copy of
  ``functions`` taken when the runner was built.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jevqueue.errors import ConfigurationError, UsageError
from jevqueue.plugins.openai.completion import UNNAMED_CALL, CalledTool, read_called_tools
from jevqueue.plugins.openai.transcript import transcript_of
from jevqueue.policy import (
    Approver,
    ExecutionContext,
    Guard,
    Judgement,
    PolicyEnforcementPoint,
    ToolRegistry,
    ToolSpec,
    Transcript,
    Verdict,
    refusal_message,
    registry_from_specs,
)

__all__ = ["PolicyToolRunner", "ToolCallResult"]

ToolFunction = Callable[..., Any]

_OWNER = "PolicyToolRunner"


@dataclass(frozen=True)
class ToolCallResult:
    """What one tool call came to.

    Attributes:
        call_id: The ``tool_calls[i].id`` the result answers ("" when there was none).
        name: The tool called.
        arguments: The arguments as the model sent them, parsed (``{}`` when they were
            not a JSON object). The function received ``judgement.arguments``.
        content: What the model reads: the tool's output, or why it did not run.
        is_error: True when the call did not run, or ran and failed.
        executed: True when the tool's function ran for this call (now, or in an earlier
            run of the same call id: see ``replayed``).
        verdict: The policy's verdict, when the call was evaluated.
        approval_requested: The action digest an approval was asked for (or must be
            obtained for, when the runner has no approver), when the policy asks for one.
        legacy: True when the result answers a legacy ``function_call``.
        judgement: The guard's judgement, when the call reached the guard; for a call
            waiting for an approval, ``judgement.request`` is the core ApprovalRequest.
        replayed: True when the call id had already run: ``content`` is the first run's
            result and the function was not called again.
    """

    call_id: str
    name: str
    arguments: Mapping[str, Any]
    content: str
    is_error: bool
    executed: bool
    verdict: Verdict | None = None
    approval_requested: str | None = None
    legacy: bool = False
    judgement: Judgement | None = None
    replayed: bool = False

    @property
    def pending(self) -> bool:
        """True when the call waits for an approval of ``approval_requested``."""
        return self.judgement is not None and self.judgement.pending

    def message(self) -> dict[str, Any]:
        """The message to append to the conversation.

        A ``tool`` message answering ``call_id``; for a legacy ``function_call``, the
        ``function`` message that answers it.
        """
        if self.legacy:
            return {"role": "function", "name": self.name, "content": self.content}
        return {"role": "tool", "tool_call_id": self.call_id, "content": self.content}


class PolicyToolRunner:
    """Runs the tool calls a response makes, each judged by the guard first.

    Args:
        functions: Tool name to the Python function that implements it; called with the
            judged arguments as keyword arguments (``async`` functions under :meth:`arun`).
            Its return value becomes the ``tool`` message (a string as is, anything else as
            JSON).
        pep: The policy enforcement point; it audits every decision.
        specs: The tools' declarations (side effects, path fields), one ``ToolSpec`` per
            function (``tool_spec(...)``, or :func:`jevqueue.load_tools_file`). Every
            function must be declared: an undeclared tool could never be judged.
        registry: Deprecated: the older spelling of ``specs`` (a ``ToolRegistry``).
        context: The execution context of every call (an
            :class:`~jevqueue.policy.ExecutionContext` or a mapping of its fields).
        approver: Asked when a call needs an explicit approval: a callable taking the core
            :class:`~jevqueue.policy.ApprovalRequest` and returning approval record(s) or
            ``None`` (plain; ``async`` only with :meth:`arun`). Without one, such a call
            pauses: see :meth:`run`.
        messages: The conversation, in OpenAI message form: the list the host sends
            (``OpenAIChatHost(messages=...)``), which the caller appends replies and
            ``tool`` messages to. Read at each run: each call is judged with what the model
            had read before the assistant message that made it — what the user wrote and
            every tool output (see :mod:`~jevqueue.plugins.openai.transcript`) — so the
            policy knows where each argument came from. Without it the guard knows only
            the outputs it ran itself, and not what the user wrote.

    Attributes:
        guard: The :class:`~jevqueue.policy.Guard` every call goes through (its
            ``judgements``, ``outcomes`` and ``registry``).

    Raises:
        ConfigurationError: A function has no declaration, is not callable, or is keyed
            by something other than a tool name; ``approver`` is not callable.
        InvalidContextError: The context is incomplete or ambient.

    Example:
        >>> runner = PolicyToolRunner({"read_file": read_file}, pep=pep,  # doctest: +SKIP
        ...                           specs=specs, context=context, approver=approver)
        >>> messages.extend(r.message() for r in runner.run(response))  # doctest: +SKIP
    """

    def __init__(
        self,
        functions: Mapping[str, ToolFunction],
        *,
        pep: PolicyEnforcementPoint,
        specs: Iterable[ToolSpec] | ToolRegistry = (),
        registry: ToolRegistry | None = None,
        context: ExecutionContext | Mapping[str, Any],
        approver: Approver | None = None,
        messages: Sequence[Any] | None = None,
    ) -> None:
        if messages is not None and (
            isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Sequence)
        ):
            raise ConfigurationError(
                f"{_OWNER}: messages= takes the conversation's list of messages (the list the "
                f"host sends), not {type(messages).__name__}"
            )
        self._messages = messages
        registry = registry_from_specs(specs, registry=registry, owner=_OWNER)
        self.guard = Guard(pep, specs=registry, context=context, approver=approver, owner=_OWNER)
        self._functions = _checked(functions)
        self.guard.require_declared(
            self._functions, how=f", or leave the function out of {_OWNER}'s functions"
        )

    # --- the synchronous form ---------------------------------------------------------

    def run(
        self, response: Mapping[str, Any], approval_records: Sequence[Any] = ()
    ) -> list[ToolCallResult]:
        """Judge and run every tool call of a chat-completion response, in order.

        Calls are read exactly as the governor's read-back reads them
        (:func:`~jevqueue.plugins.openai.completion.read_called_tools`). A call whose name
        cannot be read (:data:`~jevqueue.plugins.openai.UNNAMED_CALL`: a ``type`` other
        than ``"function"``, or no string ``function.name``) is refused and audited, never
        run. Running the same response again runs only the calls that have not run yet;
        the others answer with their first result.

        Args:
            response: The response body (``choices[0].message.tool_calls`` and the legacy
                ``function_call``).
            approval_records: Approvals to present for calls that need one (what an
                approver gave for a paused call's ``approval_requested``); each is bound to
                one action digest and used at most once.

        Returns:
            One result per call, in order; ``[]`` when the response calls nothing.
        """
        results: list[ToolCallResult] = []
        # Every call was made by one assistant message: one transcript serves all.
        read: Transcript | UsageError | None = None
        first = True
        for call, refused in self._read(response):
            if refused is not None:
                results.append(refused)
                continue
            if first:
                read, first = self._read_before(call.call_id, _assistant_message(response)), False
            result = self._run_one(
                call.name,
                call.arguments,
                call.call_id,
                _key(response, call),
                approval_records,
                read,
            )
            results.append(dataclasses.replace(result, legacy=call.legacy))
        return results

    def run_call(
        self,
        name: str,
        arguments: Mapping[str, Any] | str,
        *,
        call_id: str = "",
        approval_records: Sequence[Any] = (),
    ) -> ToolCallResult:
        """Judge one call and run it if, and only if, the guard allows it.

        Args:
            name: The tool called.
            arguments: Its arguments, as a mapping or as the JSON string providers send.
            call_id: The id of the call, echoed in the ``tool`` message; a call id runs at
                most once.
            approval_records: Approvals to present if the policy asks for one.

        Returns:
            The result; it never raises for a policy outcome or a tool failure.
        """
        read = self._read_before(call_id, None)
        return self._run_one(name, arguments, call_id, call_id or None, approval_records, read)

    def _run_one(
        self,
        name: str,
        arguments: Any,
        call_id: str,
        key: str | None,
        records: Sequence[Any],
        read: Transcript | UsageError | None,
    ) -> ToolCallResult:
        parsed = self._admit(name, arguments, call_id, asynchronous=False)
        if isinstance(parsed, ToolCallResult):
            return parsed
        if isinstance(read, UsageError):
            return self._refuse(call_id, name, read, arguments=parsed)
        if self.guard.pauses:  # no one to ask (or it asks to pause): a call that needs one pauses
            judgement = self.guard.judge(name, parsed, key, records=records, transcript=read)
        else:
            judgement = self.guard.check(name, parsed, key, records=records, transcript=read)
        if not judgement.allowed:
            return _not_run(call_id, parsed, judgement)
        function = self._functions[judgement.tool]
        ran: list[bool] = []

        def execute(run_arguments: dict[str, Any]) -> Any:
            ran.append(True)
            return function(**run_arguments)

        try:
            output = self.guard.run(judgement, execute)
        except Exception as error:
            return _failed(call_id, parsed, judgement, error, replayed=not ran)
        return _returned(call_id, parsed, judgement, output, replayed=not ran)

    # --- the asynchronous form --------------------------------------------------------

    async def arun(
        self, response: Mapping[str, Any], approval_records: Sequence[Any] = ()
    ) -> list[ToolCallResult]:
        """Like :meth:`run`, awaiting an ``async`` approver and ``async`` functions."""
        results: list[ToolCallResult] = []
        # Every call was made by one assistant message: one transcript serves all.
        read: Transcript | UsageError | None = None
        first = True
        for call, refused in self._read(response):
            if refused is not None:
                results.append(refused)
                continue
            if first:
                read, first = self._read_before(call.call_id, _assistant_message(response)), False
            result = await self._arun_one(
                call.name,
                call.arguments,
                call.call_id,
                _key(response, call),
                approval_records,
                read,
            )
            results.append(dataclasses.replace(result, legacy=call.legacy))
        return results

    async def arun_call(
        self,
        name: str,
        arguments: Mapping[str, Any] | str,
        *,
        call_id: str = "",
        approval_records: Sequence[Any] = (),
    ) -> ToolCallResult:
        """Like :meth:`run_call`, awaiting an ``async`` approver and an ``async`` function."""
        read = self._read_before(call_id, None)
        return await self._arun_one(
            name, arguments, call_id, call_id or None, approval_records, read
        )

    async def _arun_one(
        self,
        name: str,
        arguments: Any,
        call_id: str,
        key: str | None,
        records: Sequence[Any],
        read: Transcript | UsageError | None,
    ) -> ToolCallResult:
        parsed = self._admit(name, arguments, call_id, asynchronous=True)
        if isinstance(parsed, ToolCallResult):
            return parsed
        if isinstance(read, UsageError):
            return self._refuse(call_id, name, read, arguments=parsed)
        if self.guard.pauses:
            judgement = self.guard.judge(name, parsed, key, records=records, transcript=read)
        else:
            judgement = await self.guard.acheck(name, parsed, key, records=records, transcript=read)
        if not judgement.allowed:
            return _not_run(call_id, parsed, judgement)
        function = self._functions[judgement.tool]
        ran: list[bool] = []

        async def execute(run_arguments: dict[str, Any]) -> Any:
            ran.append(True)
            output = function(**run_arguments)
            return await output if inspect.isawaitable(output) else output

        try:
            output = await self.guard.arun(judgement, execute)
        except Exception as error:
            return _failed(call_id, parsed, judgement, error, replayed=not ran)
        return _returned(call_id, parsed, judgement, output, replayed=not ran)

    # --- reading the framework's objects ----------------------------------------------

    def _read_before(
        self, call_id: str, message: Mapping[str, Any] | None
    ) -> Transcript | UsageError | None:
        """What the model had read when it made the call, from ``messages=`` (``None``
        without it: the guard's own record of what it ran); the error when it cannot be
        read, so that the call is refused."""
        if self._messages is None:
            return None
        try:
            return transcript_of(
                list(self._messages), self.guard.registry, message=message, call_id=call_id or None
            )
        except Exception as error:  # fail closed: a call whose history cannot be read
            return UsageError(f"the conversation's messages could not be read: {error!r}")

    def _read(
        self, response: Mapping[str, Any]
    ) -> Iterator[tuple[CalledTool, ToolCallResult | None]]:
        """Each call of ``response``, with its refusal when it cannot reach the guard."""
        choices = response.get("choices") if isinstance(response, Mapping) else None
        if isinstance(choices, list) and len(choices) > 1:
            # Only one choice can be read back and judged: refuse every call of each.
            error = UsageError(
                f"the response has {len(choices)} choices; only one can be judged: ask the "
                "provider for one choice (no n > 1)"
            )
            for choice in choices:
                for call in read_called_tools({**response, "choices": [choice]}):
                    yield call, self._refuse(call.call_id, call.name, error, legacy=call.legacy)
            return
        for call in read_called_tools(response):
            if call.name == UNNAMED_CALL:
                error = UsageError(
                    "a tool call whose name cannot be read: only "
                    '{"type": "function", "function": {"name": ..., "arguments": ...}} names '
                    "a tool; ask the model to call the tool again in that shape"
                )
                yield call, self._refuse(call.call_id, UNNAMED_CALL, error, legacy=call.legacy)
            else:
                yield call, None

    def _admit(
        self, name: str, arguments: Any, call_id: str, *, asynchronous: bool
    ) -> dict[str, Any] | ToolCallResult:
        """The parsed arguments, or the refusal of a call the guard must not be asked."""
        parsed = _parse(arguments)
        if parsed is None:
            error = UsageError(f"the arguments of {name!r} are not a JSON object: {arguments!r}")
            return self._refuse(call_id, name, error)
        function = self._functions.get(name) if type(name) is str else None
        if function is None and self.guard.declares(name):
            # Refused before judging, so that no approval is spent on a call that cannot run.
            error = UsageError(
                f"no function implements {name!r} in this {_OWNER}: pass one in its functions"
            )
            return self._refuse(call_id, name, error, arguments=parsed)
        if function is not None and not asynchronous and inspect.iscoroutinefunction(function):
            error = UsageError(
                f"the function of {name!r} is async: run the response with "
                f"`await runner.arun(response)`"
            )
            return self._refuse(call_id, name, error, arguments=parsed)
        return parsed

    def _refuse(
        self,
        call_id: str,
        name: str,
        error: UsageError,
        *,
        arguments: Mapping[str, Any] | None = None,
        legacy: bool = False,
    ) -> ToolCallResult:
        """Refuse, and audit, a call that could not be handed to the guard."""
        # The guard judges only calls it can read; these are audited as rejections, as the
        # guard audits the calls it refuses before evaluation.
        audit = getattr(self.guard.pep, "audit_rejection", None)
        if callable(audit):
            audit(name, self.guard.context, error)
        return ToolCallResult(
            call_id,
            name,
            dict(arguments or {}),
            refusal_message(name, str(error)),
            is_error=True,
            executed=False,
            legacy=legacy,
        )


def _assistant_message(response: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """``choices[0].message``: the assistant message that made the calls."""
    choices = response.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], Mapping):
        message = choices[0].get("message")
        if isinstance(message, Mapping):
            return message
    return None


def _key(response: Mapping[str, Any], call: CalledTool) -> str | None:
    """The id a call runs once under: its ``tool_calls[i].id``; for the legacy
    ``function_call``, which has none, the response's own id."""
    if call.call_id:
        return call.call_id
    response_id = response.get("id") if call.legacy else None
    return f"{response_id}:function_call" if isinstance(response_id, str) and response_id else None


def _checked(functions: Mapping[str, ToolFunction]) -> dict[str, ToolFunction]:
    """A private copy of ``functions``: a later change to the caller's mapping runs nothing."""
    if not isinstance(functions, Mapping):
        raise ConfigurationError(
            f"{_OWNER} takes a mapping of tool names to functions, not {type(functions).__name__}"
        )
    for name, function in functions.items():
        if type(name) is not str:
            raise ConfigurationError(
                f"{_OWNER}: functions are keyed by the tool's declared name (a str), not "
                f"{name!r} ({type(name).__name__})"
            )
        if not callable(function):
            raise ConfigurationError(
                f"{_OWNER}: the function for {name!r} is a {type(function).__name__}, not a "
                "callable: pass the Python function that implements the tool"
            )
    return dict(functions)


def _not_run(call_id: str, arguments: Mapping[str, Any], judgement: Judgement) -> ToolCallResult:
    """A refused call, or one waiting for an approval, written back for the model."""
    message = judgement.message
    if judgement.pending:
        message = refusal_message(
            judgement.tool,
            f"it waits for an explicit approval of action {judgement.approval_requested}, and "
            "this runner has no approver: the caller runs the response again with "
            "approval_records=[...] for that digest",
        )
    return ToolCallResult(
        call_id,
        judgement.tool,
        arguments,
        message,
        is_error=True,
        executed=False,
        verdict=judgement.verdict,
        approval_requested=judgement.approval_requested,
        judgement=judgement,
    )


def _returned(
    call_id: str, arguments: Mapping[str, Any], judgement: Judgement, output: Any, *, replayed: bool
) -> ToolCallResult:
    content = output if isinstance(output, str) else json.dumps(output, default=str)
    return ToolCallResult(
        call_id,
        judgement.tool,
        arguments,
        content,
        is_error=False,
        executed=True,
        verdict=judgement.verdict,
        approval_requested=judgement.approval_requested,
        judgement=judgement,
        replayed=replayed,
    )


def _failed(
    call_id: str,
    arguments: Mapping[str, Any],
    judgement: Judgement,
    error: Exception,
    *,
    replayed: bool,
) -> ToolCallResult:
    return ToolCallResult(
        call_id,
        judgement.tool,
        arguments,
        f"error: {judgement.tool} failed: {type(error).__name__}: {error}",
        is_error=True,
        executed=True,
        verdict=judgement.verdict,
        approval_requested=judgement.approval_requested,
        judgement=judgement,
        replayed=replayed,
    )


def _parse(arguments: Mapping[str, Any] | str | None) -> dict[str, Any] | None:
    if isinstance(arguments, Mapping):
        return dict(arguments)
    if arguments is None or arguments == "":
        return {}
    if not isinstance(arguments, str):
        return None
    try:
        parsed = json.loads(arguments)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None
