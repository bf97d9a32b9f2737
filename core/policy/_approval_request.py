"""One approval API for every plugin: the request an approver is shown, and what it answers.

When the policy answers a call with an ``explicit_approval`` obligation, the
:class:`~jevqueue.policy.Guard` builds one :class:`ApprovalRequest` — the tool, the
arguments as judged, the canonical action and its digest, the policy's reasons, the
context — and hands it to the approver. Every plugin passes the approver under the same
keyword, ``approver=``, and frameworks that pause a run natively (LangGraph's
``interrupt``, LlamaIndex's events, Pydantic AI's deferred tools, MCP elicitation) carry
this same request in their pause.

An :class:`Approver` is any callable, plain or ``async``::

    def approver(request: ApprovalRequest) -> ApprovalRecord | Iterable[ApprovalRecord] | None:
        ...

It answers with the signed :class:`~jevqueue.approvals.ApprovalRecord` (s) it obtained for
exactly ``request.action_digest`` (the dict ``jevqueue approve`` prints is read as the
record it is), or ``None`` to give none. To decline with a reason the model reads, raise
:class:`~jevqueue.errors.ApprovalDeclinedError`. The PEP then checks each record — bound
to the digest, fresh, signed by a trusted approver, never used before — so an approver
never decides alone. Anything else it returns or raises is reported, with what it returned
and what was expected, and the call does not run.
"""

from __future__ import annotations

import inspect
import json
import reprlib
import warnings
from collections.abc import Awaitable, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol, Union, runtime_checkable

from jevqueue.errors import ConfigurationError, InvalidApprovalError

if TYPE_CHECKING:  # pragma: no cover
    from jevqueue.approvals import ApprovalRecord
    from jevqueue.policy._action import Action
    from jevqueue.policy._approval_quorum import ApprovalQuorum
    from jevqueue.policy._context import ExecutionContext
    from jevqueue.policy._provenance import Provenance
    from jevqueue.policy._verdict import Verdict

__all__ = [
    "ApprovalAnswer",
    "ApprovalRequest",
    "Approver",
    "ApproverAnswerError",
    "approval_records",
    "check_approver",
    "deprecated_approver",
]

ApprovalAnswer = Union[
    "ApprovalRecord", Mapping[str, Any], Iterable[Union["ApprovalRecord", Mapping[str, Any]]], None
]
"""What an approver returns: record(s) bound to the request's digest, or ``None``."""


class ApproverAnswerError(ConfigurationError):
    """An approver returned something that is not approval records (or ``None``)."""


@dataclass(frozen=True)
class ApprovalRequest:
    """One tool call that needs an explicit approval before it may run.

    Attributes:
        tool: The tool called.
        arguments: The arguments as the policy judged them (read-only).
        action: The canonical action (tool, arguments, resolved targets, side effects,
            context) an approval must be bound to.
        action_digest: ``sha256:<hex>`` of the action: what an approval record must name.
        reasons: Why the policy asks for an approval.
        context: The execution context the call was judged in.
        call_id: The framework's id of the call, when it has one.
        verdict: The policy's verdict (``ALLOW_WITH_OBLIGATIONS``); its
            :attr:`quorums` say who must approve and how many.

    :attr:`provenance` says where each argument came from, when the plugin recorded what
    the agent read: a reviewer reads "to came from item 3 of read_inbox's output (call
    c1), not from your request" before approving.
    """

    tool: str
    arguments: Mapping[str, Any]
    action: Action
    action_digest: str
    reasons: tuple[str, ...]
    context: ExecutionContext
    call_id: str | None = None
    verdict: Verdict | None = None

    @classmethod
    def of(cls, action: Action, verdict: Verdict, call_id: str | None = None) -> ApprovalRequest:
        """The request for ``action``, which the policy answered with ``verdict``."""
        return cls(
            tool=action.tool,
            arguments=MappingProxyType(dict(action.arguments)),
            action=action,
            action_digest=action.digest,
            reasons=tuple(
                reason
                for reason in verdict.reasons
                if not reason.startswith("explicit approval required: no approval record")
            ),
            context=action.context,
            call_id=call_id,
            verdict=verdict,
        )

    @property
    def quorums(self) -> tuple[ApprovalQuorum, ...]:
        """Who must approve and how many: every quorum must be met by distinct approvers
        (the policy named none: one approval from anyone the PEP's verifier trusts)."""
        from jevqueue.policy._approval_quorum import effective_quorums

        return effective_quorums(self.verdict.quorums if self.verdict is not None else ())

    @property
    def provenance(self) -> Provenance | None:
        """Where each argument came from (``None`` when nothing the agent read is known)."""
        return self.action.provenance

    def describe(self) -> str:
        """The action as a person should read it before approving: canonical and complete."""
        reasons = "; ".join(self.reasons) or "the policy requires an explicit approval"
        from jevqueue.policy._approval_quorum import describe_quorums

        named = self.verdict.quorums if self.verdict is not None else ()
        needs = f"needs {describe_quorums(named)}\n" if named else ""
        document = self.action.digest_document()
        origins = self.provenance.describe() if self.provenance is not None else ""
        where = f"where the values came from:\n{origins}\n" if origins else ""
        return (
            f"Approval needed for {self.tool!r}: {reasons}\n"
            f"{needs}"
            f"{where}"
            f"action digest: {self.action_digest}\n"
            f"{json.dumps(document, indent=2, sort_keys=True, default=str)}"
        )

    def to_dict(self) -> dict[str, Any]:
        """The request as JSON-ready data (for a framework's pause, a log, or a web page).

        ``quorums`` lists who must approve and how many, each as
        :meth:`ApprovalQuorum.to_dict` (``{"count": 2, "group": "ops", "approvers":
        ["alice", "bob", "carol"]}``; ``group`` and ``approvers`` are ``null`` for anyone
        the verifier trusts); every one must be met.
        """
        return {
            "tool": self.tool,
            "arguments": dict(self.arguments),
            "action_digest": self.action_digest,
            "reasons": list(self.reasons),
            "context": self.context.as_dict(),
            "call_id": self.call_id,
            "quorums": [quorum.to_dict() for quorum in self.quorums],
            "provenance": [
                {**origin.to_dict(), "found": origin.found, "says": origin.describe()}
                for origin in self.provenance.origins
            ]
            if self.provenance is not None
            else None,
        }


@runtime_checkable
class Approver(Protocol):
    """Obtains approval records for one request, or declines.

    Return the record(s) issued for ``request.action_digest`` (or the dict ``jevqueue
    approve`` prints), or ``None`` to give none. Raise
    :class:`~jevqueue.errors.ApprovalDeclinedError` to decline with a reason the model
    reads. May be ``async``.
    """

    def __call__(self, request: ApprovalRequest) -> ApprovalAnswer | Awaitable[ApprovalAnswer]: ...


_SHORT = reprlib.Repr()
_SHORT.maxlevel, _SHORT.maxstring, _SHORT.maxother = 3, 60, 60


def _describe(answer: Any) -> str:
    """A short ``repr`` of an answer: bounded in depth and length, whatever it holds."""
    text = _SHORT.repr(answer)  # reprlib also stands in for a __repr__ that raises
    return text if len(text) <= 80 else text[:77] + "..."


_EXPECTED = (
    "expected ApprovalRecord(s) issued for the request's action_digest (or the dict "
    "`jevqueue approve` prints), or None to give none; raise ApprovalDeclinedError(reason) "
    "to decline"
)


def approval_records(answer: Any) -> tuple[ApprovalRecord, ...]:
    """The records an approver answered, checked: ``()`` for ``None``.

    A mapping is read with :meth:`ApprovalRecord.from_dict` (the PEP still verifies its
    signature, digest, freshness and single use).

    Raises:
        ApproverAnswerError: the answer is not records: a bool (a plain "yes" cannot be
            verified), a string, an awaitable where a synchronous answer is needed, or
            anything else. The message says what was returned and what was expected.
        InvalidApprovalError: a mapping is not a valid approval record.
    """
    from jevqueue.approvals import ApprovalRecord

    if answer is None:
        return ()
    if type(answer) is ApprovalRecord:
        return (answer,)
    if isinstance(answer, Mapping):
        return (_record(answer),)
    if inspect.isawaitable(answer):
        raise ApproverAnswerError(
            "the approver returned an awaitable where this framework runs the check "
            "synchronously: give a plain approver, or run the agent asynchronously"
        )
    if isinstance(answer, (bool, str, bytes)) or not isinstance(answer, Iterable):
        raise ApproverAnswerError(
            f"the approver returned {_describe(answer)} ({type(answer).__name__}); {_EXPECTED}"
        )
    records: list[ApprovalRecord] = []
    for item in answer:
        if type(item) is ApprovalRecord:
            records.append(item)
        elif isinstance(item, Mapping):
            records.append(_record(item))
        else:
            raise ApproverAnswerError(
                f"the approver returned a collection holding {_describe(item)} "
                f"({type(item).__name__}); {_EXPECTED}"
            )
    return tuple(records)


def _record(data: Mapping[str, Any]) -> ApprovalRecord:
    from jevqueue.approvals import ApprovalRecord

    try:
        return ApprovalRecord.from_dict(data)
    except InvalidApprovalError as error:
        raise InvalidApprovalError(
            f"the approver returned a dict that is not an approval record ({error})"
        ) from None


def check_approver(approver: Any, keyword: str = "approver") -> Approver | None:
    """``approver`` when it is ``None`` or callable; a :class:`ConfigurationError` otherwise."""
    if approver is not None and not callable(approver):
        raise ConfigurationError(
            f"{keyword}= must be a callable (ApprovalRequest) -> ApprovalRecord(s) | None, "
            f"plain or async, not {type(approver).__name__}"
        )
    checked: Approver | None = approver
    return checked


def deprecated_approver(approver: Any, owner: str, **old: Any) -> Approver | None:
    """The approver given as ``approver=``, or under an older keyword with a warning.

    ``old`` holds the older keywords a plugin accepted (``approvals=``, ``approval=``,
    ``approval_func=``); each still works for one release with a ``DeprecationWarning``.

    Raises:
        ConfigurationError: two keywords were given, or the approver is not callable.
    """
    given = {name: value for name, value in old.items() if value is not None}
    if given:
        name = next(iter(given))
        warnings.warn(
            f"{owner}({name}=...) is deprecated: pass the approver as approver=...",
            DeprecationWarning,
            stacklevel=3,
        )
        if approver is not None or len(given) > 1:
            raise ConfigurationError(
                f"{owner} was given an approver under more than one keyword "
                f"({', '.join(['approver', *given] if approver is not None else given)}): "
                "pass it once, as approver=..."
            )
        approver = given[name]
    checked: Approver | None = check_approver(approver)
    return checked
