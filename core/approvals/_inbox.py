"""The approval inbox: a durable store of approval requests that people decide.

An agent's :class:`~jevqueue.approvals.InboxApprover` files each request the policy
raises and waits; reviewers read them (``jevqueue approvals list`` / ``show``) and decide:
an approval is a signed :class:`~jevqueue.approvals.ApprovalRecord` for exactly the
request's digest, a denial a reason. The store enforces the rules of
:mod:`jevqueue.approvals._inbox_rules` atomically across processes; the PEP still checks
every record it is given (signature, digest, freshness, single use), so the inbox is a
place to meet, not an authority.

Two stores ship: :class:`~jevqueue.approvals.SQLiteApprovalInbox` (one host; the
default, in the state directory) and :class:`~jevqueue.approvals.PostgresApprovalInbox`
(a fleet; schema version 5 of ``jevqueue db migrate``).

Writing another store: subclass :class:`ApprovalInbox` and implement ``_insert``,
``_select``, ``_decide``, ``_cancel`` and ``_prune`` (and ``_purge`` to let reviewers remove
a damaged request). The public methods check their input and call them; ``_decide`` must
apply :func:`~jevqueue.approvals._inbox_rules.refusal_code` and
:func:`~jevqueue.approvals._inbox_rules.next_state` while no other writer can change the
request. ``_select`` answers each damaged row as its
:class:`~jevqueue.errors.InboxCorruptionError` (build each entry with
:func:`~jevqueue.approvals._inbox_request.stored_or_damaged`), so that one damaged request
never hides the others: :meth:`ApprovalInbox.get` raises that error for it,
:meth:`ApprovalInbox.requests` leaves it out and logs it, :meth:`ApprovalInbox.listing`
returns it beside the readable ones.
"""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jevqueue.approvals._consumed import STATE_DIR_VARIABLE
from jevqueue.approvals._inbox_request import (
    DEFAULT_EXPIRY,
    MAX_QUORUMS,
    REQUEST_ID_PATTERN,
    InboxDecision,
    InboxRequest,
    InboxState,
    Requester,
    check_text,
    stored_quorums,
)
from jevqueue.approvals._inbox_rules import refusal
from jevqueue.approvals._record import IDENTIFIER_PATTERN, ApprovalRecord
from jevqueue.errors import (
    ConfigurationError,
    InboxCorruptionError,
    InboxError,
    UnknownRequestError,
)

if TYPE_CHECKING:  # pragma: no cover
    from jevqueue.policy._approval_request import ApprovalRequest

__all__ = [
    "INBOX_VARIABLE",
    "MINIMUM_RETENTION",
    "ApprovalInbox",
    "InboxListing",
    "configured_inbox",
    "default_inbox_path",
    "is_fleet_inbox",
    "open_inbox",
]

_PREFIX = re.compile(r"[0-9a-f]{4,32}")
_REASON_LIMIT = 2000
_log = logging.getLogger("jevqueue.approvals")

MINIMUM_RETENTION = timedelta(hours=1)
"""The shortest age at which :meth:`ApprovalInbox.prune` removes a settled request: an
agent may still be reading a request that was approved a moment ago."""


@dataclass(frozen=True)
class InboxListing:
    """What one read of the inbox found (:meth:`ApprovalInbox.listing`).

    Attributes:
        requests: The readable requests, newest first.
        damaged: One :class:`~jevqueue.errors.InboxCorruptionError` per damaged request
            among those read (its ``request_id`` names it; its message says what is
            wrong and how to remove it). A damaged request is never read as a decision.
    """

    requests: tuple[InboxRequest, ...]
    damaged: tuple[InboxCorruptionError, ...] = ()


class ApprovalInbox(ABC):
    """The durable store of approval requests; see the module docstring for the rules.

    Implement ``_insert``, ``_select``, ``_decide``, ``_cancel`` and ``_prune``; ``_purge``
    is optional. Every public method raises :class:`~jevqueue.errors.InboxError` when the
    store cannot be read or written, and :class:`~jevqueue.errors.InboxCorruptionError`
    when the one request it works on is damaged; a listing leaves damaged requests out
    and names them (:meth:`requests`, :meth:`listing`).
    """

    where: str = "(unnamed)"
    """Where the store lives, for messages (a path, or a URL without its password)."""

    # --- filing (agents) ------------------------------------------------------------------

    def file(
        self,
        request: ApprovalRequest,
        *,
        requester: Requester | None = None,
        expires_in: timedelta = DEFAULT_EXPIRY,
        request_id: str | None = None,
    ) -> InboxRequest:
        """File ``request``; return it as stored (``pending``, with its new id).

        Who must approve, and how many, is the request's own: the quorums of the policy's
        verdict (:attr:`ApprovalRequest.quorums`), never the filer's choice.

        Args:
            request: What the guard asks approval for.
            requester: Who asks (default: the context's actor and task, this host and
                process).
            expires_in: How long reviewers have; a pending request reads as ``expired``
                after it.
            request_id: The id to file it under (32 lowercase hex digits, from
                ``secrets.token_hex(16)``); default a new random one. A caller that
                chooses the id knows it before the store is asked, so it can withdraw
                (:meth:`cancel`) the request when filing is interrupted, whether or not
                the store had stored it.

        Raises:
            ConfigurationError: an impossible ``expires_in``, a malformed ``request_id``,
                a request that is not JSON, one that names more than 16 quorums, or a
                requester whose text holds control characters.
            InboxError: the store could not file it (an id already filed among them).
        """
        from jevqueue.policy._approval_request import ApprovalRequest

        if not isinstance(request, ApprovalRequest):
            raise ConfigurationError(
                f"file() takes the ApprovalRequest the guard built, not {type(request).__name__}"
            )
        check_expiry(expires_in)
        if request_id is None:
            request_id = secrets.token_hex(16)
        elif type(request_id) is not str or not REQUEST_ID_PATTERN.fullmatch(request_id):
            raise ConfigurationError(
                f"request_id={request_id!r} is not a request id: give 32 lowercase hex "
                "digits from secrets.token_hex(16), or leave it out for a new one"
            )
        who = requester if requester is not None else Requester.of(request)
        if not isinstance(who, Requester):
            raise ConfigurationError("requester= must be a jevqueue.approvals.Requester")
        if who.actor_id != request.context.actor_id:
            raise ConfigurationError(
                f"the requester's actor {who.actor_id!r} is not the actor of the request's "
                f"context ({request.context.actor_id!r}): the actor that asks is the one that "
                "may not approve, so they must be the same"
            )
        # what the reviewer is shown, and beside it everything its digest covers (resolved
        # targets, side effects, cwd), so that a reader recomputes the digest it would sign
        shown = {**request.to_dict(), "digest_document": request.action.digest_document()}
        try:
            document = json.loads(json.dumps(shown, allow_nan=False))
        except (TypeError, ValueError) as error:
            raise ConfigurationError(
                f"the approval request for {request.tool!r} cannot be stored as JSON ({error})"
            ) from None
        if stored_quorums(document.get("quorums")) is None:
            raise ConfigurationError(
                f"the approval request for {request.tool!r} names {len(request.quorums)} "
                f"approval quorums; an inbox holds 1 to {MAX_QUORUMS}: merge the rules that "
                "ask for approvers"
            )
        return self._insert(request_id, document, who, expires_in)

    def cancel(self, request_id: str) -> InboxRequest:
        """Withdraw a pending request (the agent stopped waiting); return it as it is now.

        A request that is no longer pending is left as it is.

        Raises:
            UnknownRequestError: no request has that id.
        """
        return self._cancel(_exact(request_id))

    # --- reading (everyone) -------------------------------------------------------------------

    def get(self, request_id: str) -> InboxRequest:
        """The request with exactly ``request_id``.

        Raises:
            UnknownRequestError: no request has that id.
            InboxCorruptionError: the request is damaged; it is never read as a decision.
        """
        found = self._select(prefix=_exact(request_id), states=None, limit=1)
        if not found:
            raise refusal("unknown", request_id)
        return _readable(found[0])

    def find(self, id_or_prefix: str) -> InboxRequest:
        """The one request whose id starts with ``id_or_prefix`` (at least 4 hex digits).

        Raises:
            UnknownRequestError: no request matches, or several do.
            InboxCorruptionError: the one request that matches is damaged.
        """
        prefix = id_or_prefix.strip().lower() if isinstance(id_or_prefix, str) else ""
        if not _PREFIX.fullmatch(prefix):
            raise UnknownRequestError(
                f"{id_or_prefix!r} is not a request id: give the id `jevqueue approvals list` "
                "shows, or at least its first 4 hex digits"
            )
        found = self._select(prefix=prefix, states=None, limit=2)
        if not found:
            raise refusal("unknown", prefix)
        if len(found) > 1:
            raise UnknownRequestError(
                f"{prefix} is the start of several request ids ({found[0].request_id}, "
                f"{found[1].request_id}, ...): give more of the id"
            )
        return _readable(found[0])

    def requests(
        self, states: Iterable[InboxState | str] | None = (InboxState.PENDING,), *, limit: int = 200
    ) -> list[InboxRequest]:
        """Requests in ``states`` (``None``: every state), newest first, at most ``limit``.

        A damaged request among them is left out, never read as a decision, and logged
        once per inbox object as a warning on the ``jevqueue.approvals`` logger, naming
        it and how to remove it; :meth:`listing` returns them instead.
        """
        found = self.listing(states, limit=limit)
        warned = self.__dict__.setdefault("_warned_damaged", set())
        for damaged in found.damaged:
            if damaged.request_id not in warned:
                warned.add(damaged.request_id)
                _log.warning("%s (it is left out of the list of requests)", damaged)
        return list(found.requests)

    def listing(
        self, states: Iterable[InboxState | str] | None = (InboxState.PENDING,), *, limit: int = 200
    ) -> InboxListing:
        """What :meth:`requests` reads, with the damaged requests among them named.

        At most ``limit`` requests are read, damaged ones included, newest first. A
        damaged request is listed under the states its stored row claims (a row whose
        state is unreadable shows only when every state is asked for).

        Raises:
            ConfigurationError: a state that is none of :class:`InboxState`, or a
                ``limit`` that is not a positive integer.
        """
        wanted = None if states is None else frozenset(_state(state) for state in states)
        if type(limit) is not int or limit < 1:
            raise ConfigurationError("limit must be a positive integer")
        readable: list[InboxRequest] = []
        damaged: list[InboxCorruptionError] = []
        for entry in self._select(prefix="", states=wanted, limit=limit):
            if isinstance(entry, InboxCorruptionError):
                damaged.append(entry)
            elif wanted is None or entry.state in wanted:
                readable.append(entry)
        return InboxListing(tuple(readable), tuple(damaged))

    # --- deciding (reviewers) -----------------------------------------------------------------

    def approve(self, request_id: str, record: ApprovalRecord, *, reason: str = "") -> InboxRequest:
        """Record ``record``'s approver's approval; return the request as it is now.

        ``record`` must be signed for exactly the request's digest; its ``approver_id`` is
        the reviewer, who must be in a group the request's quorums name (any reviewer
        when a quorum names none). The request becomes ``approved`` once approvals by
        distinct reviewers meet every quorum.

        Raises:
            UnknownRequestError: no request has that id.
            DecisionRefusedError: a rule refused it (see the module docstring): closed or
                expired, the requester itself (``SelfApprovalError``), a reviewer in no
                group the quorums name (``NotAnApproverError``), a second decision,
                another digest.
            InboxCorruptionError: the request's digest is not the digest of what it stores
                and shows (recomputed on every read), so nobody approves it.
        """
        if type(record) is not ApprovalRecord or record.signature is None:
            raise ConfigurationError(
                "approve() takes the signed ApprovalRecord of the reviewer's key: sign one "
                "with ApprovalAuthority(key, reviewer).issue(request.action_digest)"
            )
        decision = InboxDecision(
            record.approver_id, True, _reason(reason, required=False), _now(), record
        )
        exact = _exact(request_id)
        self.get(exact)  # every read recomputes the digest from what the request shows
        return self._decide(exact, decision)

    def deny(self, request_id: str, reviewer: str, reason: str) -> InboxRequest:
        """Record ``reviewer``'s denial; the request becomes ``denied``.

        Raises:
            ConfigurationError: no reason, a reason with control characters, or a
                malformed reviewer id.
            UnknownRequestError: no request has that id.
            DecisionRefusedError: the request is closed or expired, or the reviewer
                already decided it.
        """
        decision = InboxDecision(_reviewer(reviewer), False, _reason(reason, True), _now())
        return self._decide(_exact(request_id), decision)

    # --- keeping the inbox small (operators) ---------------------------------------------------

    def prune(self, older_than: timedelta) -> int:
        """Delete the requests no longer pending — approved, denied, cancelled or expired —
        filed more than ``older_than`` ago, with their decisions; return how many.

        A request holds the judged arguments of a call, which may be secret: prune on a
        schedule (``jevqueue approvals prune --older-than 30d``). A pending request is
        never deleted, however old.

        Raises:
            ConfigurationError: ``older_than`` is not a timedelta of at least
                :data:`MINIMUM_RETENTION` (an hour): an agent may still be reading a
                request that was just approved.
            InboxError: the store could not be written.
        """
        if not isinstance(older_than, timedelta) or older_than < MINIMUM_RETENTION:
            raise ConfigurationError(
                f"prune(older_than={older_than!r}): keep settled requests at least "
                f"{MINIMUM_RETENTION} (an agent may still be reading one just approved); "
                "give a longer timedelta, such as timedelta(days=30)"
            )
        return self._prune(older_than)

    def purge(self, request_id: str) -> None:
        """Delete the damaged request ``request_id`` and its decisions.

        Only a damaged request (one that reads as
        :class:`~jevqueue.errors.InboxCorruptionError`) is removed: a readable one is
        denied, withdrawn or left to expire instead, and :meth:`prune` removes it once
        it is old.

        Raises:
            UnknownRequestError: no request has that id.
            ConfigurationError: the request is not damaged; nothing was removed.
            InboxError: the store cannot remove requests, or could not be written.
        """
        exact = _exact(request_id)
        readable = self._purge(exact)
        if readable is not None:
            raise ConfigurationError(
                f"approval request {exact} is not damaged (it reads as "
                f"{readable.state.value}), so it was not removed: deny it or let it "
                "expire; `jevqueue approvals prune` removes settled requests once they are old"
            )

    def close(self) -> None:  # noqa: B027 - a store without resources has nothing to close
        """Release connections; the store must not be used afterwards."""

    def __enter__(self) -> ApprovalInbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- what a store implements -----------------------------------------------------------

    @abstractmethod
    def _insert(
        self,
        request_id: str,
        document: dict[str, Any],
        requester: Requester,
        expires_in: timedelta,
    ) -> InboxRequest:
        """Store a new pending request, timestamped by the store's clock; return it."""

    @abstractmethod
    def _select(
        self, *, prefix: str, states: frozenset[InboxState] | None, limit: int
    ) -> Sequence[InboxRequest | InboxCorruptionError]:
        """Requests whose id starts with ``prefix``, whose state as read is in ``states``
        (``None``: any), newest first, at most ``limit``, each read at one moment.

        A damaged row is answered in its place as the
        :class:`~jevqueue.errors.InboxCorruptionError` that describes it, not raised
        (:func:`~jevqueue.approvals._inbox_request.stored_or_damaged` builds either), and
        counts toward ``limit``; ``states`` is matched against its stored state."""

    @abstractmethod
    def _decide(self, request_id: str, decision: InboxDecision) -> InboxRequest:
        """Atomically check the rules and record ``decision``; raise :func:`refusal`'s
        error for a broken rule (recording nothing)."""

    @abstractmethod
    def _cancel(self, request_id: str) -> InboxRequest:
        """Atomically move a pending, unexpired request to ``cancelled``."""

    @abstractmethod
    def _prune(self, older_than: timedelta) -> int:
        """Delete the requests that are not pending (approved, denied, cancelled, or
        pending past ``expires_at``) and were filed more than ``older_than`` ago (the
        store's clock), with their decisions; return how many requests. ``older_than``
        is already checked."""

    def _purge(self, request_id: str) -> InboxRequest | None:
        """Atomically delete the request and its decisions if it is damaged (answer
        ``None``); answer the request, deleting nothing, if it reads correctly; raise
        :func:`refusal`'s ``unknown`` error if there is none.

        The default refuses: a store whose damaged requests only its owner may delete
        says how."""
        raise InboxError(
            f"the approval inbox {self.where} cannot remove request {request_id} itself: "
            "delete its row and its decisions as the store's owner, or let "
            "`jevqueue approvals prune` remove it once it is no longer pending"
        )


def check_expiry(expires_in: Any) -> None:
    """Raise unless ``expires_in`` is a positive timedelta of at most a week."""
    if not isinstance(expires_in, timedelta) or not (
        timedelta(0) < expires_in <= timedelta(days=7)
    ):
        raise ConfigurationError(
            f"expires_in={expires_in!r}: give a timedelta from a fraction of a second to 7 "
            "days (how long reviewers have before the request expires)"
        )


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _readable(entry: InboxRequest | InboxCorruptionError) -> InboxRequest:
    if isinstance(entry, InboxCorruptionError):
        raise entry
    return entry


def _state(state: Any) -> InboxState:
    try:
        return InboxState(state)
    except ValueError:
        raise ConfigurationError(
            f"{state!r} is not a request state: give one of "
            f"{', '.join(each.value for each in InboxState)}"
        ) from None


def _exact(request_id: Any) -> str:
    if type(request_id) is not str or not REQUEST_ID_PATTERN.fullmatch(request_id):
        raise UnknownRequestError(
            f"{request_id!r} is not a request id (32 hex digits): copy it from "
            "`jevqueue approvals list`, or look a prefix up with find()"
        )
    return request_id


def _reviewer(reviewer: Any) -> str:
    if type(reviewer) is not str or not IDENTIFIER_PATTERN.fullmatch(reviewer):
        raise ConfigurationError(
            f"reviewer {reviewer!r} is not an id: 1-128 characters of letters, digits and "
            "'._:@+-', the name verifiers know the reviewer's key by"
        )
    return reviewer


def _reason(reason: Any, required: bool) -> str:
    if not isinstance(reason, str):
        raise ConfigurationError("a decision's reason must be text")
    text = " ".join(reason.split())
    if required and not text:
        raise ConfigurationError("a denial needs a reason: the agent and its user read it")
    if len(text) > _REASON_LIMIT:
        raise ConfigurationError(f"a reason is at most {_REASON_LIMIT} characters")
    # line breaks and tabs were folded into spaces above; any other control is refused
    return check_text(text, "the reason")


def default_inbox_path() -> Path:
    """Where the default SQLite inbox lives, beside the consumed-approval store.

    ``$JEVQUEUE_STATE_DIR/approval-inbox.sqlite3`` when that variable is set, else
    ``$XDG_STATE_HOME/jevqueue/...`` or ``~/.local/state/jevqueue/...``.
    """
    base = os.environ.get(STATE_DIR_VARIABLE)
    if base:
        return Path(base) / "approval-inbox.sqlite3"
    state_home = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state_home) / "jevqueue" / "approval-inbox.sqlite3"


_POSTGRES_SCHEMES = ("postgresql://", "postgres://")


INBOX_VARIABLE = "JEVQUEUE_INBOX"
"""The environment variable naming the inbox: a SQLite path or a ``postgresql://`` URL."""


def configured_inbox() -> tuple[str | Path, str]:
    """The inbox this environment names, and where that came from (for messages).

    In order: ``$JEVQUEUE_INBOX`` (a SQLite path or a ``postgresql://`` URL); else the
    fleet's database, ``$JEVQUEUE_DATABASE_URL`` (a libpq connection string, as
    ``jevqueue db`` reads it); else :func:`default_inbox_path`. Agents
    (:class:`~jevqueue.approvals.InboxApprover`), ``jevqueue approvals`` and
    ``jevqueue serve`` all follow it, so that reviewers read where agents file.
    """
    from jevqueue.db._connection import DATABASE_URL_VARIABLE

    named = os.environ.get(INBOX_VARIABLE, "").strip()
    if named:
        return named, f"${INBOX_VARIABLE}"
    fleet = os.environ.get(DATABASE_URL_VARIABLE, "").strip()
    if fleet:
        return fleet, f"${DATABASE_URL_VARIABLE}"
    return default_inbox_path(), "the default"


def is_fleet_inbox(target: str | os.PathLike[str]) -> bool:
    """Whether ``target`` names a PostgreSQL inbox (a URL, or a libpq ``key=value`` string)."""
    return isinstance(target, str) and (
        target.startswith(_POSTGRES_SCHEMES) or _LIBPQ_KEYWORDS.match(target) is not None
    )


_LIBPQ_KEYWORDS = re.compile(r"\s*(host|hostaddr|dbname|user|port|service)\s*=")


def open_inbox(
    target: ApprovalInbox | str | os.PathLike[str] | None = None, *, schema: str = "jevqueue"
) -> ApprovalInbox:
    """The inbox at ``target``: an inbox as it is, a ``postgresql://`` URL (or libpq
    connection string), a SQLite path, or ``None`` for :func:`configured_inbox`.

    Raises:
        ConfigurationError: the store cannot be opened.
        ImportError: a PostgreSQL store without the ``postgres`` extra.
    """
    if isinstance(target, ApprovalInbox):
        return target
    if target is None:
        target = configured_inbox()[0]
    if isinstance(target, str) and is_fleet_inbox(target):
        from jevqueue.approvals._postgres_inbox import PostgresApprovalInbox

        return PostgresApprovalInbox(target, schema=schema)
    from jevqueue.approvals._sqlite_inbox import SQLiteApprovalInbox

    if not isinstance(target, (str, os.PathLike)):
        raise ConfigurationError(
            f"an approval inbox is a path, a postgresql:// URL or an ApprovalInbox, not "
            f"{type(target).__name__}"
        )
    return SQLiteApprovalInbox(target)
