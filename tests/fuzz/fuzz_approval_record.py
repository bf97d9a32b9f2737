"""Approval records as objects, dicts and JSON files: a record or an InvalidApprovalError.

The first byte picks the route: the constructor with any field values, ``from_dict`` with
any mapping, a JSON file's bytes read as ``jevqueue approve`` output is read, or the answer
an approver returns (``approval_records``). A record that is built must survive
``to_dict`` / ``from_dict`` unchanged, be signable (its signing payload is canonical JSON)
and be judged by the verifier and by ``check_approvals`` without raising.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from typing import Any

import atheris
from fuzz_main import fuzz_main, instrumented
from fuzzed_values import fuzzed_text, fuzzed_value

with instrumented():
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from jevqueue.approvals._authority import (
        ApprovalAuthority,
        SignedApprovalVerifier,
        signing_bytes,
    )
    from jevqueue.approvals._check import check_approvals
    from jevqueue.approvals._consumed import MemoryConsumedApprovals
    from jevqueue.approvals._record import ApprovalRecord
    from jevqueue.errors import InvalidApprovalError, JevError
    from jevqueue.policy._action import Action
    from jevqueue.policy._approval_request import approval_records
    from jevqueue.policy._canonical import canonical_json
    from jevqueue.policy._registry import antigravity_registry
    from jevqueue.policy._verdict import Verdict

_ACTION = Action.build(
    antigravity_registry(),
    "run_command",
    {"CommandLine": "make test", "Cwd": "/nonexistent/jevqueue-fuzz/ws"},
    {
        "task_id": "task-1",
        "actor_id": "agent",
        "workspace": "/nonexistent/jevqueue-fuzz/ws",
        "git_sha": "0123456789abcdef",
    },
)
_AUTHORITY = ApprovalAuthority(Ed25519PrivateKey.generate(), "alice@example.com")
_VERIFIER = SignedApprovalVerifier({"alice@example.com": _AUTHORITY.public_key})
_ISSUED = _AUTHORITY.issue(_ACTION.digest).to_dict()
_NEEDS_APPROVAL = Verdict.allow_with_obligations(
    ("explicit_approval",), "needs approval", rule_ids=("r",)
)
# Reported, not fixed here (approval_records is outside the record): an answer holding a
# value nested thousands deep makes its refusal message call repr(), which raises
# RecursionError out of _describe.
_FIELDS = ["approval_id", "action_digest", "approver_id", "issued_at", "expires_at", "signature"]
_TIMESTAMPS = [
    "2026-01-31T12:00:00Z",
    "2026-01-31T12:00:00.123456+05:30",
    "0001-01-01T00:00:00+01:00",
    "0001-01-01T00:00:00Z",
    "9999-12-31T23:59:59-01:00",
    "9999-12-31T23:59:59.999999Z",
    "2026-01-31",
    "2026-01-31T12:00:00",
    " 2026-01-31T12:00:00z ",
    "2026-W05-6T12:00Z",
]


def _timestamp(fdp: atheris.FuzzedDataProvider) -> Any:
    choice = fdp.ConsumeIntInRange(0, 5)
    if choice == 0:
        return fuzzed_value(fdp)
    if choice == 1:
        offset = timedelta(minutes=fdp.ConsumeIntInRange(-1439, 1439))
        return datetime(
            fdp.ConsumeIntInRange(1, 9999),
            fdp.ConsumeIntInRange(1, 12),
            fdp.ConsumeIntInRange(1, 28),
            fdp.ConsumeIntInRange(0, 23),
            microsecond=fdp.ConsumeIntInRange(0, 999999),
            tzinfo=None if fdp.ConsumeIntInRange(0, 7) == 0 else timezone(offset),
        )
    if choice == 2:
        return datetime.now(timezone.utc) + timedelta(seconds=fdp.ConsumeIntInRange(-900, 900))
    if choice == 3:
        return fuzzed_text(fdp, 40)
    text = fdp.PickValueInList(_TIMESTAMPS)
    if choice == 4 and text:
        position = fdp.ConsumeIntInRange(0, len(text) - 1)
        text = text[:position] + fuzzed_text(fdp, 3) + text[position + 1 :]
    return text


def _field(fdp: atheris.FuzzedDataProvider, name: str) -> Any:
    if name in ("issued_at", "expires_at"):
        return _timestamp(fdp)
    if fdp.ConsumeIntInRange(0, 3) == 0:
        return fuzzed_value(fdp)
    if fdp.ConsumeBool():
        return _ISSUED[name]
    return fuzzed_text(fdp, 140)


def _mapping(fdp: atheris.FuzzedDataProvider) -> dict[Any, Any]:
    mapping: dict[Any, Any] = {}
    for name in _FIELDS:
        if fdp.ConsumeIntInRange(0, 7):
            mapping[name] = _field(fdp, name)
    if fdp.ConsumeIntInRange(0, 7) == 0:
        key = fdp.PickValueInList([1, None, 2.5, ("approval_id",)])
        mapping[key if fdp.ConsumeBool() else fuzzed_text(fdp, 8)] = 1
    return mapping


def _checked(record: ApprovalRecord) -> None:
    again = ApprovalRecord.from_dict(record.to_dict())
    assert again == record, (record, again)
    json.dumps(record.to_dict())
    canonical_json(record.signing_payload())
    signing_bytes(record)
    assert _VERIFIER(record, _ACTION) in (True, False)


def test_one_input(data: bytes) -> None:
    if not data:
        return
    route, fdp = data[0] % 4, atheris.FuzzedDataProvider(data[1:])
    offered: Any
    try:
        if route == 0:
            fields = {name: _field(fdp, name) for name in _FIELDS}
            offered = ApprovalRecord(**fields)
        elif route == 1:
            offered = ApprovalRecord.from_dict(_mapping(fdp))
        elif route == 2:
            try:
                parsed = json.loads(data[1:])
            except (ValueError, RecursionError):
                return  # not JSON: the reader's json.loads refused it, not jevqueue
            offered = ApprovalRecord.from_dict(parsed)
        else:
            answer = (
                [_mapping(fdp) for _ in range(fdp.ConsumeIntInRange(0, 2))]
                if fdp.ConsumeBool()
                else fuzzed_value(fdp)
            )
            offered = approval_records(answer)
    except InvalidApprovalError:
        return
    except JevError:
        if route != 3:  # records promise InvalidApprovalError; an approver's answer any
            raise
        return
    records = offered if isinstance(offered, tuple) else (offered,)
    for record in records:
        _checked(record)
    verdict = check_approvals(
        _NEEDS_APPROVAL,
        _ACTION,
        list(records) + ([fuzzed_value(fdp)] if fdp.ConsumeBool() else []),
        verifier=_VERIFIER,
        consumed=MemoryConsumedApprovals(),
    )
    assert isinstance(verdict, Verdict)


if __name__ == "__main__":
    fuzz_main(test_one_input)
