"""ApprovalRecord: validated at construction, JSON round-trip, tz-aware times only."""

from __future__ import annotations

import dataclasses
import json
from datetime import datetime, timedelta, timezone, tzinfo

import jevqueue
import jevqueue.approvals as approvals
import pytest
from jevqueue.approvals import ApprovalRecord
from jevqueue.errors import InvalidApprovalError, UsageError

DIGEST = "sha256:" + "ab" * 32
ISSUED = datetime(2026, 1, 31, 12, 0, tzinfo=timezone.utc)


def record(**overrides: object) -> ApprovalRecord:
    fields: dict[str, object] = {
        "approval_id": "apr-1",
        "action_digest": DIGEST,
        "approver_id": "alice",
        "issued_at": ISSUED,
    }
    fields.update(overrides)
    return ApprovalRecord(**fields)  # type: ignore[arg-type]


def test_top_level_name_is_the_same_class() -> None:
    assert jevqueue.ApprovalRecord is ApprovalRecord


def test_public_surface_is_pinned() -> None:
    assert set(approvals.__all__) == {
        "CLOCK_SKEW",
        "DEFAULT_EXPIRY",
        "DEFAULT_FRESHNESS",
        "EXPLICIT_APPROVAL",
        "MINIMUM_RETENTION",
        "ApprovalAuthority",
        "ApprovalExpiredError",
        "ApprovalInbox",
        "InboxApprover",
        "inbox_answer",
        "Webhook",
        "InboxDecision",
        "InboxListing",
        "InboxRequest",
        "InboxState",
        "PostgresApprovalInbox",
        "Requester",
        "SQLiteApprovalInbox",
        "default_inbox_path",
        "open_inbox",
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
    }
    for name in approvals.__all__:
        assert getattr(approvals, name) is not None


def test_the_contract_spelling_works_with_iso_strings() -> None:
    made = ApprovalRecord("apr-1", DIGEST, "alice", "2026-01-31T13:00:00+01:00")
    assert made.issued_at == ISSUED
    assert made.issued_at.tzinfo is not None
    assert made.expires_at is None and made.signature is None


def test_round_trips_through_json() -> None:
    original = record(expires_at=ISSUED + timedelta(minutes=5), signature="c2lnbmF0dXJl")
    again = ApprovalRecord.from_dict(json.loads(json.dumps(original.to_dict())))
    assert again == original
    assert again.to_dict() == original.to_dict()


def test_round_trips_with_a_year_before_1000() -> None:
    early = record(issued_at=datetime(999, 1, 31, 12, 0, tzinfo=timezone.utc))
    assert early.to_dict()["issued_at"] == "0999-01-31T12:00:00.000000Z"
    assert ApprovalRecord.from_dict(early.to_dict()) == early


@pytest.mark.parametrize(
    "value",
    [
        "0001-01-01T00:00:00+01:00",
        "9999-12-31T23:59:59-01:00",
        datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=5))),
    ],
)
def test_a_time_beyond_the_calendar_in_utc_is_refused(value: object) -> None:
    with pytest.raises(InvalidApprovalError, match="outside the years 1 to 9999"):
        record(issued_at=value)


class _BrokenZone(tzinfo):
    def utcoffset(self, moment: datetime | None) -> timedelta:
        return timedelta(hours=30)  # datetime refuses offsets of a day or more


def test_a_timezone_with_an_impossible_offset_is_refused() -> None:
    with pytest.raises(InvalidApprovalError, match="UTC offset is not valid"):
        record(issued_at=datetime(2026, 1, 31, tzinfo=_BrokenZone()))


class _Name(str):
    """A str subclass, as a StrEnum member is one."""


class _Moment(datetime):
    """A datetime subclass, as pendulum's is one."""


def test_subclassed_values_are_stored_as_plain_values_that_sign_and_round_trip() -> None:
    from jevqueue.policy import canonical_json

    made = record(
        approval_id=_Name("apr-1"),
        approver_id=_Name("alice"),
        action_digest=_Name(DIGEST),
        signature=_Name("c2lnbmF0dXJl"),
        issued_at=_Moment(2026, 1, 31, 12, 0, tzinfo=timezone.utc),
    )
    for name in ("approval_id", "approver_id", "action_digest", "signature"):
        assert type(getattr(made, name)) is str, name
    assert type(made.issued_at) is datetime
    canonical_json(made.signing_payload())
    assert ApprovalRecord.from_dict(made.to_dict()) == made


def test_is_frozen() -> None:
    made = record()
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.action_digest = "sha256:" + "0" * 64  # type: ignore[misc]


@pytest.mark.parametrize(
    "digest",
    [
        "ab" * 32,
        "sha256:" + "AB" * 32,
        "sha256:" + "ab" * 31,
        "sha1:" + "ab" * 20,
        "sha256:" + "ab" * 32 + " ",
        "explicit_approval",
        "",
        None,
    ],
)
def test_malformed_digests_are_refused(digest: object) -> None:
    with pytest.raises(InvalidApprovalError, match="action_digest"):
        record(action_digest=digest)


def test_naive_timestamps_are_refused_with_advice() -> None:
    with pytest.raises(InvalidApprovalError, match="no timezone"):
        record(issued_at=datetime(2026, 1, 31, 12, 0))
    with pytest.raises(InvalidApprovalError, match="no timezone"):
        record(issued_at="2026-01-31T12:00:00")
    with pytest.raises(InvalidApprovalError, match="expires_at"):
        record(expires_at=datetime(2026, 1, 31, 13, 0))


@pytest.mark.parametrize("value", ["yesterday", "", 1706702400, None])
def test_non_timestamps_are_refused(value: object) -> None:
    with pytest.raises(InvalidApprovalError, match="issued_at"):
        record(issued_at=value)


def test_expiry_must_follow_issue() -> None:
    with pytest.raises(InvalidApprovalError, match="later than"):
        record(expires_at=ISSUED)


@pytest.mark.parametrize(
    "field, value",
    [
        ("approval_id", ""),
        ("approval_id", "has space"),
        ("approval_id", "line\nbreak"),
        ("approval_id", "x" * 200),
        ("approver_id", ""),
        ("approver_id", "<script>"),
        ("approver_id", 7),
    ],
)
def test_identifiers_are_plain(field: str, value: object) -> None:
    with pytest.raises(InvalidApprovalError, match=field):
        record(**{field: value})


def test_signature_must_be_base64() -> None:
    with pytest.raises(InvalidApprovalError, match="base64"):
        record(signature="not base64!")


def test_from_dict_refuses_unknown_and_missing_fields() -> None:
    data = record().to_dict()
    with pytest.raises(InvalidApprovalError, match="unknown fields"):
        ApprovalRecord.from_dict({**data, "scope": "everything"})
    del data["approver_id"]
    with pytest.raises(InvalidApprovalError, match="missing"):
        ApprovalRecord.from_dict(data)
    with pytest.raises(InvalidApprovalError, match="JSON object"):
        ApprovalRecord.from_dict("explicit_approval")  # type: ignore[arg-type]


def test_errors_are_usage_errors() -> None:
    assert issubclass(InvalidApprovalError, UsageError)
