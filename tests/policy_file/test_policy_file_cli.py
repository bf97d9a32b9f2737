"""``jevqueue policy check`` and ``jevqueue policy explain``, through click's CliRunner."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from jevqueue.cli import main

GOOD = """
[policy]
name = "acme"

[[rule]]
id = "acme.prod-freeze"
effect = "deny"
reason = "production is frozen"
environments = ["prod"]
side_effects = ["file_write", "shell_command"]

[[rule]]
id = "acme.migrations"
effect = "require"
obligations = ["explicit_approval"]
reason = "migrations need a human"
paths = ["migrations/**"]
"""

BAD = """[[rule]]
id = "a"
effect = "forbid"
reason = "r"

[[rule]]
id = "a"
effect = "deny"
reason = "r"
paths = ["../x"]
"""

CONTEXT = json.dumps(
    {
        "task_id": "task-42",
        "actor_id": "coding-agent",
        "workspace": "/workspace/project",
        "git_sha": "0123456789abcdef0123456789abcdef01234567",
        "environment": "local",
    }
)


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_check_ok_prints_a_summary_and_exits_zero(tmp_path: Path) -> None:
    path = write(tmp_path, "good.toml", GOOD)
    result = CliRunner().invoke(main, ["policy", "check", str(path)])
    assert result.exit_code == 0, result.output
    assert f"{path}: OK: policy 'acme', 2 rules (1 deny, 1 require), default allow" in result.output


def test_check_lists_every_mistake_with_file_and_line_and_fails(tmp_path: Path) -> None:
    path = write(tmp_path, "bad.toml", BAD)
    result = CliRunner().invoke(main, ["policy", "check", str(path)])
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"{path}:3: rule 'a': unknown effect 'forbid'")
    assert lines[1].startswith(f"{path}:7: rule #2: duplicate rule id 'a' (first used on line 2)")
    assert lines[2].startswith(f"{path}:10: rule 'a': bad glob '../x' in paths")
    assert "3 mistakes found" in result.stderr


def test_check_reports_a_toml_syntax_error_with_its_line(tmp_path: Path) -> None:
    path = write(tmp_path, "broken.toml", '[[rule]]\nid = "a"\nreason = "unterminated\n')
    result = CliRunner().invoke(main, ["policy", "check", str(path)])
    assert result.exit_code == 1
    assert result.stdout.startswith(f"{path}:3: TOML syntax error")


def test_check_takes_several_files_and_fails_if_any_is_bad(tmp_path: Path) -> None:
    good = write(tmp_path, "good.toml", GOOD)
    bad = write(tmp_path, "bad.toml", BAD)
    result = CliRunner().invoke(main, ["policy", "check", str(good), str(bad)])
    assert result.exit_code == 1
    assert f"{good}: OK" in result.stdout
    assert f"{bad}:3:" in result.stdout


def test_check_prints_warnings_but_still_passes(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "warn.toml",
        '[[rule]]\nid = "a"\neffect = "deny"\nreason = "r"\ntools = ["write_file"]\n',
    )
    result = CliRunner().invoke(main, ["policy", "check", str(path)])
    assert result.exit_code == 0
    assert (
        f"{path}:5: warning: tool 'write_file' is not in the built-in registries" in result.stdout
    )
    quiet = CliRunner().invoke(main, ["policy", "check", "--quiet", str(path)])
    assert quiet.exit_code == 0
    assert quiet.stdout == ""


def test_check_of_a_missing_file_fails(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["policy", "check", str(tmp_path / "absent.toml")])
    assert result.exit_code == 1
    assert "cannot read the policy file" in result.stdout


def test_explain_shows_the_verdict_of_the_defaults_plus_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "good.toml", GOOD)
    arguments = json.dumps({"TargetFile": "migrations/0002.sql", "CodeContent": "ALTER TABLE"})
    result = CliRunner().invoke(
        main,
        [
            "policy",
            "explain",
            str(path),
            "--tool",
            "write_to_file",
            "--args",
            arguments,
            "--context",
            CONTEXT,
        ],
    )
    assert result.exit_code == 0, result.output
    assert "verdict:   ALLOW_WITH_OBLIGATIONS" in result.stdout
    assert "requires:  explicit_approval" in result.stdout
    assert "rules:     acme.migrations" in result.stdout
    assert "digest:    sha256:" in result.stdout


def test_explain_without_files_uses_the_defaults(tmp_path: Path) -> None:
    arguments = json.dumps({"TargetFile": "../../etc/passwd", "CodeContent": "x"})
    result = CliRunner().invoke(
        main,
        ["policy", "explain", "--tool", "write_to_file", "--args", arguments, "--context", CONTEXT],
    )
    assert result.exit_code == 0, result.output
    assert "verdict:   DENY" in result.stdout
    assert "jevqueue.workspace.containment" in result.stdout
    assert "etc/passwd" not in result.stdout.split("targets:")[0]


def test_explain_refuses_an_unregistered_tool(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main, ["policy", "explain", "--tool", "Write_To_File", "--context", CONTEXT]
    )
    assert result.exit_code == 1
    assert "REFUSED before evaluation: UnregisteredToolError" in result.stdout


def test_explain_rejects_arguments_that_are_not_a_json_object(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main,
        ["policy", "explain", "--tool", "write_to_file", "--args", "[1]", "--context", CONTEXT],
    )
    assert result.exit_code == 2
    assert "must be a JSON object" in result.output


def test_explain_reports_a_broken_policy_file(tmp_path: Path) -> None:
    path = write(tmp_path, "bad.toml", BAD)
    result = CliRunner().invoke(
        main, ["policy", "explain", str(path), "--tool", "write_to_file", "--context", CONTEXT]
    )
    assert result.exit_code == 1
    assert f"{path}:3:" in result.stdout


def test_the_example_files_in_the_documentation_are_valid(tmp_path: Path) -> None:
    import re

    docs = Path(__file__).resolve().parents[2] / "docs" / "policy.md"
    blocks = re.findall(r"```toml\n(.*?)```", docs.read_text("utf-8"), flags=re.DOTALL)
    examples = [b for b in blocks if b.startswith("# House rules") or 'name = "docs-bot"' in b]
    assert len(examples) == 2
    for index, text in enumerate(examples):
        path = write(tmp_path, f"example{index}.toml", text)
        result = CliRunner().invoke(main, ["policy", "check", str(path)])
        assert result.exit_code == 0, result.output
        assert "warning" not in result.output, result.output
