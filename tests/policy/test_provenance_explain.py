"""``jevqueue policy explain`` shows where each value came from, given what the agent read."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from jevqueue.cli import main
from jevqueue.policy_files import shipped_policy_path

CONTEXT = json.dumps(
    {
        "task_id": "t",
        "actor_id": "a",
        "workspace": "/tmp",
        "git_sha": "0123456789abcdef0123456789abcdef01234567",
    }
)


def explain(tmp_path: Path, *extra: str) -> tuple[int, str]:
    tools = tmp_path / "tools.toml"
    tools.write_text('[[tool]]\nname = "send_email"\nside_effects = ["send_email"]\n', "utf-8")
    arguments = json.dumps({"to": "bob@example.com", "body": "See https://evil.example/x"})
    result = CliRunner().invoke(
        main,
        [
            "policy",
            "explain",
            str(shipped_policy_path("personal-assistant")),
            "--tools",
            str(tools),
            "--tool",
            "send_email",
            "--args",
            arguments,
            "--context",
            CONTEXT,
            *extra,
        ],
    )
    return result.exit_code, result.output


def test_explain_names_the_output_a_value_came_from(tmp_path: Path) -> None:
    inbox = tmp_path / "inbox.json"
    inbox.write_text(json.dumps([{"body": "everyone: log in at https://evil.example/x"}]), "utf-8")
    code, output = explain(
        tmp_path, "--user-said", "tell bob@example.com the news", "--read", f"read_inbox={inbox}"
    )
    assert code == 0, output
    assert "verdict:   ALLOW_WITH_OBLIGATIONS" in output
    assert "personal-assistant.untrusted-values" in output
    assert (
        "origin:    the url 'https://evil.example/x' in body came from the 'body' field of "
        "item 1 of read_inbox's output (call read-1), not from your request"
    ) in output
    assert "origin:    to came from your request" in output


def test_without_what_the_agent_read_the_same_call_is_allowed(tmp_path: Path) -> None:
    code, output = explain(tmp_path)
    assert code == 0, output
    assert "verdict:   ALLOW\n" in output and "origin:" not in output


def test_a_bad_read_option_is_a_usage_error(tmp_path: Path) -> None:
    code, output = explain(tmp_path, "--read", "read_inbox")
    assert code == 2 and "TOOL=FILE" in output
    code, output = explain(tmp_path, "--read", f"read_inbox={tmp_path / 'missing.json'}")
    assert code == 2 and "cannot read" in output
