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
    from jevqueue.approvals._record import ApprovalRecord
    from jevqueue.approvals._verifier import ApprovalVerifier

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
}

__all__ = [
    "CLOCK_SKEW",
    "DEFAULT_FRESHNESS",
    "EXPLICIT_APPROVAL",
    "MINIMUM_RETENTION",
    "ApprovalAuthority",
    "ApprovalRecord",
    "ApprovalVerifier",
    "ConsumedApprovalStore",
    "ConsumedApprovalsError",
    "MemoryConsumedApprovals",
    "PostgresConsumedApprovals",
    "SQLiteConsumedApprovals",
    "SignedApprovalVerifier",
    "check_approvals",
    "coerce_private_key",
    "coerce_public_key",
    "default_consumed_approvals_path",
    "generate_key_pair",
    "load_private_key",
    "load_public_key",
    "signing_bytes",
]


__getattr__ = lazy_getattr(__name__, _EXPORTS, globals())


def __dir__() -> list[str]:
    return __all__
