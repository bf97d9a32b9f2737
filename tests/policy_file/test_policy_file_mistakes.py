"""Every kind of policy-file mistake is reported with its file and its line."""

from __future__ import annotations

from pathlib import Path

import pytest
from jevqueue.errors import PolicyFileError, UsageError
from jevqueue.policy_files import check_policy_file, load_policy_rules


def write(tmp_path: Path, text: str, name: str = "policy.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def only_mistake(tmp_path: Path, text: str) -> PolicyFileError:
    report = check_policy_file(write(tmp_path, text))
    assert len(report.errors) == 1, [str(e) for e in report.errors]
    return report.errors[0]


VALID_RULE = """
[[rule]]
id = "ok"
effect = "deny"
reason = "fine"
tools = ["run_command"]
"""

# (case id, file text, expected line, a phrase the message must contain)
MISTAKES = [
    (
        "toml-syntax",
        '[[rule]]\nid = "a"\neffect = deny\n',
        3,
        "TOML syntax error",
    ),
    (
        "toml-duplicate-key",
        '[[rule]]\nid = "a"\nid = "b"\n',
        3,
        "TOML syntax error",
    ),
    (
        "toml-unclosed-array-at-end",
        '[[rule]]\nid = "a"\ntools = ["x",\n',
        3,
        "TOML syntax error",
    ),
    (
        "unknown-top-level-key",
        'rules = "x"\n' + VALID_RULE,
        1,
        "unknown top-level key 'rules'",
    ),
    (
        "unknown-policy-key",
        '[policy]\nname = "p"\ndefualt = "deny"\n' + VALID_RULE,
        3,
        "did you mean 'default'",
    ),
    (
        "unknown-rule-key",
        '[[rule]]\nid = "a"\neffect = "deny"\nreason = "r"\ntool = ["run_command"]\n',
        5,
        "unknown key 'tool' (did you mean 'tools'?)",
    ),
    (
        "id-wrong-type",
        "[[rule]]\nid = 7\neffect = 'deny'\nreason = 'r'\n",
        2,
        "'id' must be a string, not an integer",
    ),
    (
        "id-bad-format",
        "[[rule]]\nid = 'has space'\neffect = 'deny'\nreason = 'r'\n",
        2,
        "is not valid",
    ),
    (
        "reason-wrong-type",
        "[[rule]]\nid = 'a'\neffect = 'deny'\nreason = ['r']\n",
        4,
        "'reason' must be a string, not an array",
    ),
    (
        "reason-empty",
        "[[rule]]\nid = 'a'\neffect = 'deny'\nreason = '   '\n",
        4,
        "must not be empty",
    ),
    (
        "missing-reason",
        "\n\n[[rule]]\nid = 'a'\neffect = 'deny'\n",
        3,
        "missing 'reason'",
    ),
    (
        "missing-id",
        "[[rule]]\neffect = 'deny'\nreason = 'r'\n",
        1,
        "missing 'id'",
    ),
    (
        "missing-effect",
        "[[rule]]\nid = 'a'\nreason = 'r'\n",
        1,
        "missing 'effect'",
    ),
    (
        "unknown-effect",
        "[[rule]]\nid = 'a'\nreason = 'r'\neffect = 'deni'\n",
        4,
        "unknown effect 'deni' (did you mean 'deny'?)",
    ),
    (
        "tools-wrong-type",
        "[[rule]]\nid = 'a'\nreason = 'r'\neffect = 'deny'\ntools = 3\n",
        5,
        "'tools' must be a list of strings, not an integer",
    ),
    (
        "tools-element-wrong-type",
        "[[rule]]\nid = 'a'\nreason = 'r'\neffect = 'deny'\ntools = [\n  'run_command',\n  4,\n]\n",
        7,
        "entries must be strings, not an integer",
    ),
    (
        "tools-empty-list",
        "[[rule]]\nid = 'a'\nreason = 'r'\neffect = 'deny'\ntools = []\n",
        5,
        "empty list, which matches nothing",
    ),
    (
        "tool-name-that-can-never-match",
        "[[rule]]\nid = 'a'\nreason = 'r'\neffect = 'deny'\ntools = ['write to file']\n",
        5,
        "can never match a tool",
    ),
    (
        "tool-name-with-whitespace",
        "[[rule]]\nid = 'a'\nreason = 'r'\neffect = 'deny'\ntools = [' run_command']\n",
        5,
        "surrounding whitespace",
    ),
    (
        "bad-name-glob",
        "[[rule]]\nid = 'a'\nreason = 'r'\neffect = 'deny'\nactors = ['ci-[abc']\n",
        5,
        "bad glob 'ci-[abc' in actors",
    ),
    (
        "bad-path-glob-unclosed-class",
        "[[rule]]\nid = 'a'\nreason = 'r'\neffect = 'deny'\npaths = [\n  'src/**',\n  'x[',\n]\n",
        7,
        "never closed",
    ),
    (
        "bad-path-glob-absolute",
        "[[rule]]\nid = 'a'\nreason = 'r'\neffect = 'deny'\npaths = ['/etc/passwd']\n",
        5,
        "relative to the workspace",
    ),
    (
        "bad-path-glob-dotdot",
        "[[rule]]\nid = 'a'\nreason = 'r'\neffect = 'deny'\npaths = ['src/../secrets']\n",
        5,
        "'..'",
    ),
    (
        "bad-path-glob-partial-double-star",
        "[[rule]]\nid = 'a'\nreason = 'r'\neffect = 'deny'\npaths = ['src/a**']\n",
        5,
        "whole path segment",
    ),
    (
        "bad-path-glob-backslash",
        "[[rule]]\nid = 'a'\nreason = 'r'\neffect = 'deny'\npaths = ['src\\\\x']\n",
        5,
        "not '\\'",
    ),
    (
        "bad-path-glob-reversed-range",
        "[[rule]]\nid = 'a'\nreason = 'r'\neffect = 'deny'\npaths = ['[z-a].txt']\n",
        5,
        "bad character range",
    ),
    (
        "unknown-side-effect",
        "[[rule]]\nid = 'a'\nreason = 'r'\neffect = 'deny'\nside_effects = ['shell']\n",
        5,
        "unknown side effect 'shell'",
    ),
    (
        "unknown-obligation",
        "[[rule]]\nid = 'a'\nreason = 'r'\neffect = 'require'\n"
        "obligations = ['explicit_aproval']\n",
        5,
        "did you mean 'explicit_approval'",
    ),
    (
        "require-without-obligations",
        "\n[[rule]]\nid = 'a'\nreason = 'r'\neffect = 'require'\n",
        2,
        "needs 'obligations'",
    ),
    (
        "obligations-on-deny",
        "[[rule]]\nid = 'a'\nreason = 'r'\neffect = 'deny'\nobligations = ['explicit_approval']\n",
        5,
        "only go with effect",
    ),
    (
        "bad-argument-regex-inline",
        "[[rule]]\nid = 'a'\nreason = 'r'\neffect = 'deny'\n"
        "arguments = { CommandLine = '(unclosed' }\n",
        5,
        "bad regular expression for argument 'CommandLine'",
    ),
    (
        "bad-argument-regex-table",
        "[[rule]]\nid = 'a'\nreason = 'r'\neffect = 'deny'\n\n[rule.arguments]\n"
        "Cwd = 'ok'\nCommandLine = '*oops'\n",
        8,
        "nothing to repeat",
    ),
    (
        "argument-pattern-wrong-type",
        "[[rule]]\nid = 'a'\nreason = 'r'\neffect = 'deny'\narguments = { Cwd = 3 }\n",
        5,
        "must be a regular expression string, not an integer",
    ),
    (
        "arguments-not-a-table",
        "[[rule]]\nid = 'a'\nreason = 'r'\neffect = 'deny'\narguments = 'rm'\n",
        5,
        "must be a table",
    ),
    (
        "bad-arguments-json-regex",
        "[[rule]]\nid = 'a'\nreason = 'r'\neffect = 'deny'\narguments_json = '[a-'\n",
        5,
        "bad regular expression for 'arguments_json'",
    ),
    (
        "unsupported-version",
        "[policy]\nversion = 2\n" + VALID_RULE,
        2,
        "version 2 is not supported",
    ),
    (
        "version-wrong-type",
        "[policy]\nversion = '1'\n" + VALID_RULE,
        2,
        "must be an integer, not a string",
    ),
    (
        "bad-default",
        "[policy]\ndefault = 'maybe'\n" + VALID_RULE,
        2,
        '\'default\' must be "allow" or "deny"',
    ),
    (
        "policy-not-a-table",
        'policy = "strict"\n' + VALID_RULE,
        1,
        "must be a table",
    ),
    (
        "rule-not-array-of-tables",
        "[rule]\nid = 'a'\n",
        1,
        "[[rule]] tables",
    ),
    (
        "bad-custom-side-effect",
        "[policy]\nside_effects = ['has space']\n" + VALID_RULE,
        2,
        "must be an identifier",
    ),
    (
        "argument-pattern-repetition-count-too-large",
        "[[rule]]\nid = 'a'\nreason = 'r'\neffect = 'deny'\narguments = { x = 'a{4294967296}' }\n",
        5,
        "a repetition count is too large",
    ),
    (
        "arguments-json-groups-nested-too-deeply",
        "[[rule]]\nid = 'a'\nreason = 'r'\neffect = 'deny'\n"
        f"arguments_json = '{'(' * 5000}{')' * 5000}'\n",
        5,
        "nest too deeply to compile",
    ),
]


@pytest.mark.parametrize(
    ("text", "line", "phrase"),
    [case[1:] for case in MISTAKES],
    ids=[case[0] for case in MISTAKES],
)
def test_each_mistake_is_reported_with_its_line(
    tmp_path: Path, text: str, line: int, phrase: str
) -> None:
    mistake = only_mistake(tmp_path, text)
    assert mistake.file == str(tmp_path / "policy.toml")
    assert mistake.line == line, str(mistake)
    assert phrase in str(mistake)
    assert str(mistake).startswith(f"{tmp_path / 'policy.toml'}:{line}: ")


def test_duplicate_ids_point_at_the_second_and_name_the_first(tmp_path: Path) -> None:
    text = (
        "[[rule]]\nid = 'same'\neffect = 'deny'\nreason = 'r'\ntools = ['run_command']\n\n"
        "[[rule]]\nid = 'same'\neffect = 'deny'\nreason = 'r'\ntools = ['view_file']\n"
    )
    mistake = only_mistake(tmp_path, text)
    assert mistake.line == 8
    assert "duplicate rule id 'same' (first used on line 2)" in str(mistake)


def test_every_mistake_is_reported_in_file_order(tmp_path: Path) -> None:
    text = (
        "[policy]\n"  # 1
        "default = 'sometimes'\n"  # 2
        "\n"
        "[[rule]]\n"  # 4
        "id = 'a'\n"  # 5
        "effect = 'forbid'\n"  # 6
        "reason = 'r'\n"  # 7
        "paths = ['/abs']\n"  # 8
        "\n"
        "[[rule]]\n"  # 10
        "id = 'b'\n"  # 11
        "effect = 'deny'\n"  # 12
        "reason = 'r'\n"  # 13
        "arguments_json = '('\n"  # 14
        "colour = 'red'\n"  # 15
    )
    report = check_policy_file(write(tmp_path, text))
    assert not report.ok
    assert [error.line for error in report.errors] == [2, 6, 8, 14, 15]
    assert report.rules == ()


def test_load_raises_the_first_mistake_and_counts_the_rest(tmp_path: Path) -> None:
    text = "[[rule]]\nid = 'a'\neffect = 'nope'\nreason = 'r'\npaths = ['/x']\n"
    path = write(tmp_path, text)
    with pytest.raises(PolicyFileError) as caught:
        load_policy_rules(path)
    assert caught.value.line == 3
    assert caught.value.file == str(path)
    assert "and 1 more mistake" in str(caught.value)
    assert "jevqueue policy check" in str(caught.value)
    assert isinstance(caught.value, UsageError)


def test_a_single_mistake_is_raised_as_is(tmp_path: Path) -> None:
    path = write(tmp_path, "[[rule]]\nid = 'a'\neffect = 'deny'\n")
    with pytest.raises(PolicyFileError, match="missing 'reason'") as caught:
        load_policy_rules(path)
    assert caught.value.line == 1


def test_a_missing_file_is_a_policy_file_error(tmp_path: Path) -> None:
    with pytest.raises(PolicyFileError, match="cannot read the policy file") as caught:
        load_policy_rules(tmp_path / "absent.toml")
    assert caught.value.line is None


def test_a_directory_is_not_a_policy_file(tmp_path: Path) -> None:
    with pytest.raises(PolicyFileError, match="cannot read"):
        load_policy_rules(tmp_path)


def test_a_file_that_is_not_utf8_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "latin1.toml"
    path.write_bytes(b"[[rule]]\nid = 'a'\nreason = 'caf\xe9'\n")
    with pytest.raises(PolicyFileError, match="not UTF-8") as caught:
        load_policy_rules(path)
    assert caught.value.line == 3


def test_quoted_and_dotted_keys_still_get_their_line(tmp_path: Path) -> None:
    text = (
        "[[rule]]\n"
        '"id" = "a"\n'
        "effect = 'deny'\n"
        "reason = 'r'\n"
        "arguments.Cwd = 'ok'\n"
        "arguments.'CommandLine' = '(bad'\n"
    )
    mistake = only_mistake(tmp_path, text)
    assert mistake.line == 6


def test_multiline_strings_do_not_confuse_the_line_count(tmp_path: Path) -> None:
    text = (
        "[[rule]]\n"
        "id = 'a'\n"
        'reason = """\n'
        "A reason over\n"
        "[[rule]]\n"
        'three lines"""\n'
        "effect = 'deny'\n"
        "paths = ['../x']\n"
    )
    mistake = only_mistake(tmp_path, text)
    assert mistake.line == 8


@pytest.mark.parametrize("nesting", ["[" * 5000 + "]" * 5000, "{a=" * 2000 + "1" + "}" * 2000])
def test_toml_nested_too_deeply_is_a_mistake_not_a_crash(tmp_path: Path, nesting: str) -> None:
    mistake = only_mistake(tmp_path, f"x = {nesting}\n" + VALID_RULE)
    assert "nests arrays or inline tables too deeply" in str(mistake)
    with pytest.raises(PolicyFileError, match="too deeply"):
        load_policy_rules(tmp_path / "policy.toml")


@pytest.mark.parametrize("path", [None, 3, b"policy.toml", ["policy.toml"]])
def test_something_other_than_a_path_is_a_mistake_not_a_crash(path: object) -> None:
    report = check_policy_file(path)  # type: ignore[arg-type]
    assert not report.ok and "a policy file is a path" in str(report.errors[0])
    with pytest.raises(PolicyFileError, match="a policy file is a path"):
        load_policy_rules(path)  # type: ignore[arg-type]
