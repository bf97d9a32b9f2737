from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from jevqueue.policy import (
    EXPLICIT_APPROVAL,
    Action,
    CredentialContentRule,
    PathNormalizationRule,
    ToolRegistry,
    ToolSpec,
    Verdict,
    VerdictKind,
    antigravity_registry,
    create_default_policy_decision_point,
    default_rules,
)

from .conftest import WORKSPACE, context_mapping

REGISTRY = antigravity_registry().register(
    ToolSpec("post_message", side_effects=frozenset({"network"}))
)
PDP = create_default_policy_decision_point()


def judge(tool: str, arguments: dict[str, Any], **context: Any) -> Verdict:
    return PDP.evaluate(Action.build(REGISTRY, tool, arguments, context_mapping(**context)))


def write(path: str, content: str = "value = 1\n") -> Verdict:
    return judge("write_to_file", {"TargetFile": path, "CodeContent": content})


def test_rule_ids_are_stable_and_unique() -> None:
    ids = [rule.rule_id for rule in default_rules()]
    assert ids == [
        "jevqueue.workspace.containment",
        "jevqueue.paths.spelling",
        "jevqueue.shell.cwd",
        "jevqueue.paths.git",
        "jevqueue.content.credentials",
        "jevqueue.shell.approval",
        "jevqueue.paths.ci",
        "jevqueue.paths.secrets",
        "jevqueue.paths.hardlink",
        "jevqueue.paths.missing",
        "jevqueue.delete.approval",
        "jevqueue.paths.normalize",
    ]


def test_plain_write_inside_the_workspace_is_allowed() -> None:
    verdict = write("src/feature.py")
    assert verdict.kind is VerdictKind.ALLOW
    assert verdict.action_digest.startswith("sha256:")
    assert verdict.policy_revision == PDP.revision


@pytest.mark.parametrize(
    "path",
    [
        "../outside.py",
        "/workspace/project-evil/a.py",
        "/workspace/project2",
        WORKSPACE,
        ".",
        "/etc/passwd",
        "~/.bashrc",
        "src/../../../etc/passwd",
        "//etc/passwd",
    ],
)
def test_targets_outside_the_workspace_are_denied(path: str) -> None:
    verdict = write(path)
    assert verdict.kind is VerdictKind.DENY
    assert "jevqueue.workspace.containment" in verdict.rule_ids
    assert path not in " ".join(verdict.reasons) or path in {".", WORKSPACE}


@pytest.mark.parametrize(
    "path",
    [
        ".git/hooks/pre-commit",
        ".git/config",
        "sub/.git/hooks/post-checkout",
        ".git./hooks/pre-commit",
        ".git /hooks/x",
        ".GIT/HOOKS/x",
        ".git",
    ],
)
def test_writes_into_git_are_denied(path: str) -> None:
    verdict = write(path)
    assert verdict.kind is VerdictKind.DENY
    assert "jevqueue.paths.git" in verdict.rule_ids


def test_reading_git_objects_is_fine_but_git_config_needs_approval() -> None:
    assert judge("view_file", {"AbsolutePath": f"{WORKSPACE}/.git/HEAD"}).kind is VerdictKind.ALLOW
    config = judge("view_file", {"AbsolutePath": f"{WORKSPACE}/.git/config"})
    assert config.obligations == (EXPLICIT_APPROVAL,)


@pytest.mark.parametrize(
    "path",
    [
        ".github/workflows/ci.yml",
        ".GitHub/Workflows/release.yaml",
        ".github/actions/setup/action.yml",
        ".gitlab-ci.yml",
        "ci/.gitlab-ci.yml",
        ".circleci/config.yml",
        "Jenkinsfile",
        ".travis.yml",
        "azure-pipelines.yml",
        "bitbucket-pipelines.yml",
        ".husky/pre-commit",
        ".pre-commit-config.yaml",
        ".devcontainer/devcontainer.json",
        ".vscode/tasks.json",
        ".buildkite/pipeline.yml",
    ],
)
def test_ci_and_automation_config_needs_approval(path: str) -> None:
    verdict = write(path)
    assert verdict.kind is VerdictKind.ALLOW_WITH_OBLIGATIONS
    assert verdict.obligations == (EXPLICIT_APPROVAL,)
    assert "jevqueue.paths.ci" in verdict.rule_ids


@pytest.mark.parametrize(
    "path",
    [
        ".env",
        ".env.local",
        ".env.production",
        ".envrc",
        "config/.ENV",
        "certs/server.pem",
        "tls/private.key",
        "id_rsa",
        "keys/id_ed25519",
        ".ssh/authorized_keys",
        ".aws/credentials",
        ".npmrc",
        ".pypirc",
        ".netrc",
        "terraform.tfstate",
    ],
)
def test_secret_stores_need_approval_to_write_and_read(path: str) -> None:
    written = write(path, "x = 1\n")
    assert written.kind is VerdictKind.ALLOW_WITH_OBLIGATIONS
    assert "jevqueue.paths.secrets" in written.rule_ids
    read = judge("view_file", {"AbsolutePath": f"{WORKSPACE}/{path}"})
    assert read.obligations == (EXPLICIT_APPROVAL,)


@pytest.mark.parametrize(
    "path", [".env.example", ".env.sample", "id_rsa.pub", "src/environment.py", "docs/key.md"]
)
def test_templates_and_public_keys_are_not_secret(path: str) -> None:
    assert write(path).kind is VerdictKind.ALLOW


AWS_KEY = "AKIA" + "IOSFODNN7EXAMPLE"
CREDENTIALS = {
    "an AWS access key id": f"aws_access_key_id = {AWS_KEY}",
    "an AWS secret access key": "aws_secret_access_key = "
    + "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "a private key block": "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjE=",
    "a GitHub token": "token = ghp_" + "a" * 36,
    "a GitLab token": "glpat-" + "x" * 20,
    "a Slack token": "xoxb-" + "1234567890-abcdef",
    "a Google API key": "AIza" + "S" * 35,
    "a Stripe live key": "sk_live_" + "4" * 24,
    "an npm token": "npm_" + "b" * 36,
}


@pytest.mark.parametrize(("label", "content"), sorted(CREDENTIALS.items()))
def test_credentials_in_content_are_denied_without_echo(label: str, content: str) -> None:
    verdict = write("src/config.py", content)
    assert verdict.kind is VerdictKind.DENY
    assert "jevqueue.content.credentials" in verdict.rule_ids
    reasons = " ".join(verdict.reasons)
    assert label in reasons
    assert content not in reasons
    assert content[-12:] not in reasons


def test_credentials_in_commands_and_nested_replacements_are_denied() -> None:
    command = judge("run_command", {"CommandLine": f"export KEY={AWS_KEY}", "Cwd": "."})
    assert command.kind is VerdictKind.DENY
    chunks = [{"TargetContent": "x", "ReplacementContent": f"k = '{AWS_KEY}'"}]
    multi = judge("multi_replace_file_content", {"TargetFile": "a.py", "ReplacementChunks": chunks})
    assert multi.kind is VerdictKind.DENY


def test_removing_a_leaked_key_is_allowed() -> None:
    chunks = [{"TargetContent": f"k = '{AWS_KEY}'", "ReplacementContent": "k = os.environ['K']"}]
    verdict = judge(
        "multi_replace_file_content", {"TargetFile": "a.py", "ReplacementChunks": chunks}
    )
    assert verdict.kind is VerdictKind.ALLOW


def test_replacement_chunks_sent_as_a_json_string_are_still_scanned() -> None:
    chunks = '[{"TargetContent": "x", "ReplacementContent": "' + AWS_KEY + '"}]'
    verdict = judge(
        "multi_replace_file_content", {"TargetFile": "a.py", "ReplacementChunks": chunks}
    )
    assert verdict.kind is VerdictKind.DENY


def test_tools_without_content_fields_are_scanned_whole() -> None:
    verdict = judge("post_message", {"channel": "ops", "body": {"text": ["hi", AWS_KEY]}})
    assert verdict.kind is VerdictKind.DENY
    assert judge("post_message", {"channel": "ops"}).kind is VerdictKind.ALLOW


def test_shell_commands_need_approval_whatever_the_agent_claims() -> None:
    for extra in ({}, {"SafeToAutoRun": True}, {"is_harmless": True, "approved": True}):
        verdict = judge("run_command", {"CommandLine": "ls", "Cwd": WORKSPACE, **extra})
        assert verdict.kind is VerdictKind.ALLOW_WITH_OBLIGATIONS
        assert verdict.obligations == (EXPLICIT_APPROVAL,)
        assert "jevqueue.shell.approval" in verdict.rule_ids


@pytest.mark.parametrize("cwd", ["/tmp", "..", "/workspace/project-evil", "~"])
def test_shell_working_directory_must_be_inside_the_workspace(cwd: str) -> None:
    verdict = judge("run_command", {"CommandLine": "ls", "Cwd": cwd})
    assert verdict.kind is VerdictKind.DENY
    assert "jevqueue.shell.cwd" in verdict.rule_ids


def test_shell_tool_without_cwd_field_is_denied() -> None:
    registry = ToolRegistry().register(
        ToolSpec("bash", side_effects=frozenset({"shell_command"}), content_fields=("cmd",))
    )
    action = Action.build(registry, "bash", {"cmd": "ls"}, context_mapping())
    verdict = PDP.evaluate(action)
    assert verdict.kind is VerdictKind.DENY
    assert "jevqueue.shell.cwd" in verdict.rule_ids


@pytest.mark.parametrize(
    ("path", "repaired"),
    [
        ("src/../lib/a.py", "lib/a.py"),
        ("./src/../../project/src/a.py", "src/a.py"),
        (f"{WORKSPACE}/src/../a.py", f"{WORKSPACE}/a.py"),
    ],
)
def test_indirect_paths_are_repaired(path: str, repaired: str) -> None:
    verdict = write(path)
    assert verdict.kind is VerdictKind.REPAIR
    assert verdict.repaired is not None
    assert verdict.repaired["tool"] == "write_to_file"
    assert verdict.repaired["arguments"] == {"TargetFile": repaired, "CodeContent": "value = 1\n"}
    assert "jevqueue.paths.normalize" in verdict.rule_ids
    resubmitted = write(repaired)
    assert resubmitted.kind is VerdictKind.ALLOW


def test_repaired_cwd_keeps_the_approval_for_later() -> None:
    verdict = judge("run_command", {"CommandLine": "make", "Cwd": f"{WORKSPACE}/src/.."})
    assert verdict.kind is VerdictKind.REPAIR
    assert verdict.repaired is not None
    assert verdict.repaired["arguments"]["Cwd"] == WORKSPACE


def test_tilde_path_inside_the_workspace_is_repaired(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", "/workspace")
    verdict = judge("view_file", {"AbsolutePath": "~/project/src/a.py"})
    assert verdict.kind is VerdictKind.REPAIR
    assert verdict.repaired is not None
    assert verdict.repaired["arguments"] == {"AbsolutePath": f"{WORKSPACE}/src/a.py"}


def test_escaping_indirect_path_is_denied_not_repaired() -> None:
    verdict = write("src/../../elsewhere/a.py")
    assert verdict.kind is VerdictKind.DENY


def test_deny_wins_over_repair_and_obligations() -> None:
    verdict = write(".git/../.git/hooks/pre-push")
    assert verdict.kind is VerdictKind.DENY
    verdict = write(".github/workflows/../workflows/ci.yml")
    assert verdict.kind is VerdictKind.REPAIR


def test_rules_can_be_used_one_by_one() -> None:
    action = Action.build(
        REGISTRY, "write_to_file", {"TargetFile": "a.py", "CodeContent": AWS_KEY}, context_mapping()
    )
    assert CredentialContentRule().evaluate(action) is not None
    assert PathNormalizationRule().evaluate(action) is None


def test_symlink_into_git_hooks_is_denied(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    (workspace / ".git" / "hooks").mkdir(parents=True)
    (workspace / "scripts").symlink_to(workspace / ".git" / "hooks")
    (workspace / "ci").symlink_to(workspace / ".github", target_is_directory=True)
    ctx = context_mapping(workspace=str(workspace))
    hooked = Action.build(REGISTRY, "write_to_file", {"TargetFile": "scripts/pre-commit"}, ctx)
    assert PDP.evaluate(hooked).kind is VerdictKind.DENY
    workflow = Action.build(REGISTRY, "write_to_file", {"TargetFile": "ci/workflows/x.yml"}, ctx)
    assert PDP.evaluate(workflow).obligations == (EXPLICIT_APPROVAL,)


def test_symlink_out_of_the_workspace_is_denied(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "notes.md").symlink_to("/etc/passwd")
    ctx = context_mapping(workspace=str(workspace))
    action = Action.build(REGISTRY, "write_to_file", {"TargetFile": "notes.md"}, ctx)
    verdict = PDP.evaluate(action)
    assert verdict.kind is VerdictKind.DENY
    assert "jevqueue.workspace.containment" in verdict.rule_ids


@pytest.mark.parametrize(
    "path",
    [
        "GIT~1/hooks/pre-commit",
        ".git::$INDEX_ALLOCATION/hooks/pre-commit",
        ".g\u200cit/hooks/pre-commit",
        ".\ufeffgit/config",
    ],
)
def test_filesystem_aliases_of_git_are_denied(path: str) -> None:
    verdict = write(path)
    assert verdict.kind is VerdictKind.DENY
    assert "jevqueue.paths.git" in verdict.rule_ids


def test_short_name_of_github_needs_approval() -> None:
    assert write("GITHUB~1/workflows/ci.yml").obligations == (EXPLICIT_APPROVAL,)
