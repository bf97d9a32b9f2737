"""The approval record: one approver's yes to one exact action digest."""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from jevqueue.errors import InvalidApprovalError

__all__ = ["ApprovalRecord", "format_timestamp", "parse_timestamp"]

DIGEST_PATTERN = re.compile(r"sha256:[0-9a-f]{64}")
# Identifiers appear in refusal reasons and audit records, so they are restricted to a
# plain alphabet: nothing in them can smuggle markup, control characters or a secret blob.
IDENTIFIER_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@+\-]{0,127}")
SIGNATURE_DOMAIN = "jevqueue.approval.v1"
_FIELDS = ("approval_id", "action_digest", "approver_id", "issued_at", "expires_at", "signature")


def format_timestamp(moment: datetime) -> str:
    """Return ``moment`` as UTC ISO 8601 with microseconds and a ``Z`` suffix.

    The year always has four digits (``strftime("%Y")`` drops the leading zeros of years
    before 1000 on some platforms, and ``fromisoformat`` cannot read that back).
    """
    utc = moment.astimezone(timezone.utc).replace(tzinfo=None)
    return utc.isoformat(timespec="microseconds") + "Z"


def parse_timestamp(value: datetime | str, field: str) -> datetime:
    """Turn an ISO 8601 string or a datetime into a timezone-aware UTC datetime.

    Raises:
        InvalidApprovalError: the value is not a timestamp, carries no (valid)
            timezone, or lies outside the years 1 to 9999 in UTC.
    """
    if isinstance(value, str):
        text = value.strip()
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            raise InvalidApprovalError(
                f"approval field {field!r} is not an ISO 8601 timestamp: write it like "
                "'2026-01-31T12:00:00Z'"
            ) from None
    elif isinstance(value, datetime):
        moment = value
    else:
        raise InvalidApprovalError(
            f"approval field {field!r} must be a datetime or an ISO 8601 string, "
            f"not {type(value).__name__}"
        )
    try:
        offset = None if moment.tzinfo is None else moment.utcoffset()
    except (ValueError, TypeError):  # datetime refuses the offset the tzinfo gave
        raise InvalidApprovalError(
            f"approval field {field!r} has a timezone whose UTC offset is not valid (it "
            "must be less than a day): use datetime.timezone or a 'Z' suffix"
        ) from None
    if offset is None:
        raise InvalidApprovalError(
            f"approval field {field!r} has no timezone: a naive time is ambiguous across "
            "hosts; use an aware datetime (e.g. datetime.now(timezone.utc)) or a 'Z' suffix"
        )
    try:
        utc = datetime.astimezone(moment, timezone.utc)  # not a subclass's override
    except OverflowError:
        raise InvalidApprovalError(
            f"approval field {field!r} lies outside the years 1 to 9999 once converted to "
            "UTC: give a real issue or expiry time"
        ) from None
    if type(utc) is not datetime:  # a subclass (pendulum's, say): keep only its value
        utc = datetime(*utc.timetuple()[:6], utc.microsecond, tzinfo=timezone.utc)
    return utc


def _plain(value: str) -> str:
    """``value`` as an exact ``str``: a subclass (a ``StrEnum`` member, say) is copied.

    A subclass can redefine comparison and printing, and canonical JSON refuses it, so a
    record holding one could be built but never signed or verified.
    """
    return value if type(value) is str else str.__str__(value)


def _identifier(value: Any, field: str) -> str:
    if not isinstance(value, str) or not IDENTIFIER_PATTERN.fullmatch(value):
        raise InvalidApprovalError(
            f"approval field {field!r} must be 1-128 characters of letters, digits and "
            "'._:@+-', starting with a letter or digit"
        )
    return _plain(value)


@dataclass(frozen=True, init=False)
class ApprovalRecord:
    """One approver's consent to exactly one action, identified by its digest.

    The record is bound to ``action_digest`` (``sha256:<64 hex>``, as in
    ``UnfulfilledObligationError.verdict.action_digest``), is fresh only for a short window
    after ``issued_at`` (see :data:`jevqueue.approvals.DEFAULT_FRESHNESS`), optionally ends
    earlier at ``expires_at``, and fulfils an obligation at most once.

    Timestamps may be given as timezone-aware datetimes or ISO 8601 strings; they are
    stored as UTC datetimes. ``signature`` is the base64 Ed25519 signature an
    :class:`~jevqueue.approvals.ApprovalAuthority` puts over :meth:`signing_payload`.

    Raises:
        InvalidApprovalError: a field is missing, mistyped, naive, or malformed.
    """

    approval_id: str
    action_digest: str
    approver_id: str
    issued_at: datetime
    expires_at: datetime | None = None
    signature: str | None = None

    def __init__(
        self,
        approval_id: str,
        action_digest: str,
        approver_id: str,
        issued_at: datetime | str,
        expires_at: datetime | str | None = None,
        signature: str | None = None,
    ) -> None:
        approval_id = _identifier(approval_id, "approval_id")
        approver_id = _identifier(approver_id, "approver_id")
        if not isinstance(action_digest, str) or not DIGEST_PATTERN.fullmatch(action_digest):
            raise InvalidApprovalError(
                "approval field 'action_digest' must be 'sha256:' followed by 64 lowercase hex "
                "digits: copy it from UnfulfilledObligationError.verdict.action_digest"
            )
        action_digest = _plain(action_digest)
        issued = parse_timestamp(issued_at, "issued_at")
        expires = None if expires_at is None else parse_timestamp(expires_at, "expires_at")
        if expires is not None and expires <= issued:
            raise InvalidApprovalError("approval field 'expires_at' must be later than 'issued_at'")
        if signature is not None:
            if not isinstance(signature, str):
                raise InvalidApprovalError(
                    "approval field 'signature' must be a base64 string or None"
                )
            try:
                base64.b64decode(signature.encode("ascii"), validate=True)
            except (binascii.Error, UnicodeEncodeError):
                raise InvalidApprovalError(
                    "approval field 'signature' is not valid base64: pass the signature "
                    "exactly as the approval authority issued it"
                ) from None
            signature = _plain(signature)
        object.__setattr__(self, "approval_id", approval_id)
        object.__setattr__(self, "action_digest", action_digest)
        object.__setattr__(self, "approver_id", approver_id)
        object.__setattr__(self, "issued_at", issued)
        object.__setattr__(self, "expires_at", expires)
        object.__setattr__(self, "signature", signature)

    def signing_payload(self) -> dict[str, Any]:
        """Return the fields a signature covers, as a canonical-JSON-ready mapping.

        Every field except ``signature`` itself, plus a fixed domain tag so a signature
        made for an approval can never be replayed as a signature over anything else.
        """
        return {
            "domain": SIGNATURE_DOMAIN,
            "approval_id": self.approval_id,
            "action_digest": self.action_digest,
            "approver_id": self.approver_id,
            "issued_at": format_timestamp(self.issued_at),
            "expires_at": None if self.expires_at is None else format_timestamp(self.expires_at),
        }

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready mapping; :meth:`from_dict` reads it back unchanged."""
        return {
            "approval_id": self.approval_id,
            "action_digest": self.action_digest,
            "approver_id": self.approver_id,
            "issued_at": format_timestamp(self.issued_at),
            "expires_at": None if self.expires_at is None else format_timestamp(self.expires_at),
            "signature": self.signature,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ApprovalRecord:
        """Build a record from a mapping such as parsed JSON.

        Unknown keys are refused: a field this version does not understand could carry a
        condition the approver meant, and ignoring it would widen the approval.

        Raises:
            InvalidApprovalError: the mapping is not a valid approval record.
        """
        if not isinstance(data, Mapping):
            raise InvalidApprovalError(
                f"an approval record must be a JSON object, not {type(data).__name__}"
            )
        unknown = sorted(str(key) for key in data if key not in _FIELDS)
        if unknown:
            raise InvalidApprovalError(
                f"approval record has unknown fields {unknown}: expected only {list(_FIELDS)}"
            )
        missing = [name for name in _FIELDS[:4] if name not in data]
        if missing:
            raise InvalidApprovalError(f"approval record is missing fields {missing}")
        return cls(
            approval_id=data["approval_id"],
            action_digest=data["action_digest"],
            approver_id=data["approver_id"],
            issued_at=data["issued_at"],
            expires_at=data.get("expires_at"),
            signature=data.get("signature"),
        )
