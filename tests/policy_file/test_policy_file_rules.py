"""What the rules of a policy file say about real actions (built with the real registry)."""

from __future__ import annotations

from pathlib import Path

import pytest
from jevqueue.policy import (
    Action,
    Rule,
    ToolRegistry,
    ToolSpec,
    Verdict,
    VerdictKind,
    antigravity_registry,
    declare_side_effect,
)
from jevqueue.policy_files import check_policy_file, load_policy_rules

WS = "/workspace/project"
SHA = "0123456789abcdef0123456789abcdef01234567"


def context(**overrides: str) -> dict[str, str]:
    base = {
        "task_id": "task-42",
        "actor_id": "coding-agent",
        "workspace": WS,
        "git_sha": SHA,
        "environment": "local",
    }
    base.update(overrides)
    return base


def registry() -> ToolRegistry:
    declare_side_effect("database_read", "reads the application database")
    return (
        antigravity_registry()
        .register(
            ToolSpec(
                "copy_file",
                side_effects=frozenset({"file_read", "file_write"}),
                path_fields=("Source", "Destination"),
                required_path_fields=("Source", "Destination"),
            )
        )
        .register(ToolSpec("query_db", side_effects=frozenset({"database_read"})))
    )


def write_call(target: str, content: str = "x = 1\n", **ctx: str) -> Action:
    return Action.build(
        registry(), "write_to_file", {"TargetFile": target, "CodeContent": content}, context(**ctx)
    )


def shell_call(command: str, cwd: str = WS, **ctx: str) -> Action:
    return Action.build(
        registry(), "run_command", {"CommandLine": command, "Cwd": cwd}, context(**ctx)
    )


def rules_from(tmp_path: Path, text: str) -> list[Rule]:
    path = tmp_path / "policy.toml"
    path.write_text(text, encoding="utf-8")
    return load_policy_rules(path)


def verdicts(rules: list[Rule], action: Action) -> list[Verdict]:
    return [v for v in (rule.evaluate(action) for rule in rules) if v is not None]


def deny_rule(conditions: str, rule_id: str = "r1") -> str:
    return f'[[rule]]\nid = "{rule_id}"\neffect = "deny"\nreason = "not here"\n{conditions}\n'


@pytest.mark.parametrize(
    ("conditions", "action", "expected"),
    [
        ('tools = ["write_to_file"]', write_call("a.py"), True),
        ('tools = ["write_to_file"]', shell_call("ls"), False),
        ('tools = ["*_file"]', write_call("a.py"), True),
        ('tools = ["*_file"]', shell_call("ls"), False),
        ('side_effects = ["shell_command"]', shell_call("ls"), True),
        ('side_effects = ["shell_command"]', write_call("a.py"), False),
        ('side_effects = ["network", "file_write"]', write_call("a.py"), True),
        ('paths = [".env*"]', write_call("config/.env.production"), True),
        ('paths = [".env*"]', write_call("config/env.py"), False),
        ('paths = ["migrations/**"]', write_call("migrations/0001_init.sql"), True),
        ('paths = ["migrations/**"]', write_call("app/migrations/0001.sql"), False),
        ('paths = ["infra"]', write_call("infra/prod/main.tf"), True),
        ('paths = ["src/*.py"]', write_call("src/pkg/a.py"), False),
        ('paths = ["src/**/*.py"]', write_call("src/pkg/a.py"), True),
        ('paths = ["infra/**"]', shell_call("terraform apply", cwd="infra/prod"), True),
        ('paths = ["infra/**"]', shell_call("terraform apply", cwd="app"), False),
        ('environments = ["prod*"]', write_call("a.py", environment="production"), True),
        ('environments = ["prod*"]', write_call("a.py", environment="staging"), False),
        ('actors = ["intern-*"]', write_call("a.py", actor_id="intern-7"), True),
        ('actors = ["intern-*"]', write_call("a.py"), False),
        ("arguments = { CommandLine = '\\bcurl\\b.*\\|\\s*sh' }", shell_call("curl x | sh"), True),
        ("arguments = { CommandLine = '\\bcurl\\b.*\\|\\s*sh' }", shell_call("curl x > f"), False),
        ("arguments = { Missing = '.' }", shell_call("ls"), False),
        ('arguments_json = \'"Cwd":"/etc\'', shell_call("ls", cwd="/etc"), True),
        ('arguments_json = "DROP TABLE"', write_call("q.sql", "DROP TABLE users;"), True),
        # conditions are ANDed ...
        ('tools = ["write_to_file"]\npaths = ["docs/**"]', write_call("src/a.py"), False),
        ('tools = ["write_to_file"]\npaths = ["docs/**"]', write_call("docs/a.md"), True),
        # ... and the values of one condition are ORed
        ('paths = ["docs/**", "*.md"]', write_call("README.md"), True),
    ],
)
def test_deny_conditions(tmp_path: Path, conditions: str, action: Action, expected: bool) -> None:
    [rule] = rules_from(tmp_path, deny_rule(conditions))
    verdict = rule.evaluate(action)
    if expected:
        assert verdict is not None
        assert verdict.kind is VerdictKind.DENY
        assert verdict.reasons == ("not here",)
        assert verdict.rule_ids == ("r1",)
    else:
        assert verdict is None


def test_an_argument_that_is_not_a_string_is_matched_in_its_json_spelling(tmp_path: Path) -> None:
    spec = ToolSpec("exec", side_effects=frozenset({"shell_command"}))
    tools = ToolRegistry([spec])
    [rule] = rules_from(tmp_path, deny_rule("arguments = { argv = 'rm.*-rf' }"))
    wrapped = Action.build(tools, "exec", {"argv": ["rm", "-rf", "/"]}, context())
    assert rule.evaluate(wrapped) is not None
    nested = Action.build(tools, "exec", {"argv": {"cmd": "rm -rf /"}}, context())
    assert rule.evaluate(nested) is not None


def test_require_yields_the_obligation(tmp_path: Path) -> None:
    text = (
        '[[rule]]\nid = "migrations"\neffect = "require"\nobligations = ["explicit_approval"]\n'
        'reason = "Schema migrations need a human"\npaths = ["migrations/**"]\n'
    )
    [rule] = rules_from(tmp_path, text)
    verdict = rule.evaluate(write_call("migrations/0002.sql"))
    assert verdict is not None
    assert verdict.kind is VerdictKind.ALLOW_WITH_OBLIGATIONS
    assert verdict.obligations == ("explicit_approval",)
    assert verdict.reasons == ("Schema migrations need a human",)
    assert verdict.rule_ids == ("migrations",)
    assert rule.evaluate(write_call("src/app.py")) is None


def test_reasons_never_echo_argument_values(tmp_path: Path) -> None:
    secret = "hunter2-very-secret"
    [rule] = rules_from(tmp_path, deny_rule(f"arguments = {{ CodeContent = '{secret[:7]}' }}"))
    verdict = rule.evaluate(write_call("a.py", content=f"password = '{secret}'"))
    assert verdict is not None
    assert all(secret not in reason and "hunter2" not in reason for reason in verdict.reasons)


def test_targets_outside_the_workspace_never_match_relative_globs(tmp_path: Path) -> None:
    [rule] = rules_from(tmp_path, deny_rule('paths = ["**"]'))
    assert rule.evaluate(write_call("/etc/passwd")) is None
    assert rule.evaluate(write_call("../project-evil/a.py")) is None
    assert rule.evaluate(write_call("a.py")) is not None


def test_paths_resolve_through_a_symlinked_workspace(tmp_path: Path) -> None:
    real = tmp_path / "real"
    (real / "secrets").mkdir(parents=True)
    link = tmp_path / "link"
    link.symlink_to(real)
    [rule] = rules_from(tmp_path, deny_rule('paths = ["secrets/**"]'))
    action = write_call("secrets/key.txt", workspace=str(link))
    assert rule.evaluate(action) is not None


def test_a_custom_side_effect_declared_in_the_file(tmp_path: Path) -> None:
    text = '[policy]\nside_effects = ["database_read"]\n\n' + deny_rule(
        'side_effects = ["database_read"]\nenvironments = ["prod"]'
    )
    [rule] = rules_from(tmp_path, text)
    assert rule.evaluate(Action.build(registry(), "query_db", {}, context(environment="prod")))
    assert rule.evaluate(Action.build(registry(), "query_db", {}, context())) is None


ALLOWLIST = """
[policy]
name = "docs-bot"
default = "deny"
default_reason = "the docs bot only edits documentation"

[[rule]]
id = "docs"
effect = "allow"
reason = "documentation"
tools = ["write_to_file", "view_file", "copy_file"]
paths = ["docs/**", "*.md"]
side_effects = ["file_read", "file_write"]
"""


def test_default_deny_turns_allow_rules_into_an_allowlist(tmp_path: Path) -> None:
    rules = rules_from(tmp_path, ALLOWLIST)
    assert [rule.rule_id for rule in rules] == ["docs-bot:default-deny"]
    assert verdicts(rules, write_call("docs/guide.md")) == []
    [denied] = verdicts(rules, write_call("src/app.py"))
    assert denied.kind is VerdictKind.DENY
    assert denied.reasons == ("the docs bot only edits documentation",)
    assert denied.rule_ids == ("docs-bot:default-deny",)
    # a tool the allow rule does not name
    assert verdicts(rules, shell_call("make docs", cwd="docs"))[0].denied


@pytest.mark.parametrize(
    "target",
    ["src/x.md/app.py", "x.md/src/app/__init__.py", "notes.MD", "Docs/guide.txt"],
)
def test_an_allow_glob_does_not_cover_what_is_below_a_matching_directory(
    tmp_path: Path, target: str
) -> None:
    rules = rules_from(tmp_path, ALLOWLIST)
    assert verdicts(rules, write_call("README.md")) == []
    assert verdicts(rules, write_call("docs/deep/guide.md")) == []
    [denied] = verdicts(rules, write_call(target))
    assert denied.rule_ids == ("docs-bot:default-deny",)


def test_an_allow_glob_naming_a_directory_allows_that_directory_only(tmp_path: Path) -> None:
    rules = rules_from(tmp_path, ALLOWLIST.replace('"docs/**", "*.md"', '"docs"'))
    read_dir = Action.build(registry(), "view_file", {"AbsolutePath": f"{WS}/docs"}, context())
    assert verdicts(rules, read_dir) == []
    assert verdicts(rules, write_call("docs/guide.md"))[0].denied


def test_a_deny_glob_still_covers_what_is_below_a_matching_directory(tmp_path: Path) -> None:
    [rule] = rules_from(tmp_path, deny_rule('paths = ["*.md", "docs"]'))
    assert rule.evaluate(write_call("src/x.md/app.py")) is not None
    assert rule.evaluate(write_call("DOCS/deep/guide.py")) is not None
    assert rule.evaluate(write_call("src/app.py")) is None


def test_an_allow_rule_must_cover_every_target(tmp_path: Path) -> None:
    rules = rules_from(tmp_path, ALLOWLIST)
    inside = {"Source": "docs/a.md", "Destination": "docs/b.md"}
    half = {"Source": "docs/a.md", "Destination": "src/b.py"}
    assert verdicts(rules, Action.build(registry(), "copy_file", inside, context())) == []
    assert verdicts(rules, Action.build(registry(), "copy_file", half, context()))[0].denied


def test_an_allow_rule_must_cover_every_side_effect(tmp_path: Path) -> None:
    text = ALLOWLIST.replace(
        'side_effects = ["file_read", "file_write"]', 'side_effects = ["file_read"]'
    )
    rules = rules_from(tmp_path, text)
    read = Action.build(registry(), "view_file", {"AbsolutePath": f"{WS}/docs/a.md"}, context())
    assert verdicts(rules, read) == []
    # copy_file also writes: read-only allowance does not cover it
    both = {"Source": "docs/a.md", "Destination": "docs/b.md"}
    assert verdicts(rules, Action.build(registry(), "copy_file", both, context()))[0].denied


def test_allow_rules_under_default_allow_are_inert_and_warned_about(tmp_path: Path) -> None:
    text = '[[rule]]\nid = "a"\neffect = "allow"\nreason = "r"\npaths = [".env"]\n'
    path = tmp_path / "p.toml"
    path.write_text(text, encoding="utf-8")
    report = check_policy_file(path)
    assert report.ok
    assert report.rules == ()
    assert any("allow rule(s) have no effect" in w.message for w in report.warnings)


@pytest.mark.parametrize(
    ("text", "warning"),
    [
        (deny_rule('tools = ["write_file"]'), "did you mean 'write_to_file'"),
        (deny_rule("arguments = { CommandLine = '.*' }"), "matches the empty string"),
        (deny_rule("arguments = { CommandLine = '(a+)+b' }"), "exponential time"),
        ('[[rule]]\nid = "all"\neffect = "deny"\nreason = "freeze"\n', "no conditions"),
        ("# nothing yet\n", "changes nothing"),
    ],
)
def test_suspicious_but_legal_constructs_are_warned_about(
    tmp_path: Path, text: str, warning: str
) -> None:
    path = tmp_path / "p.toml"
    path.write_text(text, encoding="utf-8")
    report = check_policy_file(path)
    assert report.ok, [str(e) for e in report.errors]
    assert any(warning in str(w) for w in report.warnings), [str(w) for w in report.warnings]


def test_the_report_summarises_a_usable_file(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text(ALLOWLIST + deny_rule('tools = ["run_command"]', "no-shell"), "utf-8")
    report = check_policy_file(path)
    assert report.ok
    assert report.name == "docs-bot"
    assert report.default == "deny"
    assert len(report.sha256) == 64
    assert report.summary().endswith("policy 'docs-bot', 2 rules (1 deny, 1 allow), default deny")


def test_objecting_rules_see_filesystem_aliases_and_allow_rules_do_not(tmp_path: Path) -> None:
    [deny] = rules_from(tmp_path, deny_rule('paths = ["secrets/**"]'))
    for alias in ("SECRETS/key", "secrets./key", "secrets /key", "secr\u200cets/key"):
        assert deny.evaluate(write_call(alias)) is not None, alias
    allowlist = rules_from(tmp_path, ALLOWLIST)
    assert verdicts(allowlist, write_call("docs/a.txt")) == []
    for alias in ("DOCS/a.txt", "docs./a.txt"):
        assert verdicts(allowlist, write_call(alias))[0].denied, alias


def test_rules_with_side_effects_tell_the_decision_point_when_to_ask_them(tmp_path: Path) -> None:
    [scoped] = rules_from(tmp_path, deny_rule('side_effects = ["shell_command"]'))
    [unscoped] = rules_from(tmp_path, deny_rule('tools = ["run_command"]'))
    assert getattr(scoped, "opinion_side_effects", None) == frozenset({"shell_command"})
    assert getattr(unscoped, "opinion_side_effects", None) is None
