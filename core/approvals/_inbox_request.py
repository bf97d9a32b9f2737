"""A request filed in the approval inbox: what was asked, by whom, until when, and who decided.

An :class:`InboxRequest` is what a store reads back; it is never built from user input
without its checks. Its :attr:`~InboxRequest.state` is computed when it is read: a request
still ``pending`` at its ``expires_at`` reads as ``expired``, whoever looks, so expiry
needs no writer.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import Enum
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from jevqueue.approvals._record import (
    DIGEST_PATTERN,
    IDENTIFIER_PATTERN,
    ApprovalRecord,
    format_timestamp,
    parse_timestamp,
)
from jevqueue.errors import (
    ConfigurationError,
    InboxCorruptionError,
    InvalidApprovalError,
    NonCanonicalArgumentsError,
)
from jevqueue.policy._approval_quorum import ApprovalQuorum, describe_quorums, quorums_met
from jevqueue.policy._canonical import canonical_json

if TYPE_CHECKING:  # pragma: no cover
    from jevqueue.policy._approval_request import ApprovalRequest

__all__ = [
    "CONTROL_CHARACTERS",
    "DEFAULT_EXPIRY",
    "REQUEST_ID_PATTERN",
    "WAIT_MARGIN",
    "InboxDecision",
    "InboxRequest",
    "InboxState",
    "Requester",
    "check_text",
    "stored_or_damaged",
    "stored_request",
]

WAIT_MARGIN = timedelta(minutes=1)
"""What an inbox wait leaves of an approval's freshness: for a reviewer's clock that runs
behind (the PEP allows ``CLOCK_SKEW``), the agent's next look at the inbox, and the
approved call's way to the PEP."""

DEFAULT_EXPIRY = timedelta(minutes=4)
"""How long a filed request waits for its reviewers before it reads as expired: the PEP's
default approval freshness (``DEFAULT_FRESHNESS``, 5 min) less :data:`WAIT_MARGIN`, so an
approval given at the start of the wait is still fresh when the request settles."""

REQUEST_ID_PATTERN = re.compile(r"[0-9a-f]{32}")
"""A request id: 128 random bits as lowercase hex, unguessable."""

CONTROL_CHARACTERS = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
"""What no text a requester or a reviewer gives may hold: the C0 and C1 controls (escape
sequences, line breaks, DEL) and the bidirectional embeddings, overrides and isolates,
which can rewrite what a reviewer's terminal or page shows around them."""


def check_text(value: str, name: str) -> str:
    """``value``, unless it holds a :data:`CONTROL_CHARACTERS` character.

    Raises:
        ConfigurationError: it does; the message names the field and the character.
    """
    found = CONTROL_CHARACTERS.search(value)
    if found is not None:
        raise ConfigurationError(
            f"{name} holds the control character U+{ord(found.group()):04X} at position "
            f"{found.start()}: control characters and bidirectional overrides can rewrite "
            "what a reviewer sees, so they are refused; give plain text"
        )
    return value


class InboxState(str, Enum):
    """Where a request stands. Only ``pending`` can still change."""

    PENDING = "pending"
    APPROVED = "approved"
    DENIED = "denied"
    EXPIRED = "expired"
    CANCELLED = "cancelled"

    @property
    def final(self) -> bool:
        """True for every state but ``pending``."""
        return self is not InboxState.PENDING


STORED_STATES = frozenset({"pending", "approved", "denied", "cancelled"})
"""The states a store writes; ``expired`` is never written, it is read from the clock."""


def state_at(stored: str, expires_at: datetime, now: datetime) -> InboxState:
    """The state a request stored as ``stored`` has at ``now``."""
    if stored == InboxState.PENDING.value and now >= expires_at:
        return InboxState.EXPIRED
    return InboxState(stored)


def _optional_text(value: Any, name: str) -> str | None:
    if value is None:
        return None
    if type(value) is not str or not value or len(value) > 256:
        raise ConfigurationError(
            f"the requester's {name} must be a non-empty string of at most 256 characters, "
            f"not {value!r}"
        )
    return check_text(value, f"the requester's {name}")


@dataclass(frozen=True)
class Requester:
    """Who asked: the context's actor, and where the request came from.

    Every text field is refused (:class:`~jevqueue.errors.ConfigurationError`, also a
    ``ValueError``) when it holds a control character or a bidirectional override
    (:data:`CONTROL_CHARACTERS`): reviewers read these fields.

    Attributes:
        actor_id: The execution context's actor; it may never approve its own request.
        task_id: The execution context's task.
        framework: The agent framework (``"langgraph"``, ...), when the approver was told.
        session_id: The framework's conversation or run id, when the approver was told.
        call_id: The framework's id of the tool call.
        host: The machine the agent runs on.
        process_id: The agent's process id.
    """

    actor_id: str
    task_id: str | None = None
    framework: str | None = None
    session_id: str | None = None
    call_id: str | None = None
    host: str | None = None
    process_id: int | None = None

    def __post_init__(self) -> None:
        if type(self.actor_id) is not str or not self.actor_id.strip():
            raise ConfigurationError("a requester needs the actor_id of the context that asked")
        check_text(self.actor_id, "the requester's actor_id")
        for name in ("task_id", "framework", "session_id", "call_id", "host"):
            _optional_text(getattr(self, name), name)
        if self.process_id is not None and (
            type(self.process_id) is not int or self.process_id < 0
        ):
            raise ConfigurationError("the requester's process_id must be a non-negative integer")

    @classmethod
    def of(
        cls,
        request: ApprovalRequest,
        *,
        framework: str | None = None,
        session_id: str | None = None,
    ) -> Requester:
        """The requester of ``request``, asked from this process on this host."""
        return cls(
            actor_id=request.context.actor_id,
            task_id=request.context.task_id,
            framework=framework,
            session_id=session_id,
            call_id=request.call_id,
            host=socket.gethostname() or None,
            process_id=os.getpid(),
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields; :meth:`from_dict` reads them back."""
        return {
            "actor_id": self.actor_id,
            "task_id": self.task_id,
            "framework": self.framework,
            "session_id": self.session_id,
            "call_id": self.call_id,
            "host": self.host,
            "process_id": self.process_id,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Requester:
        """Read :meth:`to_dict`'s form; unknown, missing or malformed fields raise
        ``ValueError`` (a :class:`~jevqueue.errors.ConfigurationError`)."""
        if not isinstance(data, Mapping):
            raise ConfigurationError("the requester is not a JSON object")
        known = set(cls.__dataclass_fields__)
        unknown = sorted(str(key) for key in data if key not in known)
        if unknown:
            raise ConfigurationError(f"the requester has unknown fields {unknown}")
        return cls(**{name: data[name] for name in known if name in data})

    def describe(self) -> str:
        """One line for a table: the actor, then where it asked from."""
        where = [
            f"{label} {value}"
            for label, value in (
                ("task", self.task_id),
                ("via", self.framework),
                ("session", self.session_id),
                ("on", self.host),
            )
            if value
        ]
        return self.actor_id + (f" ({', '.join(where)})" if where else "")


@dataclass(frozen=True)
class InboxDecision:
    """One reviewer's decision on one request.

    Attributes:
        reviewer: Who decided; for an approval, the signing record's ``approver_id``.
        approve: True to approve, False to deny.
        reason: Why (required to deny; optional to approve).
        decided_at: When the store recorded it.
        record: For an approval, the signed record for exactly the request's digest.
    """

    reviewer: str
    approve: bool
    reason: str
    decided_at: datetime
    record: ApprovalRecord | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields; the record in :meth:`ApprovalRecord.to_dict` form."""
        return {
            "reviewer": self.reviewer,
            "approve": self.approve,
            "reason": self.reason,
            "decided_at": format_timestamp(self.decided_at),
            "record": None if self.record is None else self.record.to_dict(),
        }


@dataclass(frozen=True)
class InboxRequest:
    """A request as the inbox holds it, read at one moment.

    Attributes:
        request_id: The unguessable id (32 hex digits).
        tool: The tool called.
        action_digest: What an approval must name: exactly the request's digest.
        request: The :meth:`ApprovalRequest.to_dict` form: tool, judged arguments, digest,
            reasons, context, call id, quorums, provenance (read-only).
        requester: Who asked.
        quorums: Who must approve and how many, as the policy said when the request was
            filed (the request's ``quorums``): approvals by distinct reviewers must meet
            every one.
        created_at: When it was filed.
        expires_at: When it expires if nobody decided.
        state: Its state when read (``expired`` once pending past ``expires_at``).
        decisions: The decisions so far, oldest first.
        decided_at: When it reached ``approved``, ``denied`` or ``cancelled``.
    """

    request_id: str
    tool: str
    action_digest: str
    request: Mapping[str, Any]
    requester: Requester
    quorums: tuple[ApprovalQuorum, ...]
    created_at: datetime
    expires_at: datetime
    state: InboxState
    decisions: tuple[InboxDecision, ...] = ()
    decided_at: datetime | None = None
    read_at: datetime | None = field(default=None, compare=False)

    @property
    def required(self) -> int:
        """The fewest distinct approvals that can settle it (the largest quorum's count);
        :attr:`quorums` says from whom."""
        return max(quorum.count for quorum in self.quorums)

    def needs(self) -> str:
        """Who must approve, as a reviewer reads it: ``2 approvals from ops (alice, bob,
        carol)``."""
        return describe_quorums(self.quorums)

    def may_approve(self, reviewer: str) -> bool:
        """Whether an approval by ``reviewer`` can count: in a group a quorum names (or a
        quorum admits anyone) and not the requester's actor."""
        return reviewer != self.requester.actor_id and any(
            quorum.admits(reviewer) for quorum in self.quorums
        )

    @property
    def approvals(self) -> tuple[InboxDecision, ...]:
        """The approving decisions, oldest first."""
        return tuple(decision for decision in self.decisions if decision.approve)

    @property
    def denial(self) -> InboxDecision | None:
        """The decision that denied the request, if one did."""
        return next((decision for decision in self.decisions if not decision.approve), None)

    @property
    def records(self) -> tuple[ApprovalRecord, ...]:
        """The signed records of the approvals (the PEP still verifies each one)."""
        return tuple(d.record for d in self.approvals if d.record is not None)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields, for ``jevqueue approvals show --json`` and web pages."""
        return {
            "request_id": self.request_id,
            "tool": self.tool,
            "action_digest": self.action_digest,
            "state": self.state.value,
            "required": self.required,
            "quorums": [quorum.to_dict() for quorum in self.quorums],
            "created_at": format_timestamp(self.created_at),
            "expires_at": format_timestamp(self.expires_at),
            "decided_at": None if self.decided_at is None else format_timestamp(self.decided_at),
            "requester": self.requester.to_dict(),
            "request": json.loads(json.dumps(dict(self.request))),
            "decisions": [decision.to_dict() for decision in self.decisions],
        }


# --- reading what a store holds -------------------------------------------------------------


def stored_request(
    where: str,
    row: Mapping[str, Any],
    decisions: Sequence[Mapping[str, Any]],
    now: datetime,
) -> InboxRequest:
    """Check one stored request and its decisions and build the :class:`InboxRequest`.

    ``row`` holds the columns both stores share (``request_id``, ``action_digest``,
    ``tool``, ``request``, ``requester``, ``created_at``, ``expires_at``,
    ``state``, ``decided_at``); JSON columns may be text or already decoded; timestamps
    text or datetimes.

    Raises:
        InboxCorruptionError: anything stored is not what a store writes.
    """
    request_id = row.get("request_id")
    shown = request_id if isinstance(request_id, str) else ""

    def damaged(what: str) -> InboxCorruptionError:
        remedy = (
            f"remove it with `jevqueue approvals purge {shown}`"
            if REQUEST_ID_PATTERN.fullmatch(shown)
            else "`jevqueue approvals prune` removes it once it is no longer pending"
        )
        return InboxCorruptionError(
            f"the approval inbox {where} holds a damaged request {shown or '(no id)'}: {what}; "
            f"it is not read as a decision: {remedy}, and have the agent ask again",
            request_id=shown,
        )

    try:
        if type(request_id) is not str or not REQUEST_ID_PATTERN.fullmatch(request_id):
            raise damaged("its id is not 32 hex digits")
        document = _json_object(row.get("request"), "the request")
        digest, tool = row.get("action_digest"), row.get("tool")
        if type(digest) is not str or not DIGEST_PATTERN.fullmatch(digest):
            raise damaged("its action digest is not sha256:<64 hex>")
        if document.get("action_digest") != digest or document.get("tool") != tool:
            raise damaged("its tool or digest differ from the request it stores")
        if type(tool) is not str or not tool:
            raise damaged("it names no tool")
        if not isinstance(document.get("arguments"), Mapping):
            raise damaged("its request holds no arguments")
        _check_covered(document, digest, damaged)
        requester = Requester.from_dict(_json_object(row.get("requester"), "the requester"))
        quorums = stored_quorums(document.get("quorums"))
        if quorums is None:
            raise damaged("it does not say who must approve (its quorums)")
        created_at = parse_timestamp(row.get("created_at"), "created_at")  # type: ignore[arg-type]
        expires_at = parse_timestamp(row.get("expires_at"), "expires_at")  # type: ignore[arg-type]
        if expires_at <= created_at:
            raise damaged("it expires before it was filed")
        stored = row.get("state")
        if stored not in STORED_STATES:
            raise damaged(f"its state {stored!r} is none of {sorted(STORED_STATES)}")
        decided_raw = row.get("decided_at")
        decided_at = None if decided_raw is None else parse_timestamp(decided_raw, "decided_at")
        read = tuple(_decision(each, digest, damaged) for each in decisions)
        if len({decision.reviewer for decision in read}) != len(read):
            raise damaged("a reviewer decided it twice")
        _check_state(stored, read, quorums, damaged)
    except InboxCorruptionError:
        raise
    except (ValueError, TypeError, InvalidApprovalError) as error:
        raise damaged(str(error)) from None
    return InboxRequest(
        request_id=request_id,
        tool=tool,
        action_digest=digest,
        request=MappingProxyType(document),
        requester=requester,
        quorums=quorums,
        created_at=created_at,
        expires_at=expires_at,
        state=state_at(stored, expires_at, now),
        decisions=read,
        decided_at=decided_at,
        read_at=now,
    )


def stored_or_damaged(
    where: str,
    row: Mapping[str, Any],
    decisions: Sequence[Mapping[str, Any]],
    now: datetime,
) -> InboxRequest | InboxCorruptionError:
    """:func:`stored_request`, with a damaged request returned as its error, not raised:
    what a store's ``_select`` answers for each row, so that one damaged request never
    hides the others from a listing."""
    try:
        return stored_request(where, row, decisions, now)
    except InboxCorruptionError as damaged:
        return damaged


def _check_covered(document: Mapping[str, Any], digest: str, damaged: Any) -> None:
    """The digest must be the digest of the stored ``digest_document``, and what a reviewer
    is shown (tool, arguments, context) must be what that document holds."""
    covered = document.get("digest_document")
    if not isinstance(covered, Mapping):
        raise damaged("it does not store what its digest covers")
    try:
        recomputed = "sha256:" + hashlib.sha256(canonical_json(dict(covered))).hexdigest()
        if recomputed != digest:
            raise damaged(f"what its digest covers hashes to another digest, {recomputed}")
        for key in ("tool", "arguments", "context"):
            if canonical_json(covered.get(key)) != canonical_json(document.get(key)):
                raise damaged(f"its {key} differ from what its digest covers")
    except NonCanonicalArgumentsError as error:
        raise damaged(f"what its digest covers is not canonical JSON ({error})") from None


def _json_object(value: Any, what: str) -> dict[str, Any]:
    if isinstance(value, (str, bytes)):
        try:
            value = json.loads(value)
        except ValueError:
            raise ValueError(f"{what} is not JSON") from None
    if not isinstance(value, dict):
        raise ValueError(f"{what} is not a JSON object")
    return value


def _decision(row: Mapping[str, Any], digest: str, damaged: Any) -> InboxDecision:
    reviewer, approve, reason = row.get("reviewer"), row.get("approve"), row.get("reason")
    if type(reviewer) is not str or not IDENTIFIER_PATTERN.fullmatch(reviewer):
        raise damaged("a decision names no valid reviewer")
    if type(approve) is int and approve in (0, 1):  # SQLite has no boolean
        approve = bool(approve)
    if type(approve) is not bool or type(reason) is not str:
        raise damaged(f"the decision of {reviewer} is neither an approval nor a denial")
    decided_at = parse_timestamp(row.get("decided_at"), "decided_at")  # type: ignore[arg-type]
    raw_record = row.get("record")
    record = None
    if approve:
        if raw_record is None:
            raise damaged(f"the approval of {reviewer} carries no signed record")
        record = ApprovalRecord.from_dict(_json_object(raw_record, "an approval record"))
        if record.action_digest != digest:
            raise damaged(f"the approval of {reviewer} names another action")
        if record.approver_id != reviewer:
            raise damaged(f"the approval of {reviewer} is signed as {record.approver_id}")
    elif raw_record is not None:
        raise damaged(f"the denial of {reviewer} carries an approval record")
    elif not reason.strip():
        raise damaged(f"the denial of {reviewer} gives no reason")
    return InboxDecision(reviewer, approve, reason, decided_at, record)


def _check_state(
    stored: str,
    decisions: tuple[InboxDecision, ...],
    quorums: tuple[ApprovalQuorum, ...],
    damaged: Any,
) -> None:
    """The stored state must be the one the decisions lead to."""
    denied = any(not decision.approve for decision in decisions)
    approvers = [decision.reviewer for decision in decisions if decision.approve]
    met = quorums_met(quorums, approvers)
    if stored == "denied" and not denied:
        raise damaged("it is marked denied but nobody denied it")
    if stored == "approved" and (denied or not met):
        raise damaged(
            f"it is marked approved although its {len(approvers)} approval(s) do not meet "
            f"{describe_quorums(quorums)}"
        )
    if stored == "pending" and (denied or met):
        raise damaged("it is marked pending although its decisions settled it")


MAX_QUORUMS = 16
"""The most quorums one request may name."""


def stored_quorums(value: Any) -> tuple[ApprovalQuorum, ...] | None:
    """The quorums a stored request names, or ``None`` when they are not a non-empty list
    of at most :data:`MAX_QUORUMS` valid :meth:`ApprovalQuorum.to_dict` objects."""
    if not isinstance(value, list) or not 1 <= len(value) <= MAX_QUORUMS:
        return None
    try:
        quorums = tuple(ApprovalQuorum.from_dict(each) for each in value)
    except ConfigurationError:
        return None
    return quorums
