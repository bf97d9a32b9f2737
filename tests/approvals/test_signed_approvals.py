"""Signed approvals: Ed25519 over RFC 8785, key files, and the approver allowlist."""

from __future__ import annotations

import base64
import dataclasses
import json
import stat
from datetime import datetime, timedelta
from pathlib import Path

import pytest
import rfc8785
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from jevqueue.approvals import (
    ApprovalAuthority,
    ApprovalRecord,
    ApprovalVerifier,
    SignedApprovalVerifier,
    generate_key_pair,
    load_private_key,
    load_public_key,
    signing_bytes,
)
from jevqueue.errors import ConfigurationError, InvalidApprovalError
from jevqueue.policy import Action


def test_the_signature_covers_the_rfc8785_form_of_every_field(
    authority: ApprovalAuthority, action: Action, now: datetime
) -> None:
    record = authority.issue(action.digest, now=now)
    payload = signing_bytes(record)
    assert payload == rfc8785.dumps(record.signing_payload())
    assert json.loads(payload) == {
        "domain": "jevqueue.approval.v1",
        "approval_id": record.approval_id,
        "action_digest": action.digest,
        "approver_id": "alice@example.com",
        "issued_at": "2026-01-31T12:00:00.000000Z",
        "expires_at": "2026-01-31T12:05:00.000000Z",
    }
    assert record.signature is not None
    authority.public_key.verify(base64.b64decode(record.signature), payload)


def test_issued_records_are_unique_and_survive_json(
    authority: ApprovalAuthority,
    verifier: SignedApprovalVerifier,
    action: Action,
    now: datetime,
) -> None:
    first, second = authority.issue(action.digest, now=now), authority.issue(action.digest, now=now)
    assert first.approval_id != second.approval_id
    carried = ApprovalRecord.from_dict(json.loads(json.dumps(first.to_dict())))
    assert verifier(carried, action) is True


def test_the_verifier_is_an_approval_verifier(verifier: SignedApprovalVerifier) -> None:
    assert isinstance(verifier, ApprovalVerifier)
    assert verifier.approvers == frozenset({"alice@example.com"})


def test_the_verifier_checks_the_action_too(
    authority: ApprovalAuthority, verifier: SignedApprovalVerifier, now: datetime
) -> None:
    class Elsewhere:
        digest = "sha256:" + "00" * 32

    record = authority.issue("sha256:" + "11" * 32, now=now)
    assert verifier(record, Elsewhere()) is False  # type: ignore[arg-type]


def test_a_key_listed_under_another_name_does_not_vouch(
    authority: ApprovalAuthority, action: Action, now: datetime
) -> None:
    verifier = SignedApprovalVerifier({"bob": authority.public_key})
    assert verifier(authority.issue(action.digest, now=now), action) is False


def test_a_ttl_sets_expiry(authority: ApprovalAuthority, action: Action, now: datetime) -> None:
    record = authority.issue(action.digest, now=now, ttl=timedelta(seconds=30))
    assert record.expires_at == now + timedelta(seconds=30)
    with pytest.raises(ConfigurationError, match="ttl"):
        authority.issue(action.digest, ttl=timedelta(0))


def test_an_authority_refuses_a_bad_digest(authority: ApprovalAuthority) -> None:
    with pytest.raises(InvalidApprovalError, match="action_digest"):
        authority.issue("not-a-digest")


def test_verifier_configuration_errors() -> None:
    with pytest.raises(ConfigurationError, match="at least one"):
        SignedApprovalVerifier({})
    with pytest.raises(ConfigurationError, match="not an Ed25519"):
        SignedApprovalVerifier({"alice": _ec_public_pem()})
    with pytest.raises(ConfigurationError, match="private key"):
        SignedApprovalVerifier({"alice": _ed25519_private_pem()})
    with pytest.raises(ConfigurationError, match="Ed25519PublicKey"):
        SignedApprovalVerifier({"alice": "a string"})  # type: ignore[dict-item]


def test_key_pair_files_round_trip(tmp_path: Path, action: Action, now: datetime) -> None:
    private_path, public_path = generate_key_pair(tmp_path / "keys" / "alice.pem")
    assert public_path == tmp_path / "keys" / "alice.pem.pub"
    assert stat.S_IMODE(private_path.stat().st_mode) == 0o600
    authority = ApprovalAuthority(load_private_key(private_path), "alice")
    verifier = SignedApprovalVerifier({"alice": load_public_key(public_path)})
    assert verifier(authority.issue(action.digest, now=now), action)
    with pytest.raises(ConfigurationError, match="already exists"):
        generate_key_pair(private_path)


def test_raw_32_byte_keys_work(tmp_path: Path, action: Action, now: datetime) -> None:
    key = Ed25519PrivateKey.generate()
    raw_private = key.private_bytes(
        serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()
    )
    raw_public = key.public_key().public_bytes(
        serialization.Encoding.Raw, serialization.PublicFormat.Raw
    )
    (tmp_path / "k.raw").write_bytes(raw_private)
    (tmp_path / "k.pub.raw").write_bytes(raw_public)
    authority = ApprovalAuthority(load_private_key(tmp_path / "k.raw"), "alice")
    assert SignedApprovalVerifier({"alice": raw_public})(
        authority.issue(action.digest, now=now), action
    )
    assert load_public_key(tmp_path / "k.pub.raw").public_bytes_raw() == raw_public


def test_bad_key_files_say_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"does not exist.*keygen"):
        load_private_key(tmp_path / "missing.pem")
    (tmp_path / "ec.pem").write_bytes(_ec_private_pem())
    with pytest.raises(ConfigurationError, match="not an Ed25519 key"):
        load_private_key(tmp_path / "ec.pem")
    (tmp_path / "junk.pem").write_text("hello")
    with pytest.raises(ConfigurationError, match="neither a PEM private key"):
        load_private_key(tmp_path / "junk.pem")
    _, public = generate_key_pair(tmp_path / "a.pem")
    with pytest.raises(ConfigurationError, match="holds a public key"):
        load_private_key(public)
    encrypted = Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"pw"),
    )
    (tmp_path / "enc.pem").write_bytes(encrypted)
    with pytest.raises(ConfigurationError, match="encrypted"):
        load_private_key(tmp_path / "enc.pem")


def test_authority_configuration_errors() -> None:
    with pytest.raises(ConfigurationError, match="approver_id"):
        ApprovalAuthority(Ed25519PrivateKey.generate(), "not an id")
    with pytest.raises(ConfigurationError, match="not an Ed25519"):
        ApprovalAuthority(_ec_private_pem(), "alice")


def test_a_signature_cannot_be_moved_to_another_record(
    authority: ApprovalAuthority, verifier: SignedApprovalVerifier, action: Action, now: datetime
) -> None:
    genuine = authority.issue(action.digest, now=now)
    twin = authority.issue(action.digest, now=now)
    moved = dataclasses.replace(twin, signature=genuine.signature)
    assert verifier(moved, action) is False


def _ec_private_pem() -> bytes:
    return ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _ec_public_pem() -> bytes:
    return (
        ec.generate_private_key(ec.SECP256R1())
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )


def _ed25519_private_pem() -> bytes:
    return Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
