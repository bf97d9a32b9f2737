"""Digest-bound, fresh, single-use approvals for the ``explicit_approval`` obligation.

The flow, from the caller's side:

1. ``pep.enforce(action)`` raises ``UnfulfilledObligationError``; read
   ``error.verdict.action_digest``.
2. A trusted authority issues an :class:`ApprovalRecord` for exactly that digest —
   :class:`ApprovalAuthority` signs one with Ed25519, ``jevqueue approve DIGEST`` does the
   same from a key file.
3. Retry with ``approval_records=[record]``. :func:`check_approvals` accepts the record
   only if it matches the digest, is fresh, passes the PEP's :class:`ApprovalVerifier`
   (:class:`SignedApprovalVerifier` checks the signature and the approver allowlist) and
   was never used before — remembered durably by :class:`SQLiteConsumedApprovals` (one
   host), or by :class:`PostgresConsumedApprovals` for a fleet (the ``postgres`` extra).

People approve through the **approval inbox**: :class:`InboxApprover` (pass it as
``approver=``) files each request in an :class:`ApprovalInbox` —
:class:`SQLiteApprovalInbox` in the state directory by default, :class:`PostgresApprovalInbox`
for a fleet — and waits; reviewers decide with ``jevqueue approvals``, signing with their
own key. A denial refuses the call with the reviewer's reason; nobody deciding in time
refuses it as expired (:class:`~jevqueue.errors.ApprovalExpiredError`). See
docs/approvals.md.

Names load on first use, so importing :class:`ApprovalRecord` pulls in neither SQLite nor
the crypto library.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jevqueue._lazy import lazy_getattr

if TYPE_CHECKING:  # pragma: no cover
    from jevqueue.approvals._authority import (
        ApprovalAuthority,
        SignedApprovalVerifier,
        signing_bytes,
    )
    from jevqueue.approvals._check import (
        CLOCK_SKEW,
        DEFAULT_FRESHNESS,
        EXPLICIT_APPROVAL,
        check_approvals,
    )
    from jevqueue.approvals._consumed import (
        ConsumedApprovalStore,
        MemoryConsumedApprovals,
        SQLiteConsumedApprovals,
        default_consumed_approvals_path,
    )
    from jevqueue.approvals._inbox import (
        ApprovalInbox,
        InboxListing,
        default_inbox_path,
        open_inbox,
    )
    from jevqueue.approvals._inbox_answer import inbox_answer
    from jevqueue.approvals._inbox_approver import InboxApprover
    from jevqueue.approvals._inbox_request import (
        DEFAULT_EXPIRY,
        InboxDecision,
        InboxRequest,
        InboxState,
        Requester,
    )
    from jevqueue.approvals._keys import (
        coerce_private_key,
        coerce_public_key,
        generate_key_pair,
        load_private_key,
        load_public_key,
    )
    from jevqueue.approvals._postgres_consumed import (
        MINIMUM_RETENTION,
        ConsumedApprovalsError,
        PostgresConsumedApprovals,
    )
    from jevqueue.approvals._postgres_inbox import PostgresApprovalInbox
    from jevqueue.approvals._record import ApprovalRecord
    from jevqueue.approvals._sqlite_inbox import SQLiteApprovalInbox
    from jevqueue.approvals._verifier import ApprovalVerifier
    from jevqueue.approvals._webhook import Webhook
    from jevqueue.errors import ApprovalExpiredError

_EXPORTS: dict[str, str] = {
    "ApprovalRecord": "jevqueue.approvals._record",
    "ApprovalVerifier": "jevqueue.approvals._verifier",
    "check_approvals": "jevqueue.approvals._check",
    "CLOCK_SKEW": "jevqueue.approvals._check",
    "DEFAULT_FRESHNESS": "jevqueue.approvals._check",
    "EXPLICIT_APPROVAL": "jevqueue.approvals._check",
    "ConsumedApprovalStore": "jevqueue.approvals._consumed",
    "MemoryConsumedApprovals": "jevqueue.approvals._consumed",
    "SQLiteConsumedApprovals": "jevqueue.approvals._consumed",
    "default_consumed_approvals_path": "jevqueue.approvals._consumed",
    "ConsumedApprovalsError": "jevqueue.approvals._postgres_consumed",
    "MINIMUM_RETENTION": "jevqueue.approvals._postgres_consumed",
    "PostgresConsumedApprovals": "jevqueue.approvals._postgres_consumed",
    "ApprovalAuthority": "jevqueue.approvals._authority",
    "SignedApprovalVerifier": "jevqueue.approvals._authority",
    "signing_bytes": "jevqueue.approvals._authority",
    "generate_key_pair": "jevqueue.approvals._keys",
    "load_private_key": "jevqueue.approvals._keys",
    "load_public_key": "jevqueue.approvals._keys",
    "coerce_private_key": "jevqueue.approvals._keys",
    "coerce_public_key": "jevqueue.approvals._keys",
    "ApprovalInbox": "jevqueue.approvals._inbox",
    "InboxListing": "jevqueue.approvals._inbox",
    "default_inbox_path": "jevqueue.approvals._inbox",
    "open_inbox": "jevqueue.approvals._inbox",
    "InboxApprover": "jevqueue.approvals._inbox_approver",
    "inbox_answer": "jevqueue.approvals._inbox_answer",
    "DEFAULT_EXPIRY": "jevqueue.approvals._inbox_request",
    "InboxDecision": "jevqueue.approvals._inbox_request",
    "InboxRequest": "jevqueue.approvals._inbox_request",
    "InboxState": "jevqueue.approvals._inbox_request",
    "Requester": "jevqueue.approvals._inbox_request",
    "SQLiteApprovalInbox": "jevqueue.approvals._sqlite_inbox",
    "PostgresApprovalInbox": "jevqueue.approvals._postgres_inbox",
    "ApprovalExpiredError": "jevqueue.errors",
    "Webhook": "jevqueue.approvals._webhook",
}

__all__ = [
    "CLOCK_SKEW",
    "DEFAULT_EXPIRY",
    "DEFAULT_FRESHNESS",
    "EXPLICIT_APPROVAL",
    "MINIMUM_RETENTION",
    "ApprovalAuthority",
    "ApprovalExpiredError",
    "ApprovalInbox",
    "ApprovalRecord",
    "ApprovalVerifier",
    "ConsumedApprovalStore",
    "ConsumedApprovalsError",
    "InboxApprover",
    "InboxDecision",
    "InboxListing",
    "InboxRequest",
    "InboxState",
    "MemoryConsumedApprovals",
    "PostgresApprovalInbox",
    "PostgresConsumedApprovals",
    "Requester",
    "SQLiteApprovalInbox",
    "SQLiteConsumedApprovals",
    "SignedApprovalVerifier",
    "Webhook",
    "check_approvals",
    "coerce_private_key",
    "coerce_public_key",
    "default_consumed_approvals_path",
    "default_inbox_path",
    "generate_key_pair",
    "inbox_answer",
    "load_private_key",
    "load_public_key",
    "open_inbox",
    "signing_bytes",
]


__getattr__ = lazy_getattr(__name__, _EXPORTS, globals())


def __dir__() -> list[str]:
    return __all__
