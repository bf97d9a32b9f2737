"""Issuing and checking Ed25519-signed approval records."""

from __future__ import annotations

import base64
import binascii
import secrets
from collections.abc import Mapping
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING

import rfc8785
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from jevqueue.approvals._check import DEFAULT_FRESHNESS
from jevqueue.approvals._keys import coerce_private_key, coerce_public_key
from jevqueue.approvals._record import IDENTIFIER_PATTERN, ApprovalRecord
from jevqueue.errors import ConfigurationError

if TYPE_CHECKING:  # pragma: no cover
    from jevqueue.policy._action import Action

__all__ = ["ApprovalAuthority", "SignedApprovalVerifier", "signing_bytes"]


def signing_bytes(record: ApprovalRecord) -> bytes:
    """Return the exact bytes an approval signature covers: RFC 8785 JSON of the fields."""
    return bytes(rfc8785.dumps(ApprovalRecord.signing_payload(record)))


class ApprovalAuthority:
    """Issues approvals signed with an Ed25519 key, in the name of one approver.

    Args:
        private_key: an ``Ed25519PrivateKey``, PEM bytes, or 32 raw bytes (see
            :func:`~jevqueue.approvals.load_private_key` for key files).
        approver_id: who approves; verifiers must list this id with the public key.
        ttl: default lifetime of an issued approval; ``None`` leaves ``expires_at`` unset,
            so the verifier's freshness window alone bounds it.

    Raises:
        ConfigurationError: the key is not an Ed25519 private key or the id is malformed.
    """

    def __init__(
        self,
        private_key: Ed25519PrivateKey | bytes,
        approver_id: str,
        *,
        ttl: timedelta | None = DEFAULT_FRESHNESS,
    ) -> None:
        if not isinstance(approver_id, str) or not IDENTIFIER_PATTERN.fullmatch(approver_id):
            raise ConfigurationError(
                "approver_id must be 1-128 characters of letters, digits and '._:@+-'"
            )
        _check_ttl(ttl)
        self._key = coerce_private_key(private_key)
        self.approver_id = approver_id
        self.ttl = ttl

    @property
    def public_key(self) -> Ed25519PublicKey:
        """The public key verifiers need to trust this authority."""
        return self._key.public_key()

    def issue(
        self,
        action_digest: str,
        *,
        ttl: timedelta | None = None,
        now: datetime | None = None,
        approval_id: str | None = None,
    ) -> ApprovalRecord:
        """Sign an approval of exactly the action with ``action_digest``.

        Args:
            action_digest: ``sha256:<hex>``, from ``UnfulfilledObligationError.verdict``.
            ttl: lifetime of this approval; defaults to the authority's ``ttl``.
            now: issue time (aware); defaults to the system clock.
            approval_id: a unique id; defaults to a random 128-bit token.

        Raises:
            InvalidApprovalError: the digest or id is malformed.
        """
        issued_at = datetime.now(timezone.utc) if now is None else now
        lifetime = self.ttl if ttl is None else ttl
        _check_ttl(lifetime)
        unsigned = ApprovalRecord(
            approval_id=approval_id or f"apr-{secrets.token_hex(16)}",
            action_digest=action_digest,
            approver_id=self.approver_id,
            issued_at=issued_at,
            expires_at=None if lifetime is None else issued_at + lifetime,
        )
        signature = self._key.sign(signing_bytes(unsigned))
        return ApprovalRecord(
            approval_id=unsigned.approval_id,
            action_digest=unsigned.action_digest,
            approver_id=unsigned.approver_id,
            issued_at=unsigned.issued_at,
            expires_at=unsigned.expires_at,
            signature=base64.b64encode(signature).decode("ascii"),
        )


def _check_ttl(ttl: timedelta | None) -> None:
    if ttl is not None and (not isinstance(ttl, timedelta) or ttl <= timedelta(0)):
        raise ConfigurationError("ttl must be a positive timedelta or None")


class SignedApprovalVerifier:
    """Accepts a record only if a trusted approver's key signed exactly its fields.

    Args:
        trusted: approver id -> that approver's Ed25519 public key (a key object, PEM
            bytes or 32 raw bytes). Only these approvers are allowed; a record signed by
            a valid key under another approver's name is refused.

    Raises:
        ConfigurationError: the allowlist is empty or holds a key that is not Ed25519.
    """

    def __init__(self, trusted: Mapping[str, Ed25519PublicKey | bytes]) -> None:
        if not trusted:
            raise ConfigurationError(
                "SignedApprovalVerifier needs at least one trusted approver: "
                "pass {approver_id: public_key}"
            )
        self._trusted: dict[str, Ed25519PublicKey] = {
            approver: coerce_public_key(key, f"public key of approver {approver!r}")
            for approver, key in trusted.items()
        }

    @property
    def approvers(self) -> frozenset[str]:
        """The approver ids this verifier trusts."""
        return frozenset(self._trusted)

    def __call__(self, record: ApprovalRecord, action: Action) -> bool:
        """Return ``True`` if a trusted approver signed ``record`` for ``action``."""
        if type(record) is not ApprovalRecord or record.signature is None:
            return False
        if record.action_digest != getattr(action, "digest", None):
            return False
        key = self._trusted.get(record.approver_id)
        if key is None:
            return False
        try:
            signature = base64.b64decode(record.signature, validate=True)
            key.verify(signature, signing_bytes(record))
        except (InvalidSignature, binascii.Error, ValueError):
            return False
        return True
