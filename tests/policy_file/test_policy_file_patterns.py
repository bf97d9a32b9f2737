"""Argument patterns: which ones checking a policy file calls match-anything, and that the
check itself never runs a pattern where it could backtrack for ever."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from jevqueue.policy_files import check_policy_file

MATCHES_ANYTHING = "matches the empty string, so it matches any value"


def rule_with_pattern(pattern: str) -> str:
    return (
        '[[rule]]\nid = "r"\neffect = "deny"\nreason = "r"\n'
        f"arguments = {{ CommandLine = '{pattern}' }}\n"
    )


@pytest.mark.parametrize(
    ("pattern", "warned"),
    [
        (".*", True),
        ("x?", True),
        ("(?:(0+)+y|)", True),  # the empty alternative matches anywhere
        ("^", True),  # search finds the start of every value
        ("^[^@]*$", False),  # anchored: a value with an '@' does not match
        ("^.{0,255}$", False),  # a value of 300 characters does not match
        ("rm -rf", False),
        ("(?is)^[^@]+$|@(?!example\\.com)", False),
    ],
)
def test_only_patterns_that_match_every_value_are_warned_about(
    tmp_path: Path, pattern: str, warned: bool
) -> None:
    path = tmp_path / "p.toml"
    path.write_text(rule_with_pattern(pattern), encoding="utf-8")
    report = check_policy_file(path)
    assert report.ok, [str(error) for error in report.errors]
    assert any(MATCHES_ANYTHING in str(w) for w in report.warnings) is warned


@pytest.mark.parametrize(
    "pattern",
    [
        "^(?:(0+)+y|)$",  # a repeat inside a repeat
        "^(?:(0|00)+y|)$",  # alternatives inside a repeat
        "^(?:0*0*0*0*0*0*0*0*y|)$",  # repeats side by side
        "(?:(0|0|0|0|0|0|0|0)+y|)",
    ],
)
def test_checking_a_pattern_that_backtracks_badly_finishes(tmp_path: Path, pattern: str) -> None:
    """Run in a child process: were the check to try such a pattern on a long value, it
    would not finish, and the timeout turns that into a failure instead of a hang."""
    path = tmp_path / "p.toml"
    path.write_text(rule_with_pattern(pattern), encoding="utf-8")
    check = "from jevqueue.cli import main; main()"
    done = subprocess.run(
        [sys.executable, "-c", check, "policy", "check", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "OK: policy" in done.stdout
