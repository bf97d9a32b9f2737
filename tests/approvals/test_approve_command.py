"""`jevqueue approve`: a key pair, a signed record for a digest, clear failures."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from jevqueue.approvals import (
    ApprovalRecord,
    MemoryConsumedApprovals,
    SignedApprovalVerifier,
    check_approvals,
    load_public_key,
)
from jevqueue.cli import main
from jevqueue.policy import Action, Verdict


def _keygen(runner: CliRunner, path: Path) -> None:
    result = runner.invoke(main, ["approve", "keygen", str(path)])
    assert result.exit_code == 0, result.output
    assert "public key" in result.output


def test_issue_then_fulfil(tmp_path: Path, action: Action, verdict: Verdict) -> None:
    runner = CliRunner()
    key = tmp_path / "alice.pem"
    _keygen(runner, key)
    result = runner.invoke(
        main, ["approve", action.digest, "--key", str(key), "--approver", "alice", "--ttl", "60"]
    )
    assert result.exit_code == 0, result.output
    record = ApprovalRecord.from_dict(json.loads(result.output))
    assert record.action_digest == action.digest
    assert record.expires_at is not None
    assert (record.expires_at - record.issued_at).total_seconds() == 60
    verifier = SignedApprovalVerifier({"alice": load_public_key(f"{key}.pub")})
    outcome = check_approvals(
        verdict, action, [record], verifier=verifier, consumed=MemoryConsumedApprovals()
    )
    assert outcome.allowed


def test_the_explicit_issue_subcommand_is_the_same(tmp_path: Path) -> None:
    runner = CliRunner()
    _keygen(runner, tmp_path / "k.pem")
    digest = "sha256:" + "ab" * 32
    result = runner.invoke(
        main, ["approve", "issue", digest, "--key", str(tmp_path / "k.pem"), "--approver", "a"]
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["action_digest"] == digest


def test_keygen_refuses_to_overwrite(tmp_path: Path) -> None:
    runner = CliRunner()
    _keygen(runner, tmp_path / "k.pem")
    again = runner.invoke(main, ["approve", "keygen", str(tmp_path / "k.pem")])
    assert again.exit_code == 1
    assert "already exists" in again.output
    assert (
        runner.invoke(main, ["approve", "keygen", str(tmp_path / "k.pem"), "--force"]).exit_code
        == 0
    )


def test_bad_inputs_fail_with_advice(tmp_path: Path) -> None:
    runner = CliRunner()
    key = tmp_path / "k.pem"
    _keygen(runner, key)
    digest = "sha256:" + "ab" * 32
    cases = [
        (["approve", "sha256:abc", "--key", str(key), "--approver", "a"], "64 lowercase hex"),
        (["approve", digest, "--key", str(tmp_path / "none.pem"), "--approver", "a"], "keygen"),
        (["approve", digest, "--key", f"{key}.pub", "--approver", "a"], "holds a public key"),
        (["approve", digest, "--key", str(key), "--approver", "two words"], "approver_id"),
    ]
    for arguments, advice in cases:
        result = runner.invoke(main, arguments)
        assert result.exit_code != 0, arguments
        assert advice in result.output, result.output
    missing = runner.invoke(main, ["approve", digest, "--key", str(key)])
    assert missing.exit_code == 2
    assert "--approver" in missing.output
    zero_ttl = runner.invoke(
        main, ["approve", digest, "--key", str(key), "--approver", "a", "--ttl", "0"]
    )
    assert zero_ttl.exit_code == 2


def test_help_lists_both_commands() -> None:
    result = CliRunner().invoke(main, ["approve", "--help"])
    assert result.exit_code == 0
    assert "issue" in result.output and "keygen" in result.output
