"""Policy files on top of the default policy: precedence, revision, and the whole PEP path."""

from __future__ import annotations

from pathlib import Path

import pytest
from jevqueue.adapters import AntigravityAdapter
from jevqueue.errors import ConfigurationError, PolicyDeniedError, PolicyFileError
from jevqueue.policy import (
    Action,
    PolicyEnforcementPoint,
    VerdictKind,
    antigravity_registry,
    create_default_policy_decision_point,
)
from jevqueue.testing.recording_audit import RecordingAuditSink

WS = "/workspace/project"
CONTEXT = {
    "task_id": "task-42",
    "actor_id": "coding-agent",
    "workspace": WS,
    "git_sha": "0123456789abcdef0123456789abcdef01234567",
    "environment": "prod",
}


def policy(tmp_path: Path, text: str, name: str = "policy.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def action(tool: str, arguments: dict[str, object], **context: str) -> Action:
    return Action.build(antigravity_registry(), tool, arguments, {**CONTEXT, **context})


REQUIRE_DOCS = """
[[rule]]
id = "acme.docs-review"
effect = "require"
obligations = ["explicit_approval"]
reason = "documentation changes are reviewed"
paths = ["docs/**"]
"""

DENY_PROD_WRITES = """
[[rule]]
id = "acme.prod-freeze"
effect = "deny"
reason = "production is frozen"
side_effects = ["file_write"]
environments = ["prod"]
"""


def test_a_file_rule_adds_an_obligation_to_an_allowed_call(tmp_path: Path) -> None:
    pdp = create_default_policy_decision_point(policy_files=[policy(tmp_path, REQUIRE_DOCS)])
    verdict = pdp.evaluate(action("write_to_file", {"TargetFile": "docs/a.md", "CodeContent": "x"}))
    assert verdict.kind is VerdictKind.ALLOW_WITH_OBLIGATIONS
    assert verdict.obligations == ("explicit_approval",)
    assert verdict.rule_ids == ("acme.docs-review",)


def test_obligations_from_defaults_and_files_are_unioned(tmp_path: Path) -> None:
    text = REQUIRE_DOCS.replace('paths = ["docs/**"]', 'side_effects = ["shell_command"]')
    pdp = create_default_policy_decision_point(policy_files=[policy(tmp_path, text)])
    verdict = pdp.evaluate(action("run_command", {"CommandLine": "make", "Cwd": WS}))
    assert verdict.kind is VerdictKind.ALLOW_WITH_OBLIGATIONS
    assert verdict.obligations == ("explicit_approval",)
    assert set(verdict.rule_ids) == {"jevqueue.shell.approval", "acme.docs-review"}


def test_a_file_deny_beats_a_default_obligation(tmp_path: Path) -> None:
    text = DENY_PROD_WRITES.replace(
        'side_effects = ["file_write"]', 'side_effects = ["shell_command"]'
    )
    pdp = create_default_policy_decision_point(policy_files=[policy(tmp_path, text)])
    verdict = pdp.evaluate(action("run_command", {"CommandLine": "make", "Cwd": WS}))
    assert verdict.kind is VerdictKind.DENY
    assert verdict.rule_ids == ("acme.prod-freeze",)
    assert verdict.reasons == ("production is frozen",)


def test_a_file_deny_beats_a_default_repair(tmp_path: Path) -> None:
    pdp = create_default_policy_decision_point(policy_files=[policy(tmp_path, DENY_PROD_WRITES)])
    verdict = pdp.evaluate(
        action("write_to_file", {"TargetFile": "src/../src/a.py", "CodeContent": "x"})
    )
    assert verdict.kind is VerdictKind.DENY
    assert verdict.repaired is None


def test_a_default_repair_beats_a_file_obligation(tmp_path: Path) -> None:
    pdp = create_default_policy_decision_point(policy_files=[policy(tmp_path, REQUIRE_DOCS)])
    verdict = pdp.evaluate(
        action("write_to_file", {"TargetFile": "docs/../docs/a.md", "CodeContent": "x"})
    )
    assert verdict.kind is VerdictKind.REPAIR


def test_a_file_cannot_turn_a_default_deny_into_anything_else(tmp_path: Path) -> None:
    text = """
[policy]
default = "deny"

[[rule]]
id = "everything"
effect = "allow"
reason = "allow it all"
paths = ["**"]
"""
    pdp = create_default_policy_decision_point(policy_files=[policy(tmp_path, text)])
    verdict = pdp.evaluate(
        action("write_to_file", {"TargetFile": ".git/hooks/pre-commit", "CodeContent": "x"})
    )
    assert verdict.kind is VerdictKind.DENY
    assert "jevqueue.paths.git" in verdict.rule_ids


def test_several_files_compose_and_all_apply(tmp_path: Path) -> None:
    pdp = create_default_policy_decision_point(
        policy_files=[
            policy(tmp_path, REQUIRE_DOCS, "a.toml"),
            policy(tmp_path, DENY_PROD_WRITES, "b.toml"),
        ]
    )
    docs = action("write_to_file", {"TargetFile": "docs/a.md", "CodeContent": "x"})
    assert pdp.evaluate(docs).kind is VerdictKind.DENY
    staging = action(
        "write_to_file", {"TargetFile": "docs/a.md", "CodeContent": "x"}, environment="staging"
    )
    assert pdp.evaluate(staging).kind is VerdictKind.ALLOW_WITH_OBLIGATIONS


def test_the_revision_changes_with_the_file_content(tmp_path: Path) -> None:
    path = policy(tmp_path, REQUIRE_DOCS)
    before = create_default_policy_decision_point(policy_files=[path]).revision
    path.write_text(REQUIRE_DOCS.replace("reviewed", "reviewed by two people"), "utf-8")
    after = create_default_policy_decision_point(policy_files=[path]).revision
    assert before != after
    assert before != create_default_policy_decision_point().revision


def test_a_broken_file_stops_the_decision_point_from_being_built(tmp_path: Path) -> None:
    path = policy(tmp_path, "[[rule]]\nid = 'a'\neffect = 'deny'\nreason = 'r'\npaths = ['/etc']\n")
    with pytest.raises(PolicyFileError) as caught:
        create_default_policy_decision_point(policy_files=[path])
    assert caught.value.line == 5


def test_the_same_id_in_two_files_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"acme\.docs-review"):
        create_default_policy_decision_point(
            policy_files=[
                policy(tmp_path, REQUIRE_DOCS, "a.toml"),
                policy(tmp_path, REQUIRE_DOCS, "b.toml"),
            ]
        )


def test_an_id_in_the_default_namespace_is_a_mistake(tmp_path: Path) -> None:
    path = policy(tmp_path, REQUIRE_DOCS.replace("acme.docs-review", "jevqueue.paths.git"))
    with pytest.raises(PolicyFileError, match="belong to the default rules") as caught:
        create_default_policy_decision_point(policy_files=[path])
    assert caught.value.line == 3


def test_file_rules_are_audited_with_their_ids_through_the_pep(tmp_path: Path) -> None:
    audit = RecordingAuditSink()
    pdp = create_default_policy_decision_point(policy_files=[policy(tmp_path, DENY_PROD_WRITES)])
    adapter = AntigravityAdapter(PolicyEnforcementPoint(pdp, audit_logger=audit))
    with pytest.raises(PolicyDeniedError, match="production is frozen"):
        adapter.intercept_tool_call(
            "write_to_file", {"TargetFile": "src/a.py", "CodeContent": "x"}, CONTEXT
        )
    [event] = audit.events
    assert event["result"] == "DENY"
    assert event["rule_ids"] == ["acme.prod-freeze"]
    assert event["reasons"] == ["production is frozen"]
    assert event["policy_revision"] == pdp.revision
