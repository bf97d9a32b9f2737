"""The TOML tools file: the plain-data form of a tool declaration."""

from __future__ import annotations

from pathlib import Path

import pytest
from jevqueue import ExecutionContext, ToolRegistry, ToolsFileError, load_tools_file
from jevqueue.errors import InvalidToolArgumentsError
from jevqueue.policy import Action

GOOD = """\
[[tool]]
name = "write_file"
side_effects = ["file_write"]
path_fields = ["path"]
content_fields = ["content"]

[[tool]]
name = "run_tests"
side_effects = ["shell_command"]
cwd_field = "cwd"
required_path_fields = []

[tool.schema]
type = "object"
required = ["command"]
properties.command = { type = "string" }
properties.cwd = { type = "string" }
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "tools.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_reads_every_declared_fact(tmp_path: Path) -> None:
    write_file, run_tests = load_tools_file(write(tmp_path, GOOD))
    assert write_file.name == "write_file"
    assert write_file.side_effects == frozenset({"file_write"})
    assert write_file.path_fields == ("path",)
    assert write_file.required_path_fields == ("path",)  # path fields are required by default
    assert write_file.content_fields == ("content",)
    assert run_tests.cwd_field == "cwd"
    assert run_tests.required_path_fields == ()
    assert run_tests.schema == {
        "type": "object",
        "required": ["command"],
        "properties": {"command": {"type": "string"}, "cwd": {"type": "string"}},
    }


def test_declarations_govern_calls(tmp_path: Path) -> None:
    registry = ToolRegistry(load_tools_file(write(tmp_path, GOOD)))
    context = ExecutionContext(
        task_id="t", actor_id="a", workspace=str(tmp_path), git_sha="0123456789abcdef"
    )
    with pytest.raises(InvalidToolArgumentsError):
        Action.build(registry, "write_file", {"content": "x"}, context)  # no target
    with pytest.raises(InvalidToolArgumentsError):
        Action.build(registry, "run_tests", {"command": 3}, context)  # schema


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        (
            '[[tool]]\nname = "w"\nside_effects = ["file_write"]\npath_field = ["p"]\n',
            4,
            "did you mean 'path_fields'",
        ),
        ('[[tool]]\nname = "w"\n', 1, "no 'side_effects'"),
        ('[[tool]]\nname = "w"\nside_effects = "file_write"\n', 3, "must be a list"),
        (
            '[[tool]]\nname = "w"\nside_effects = ["share"]\n'
            '[[tool]]\nname = "w"\nside_effects = []\n',
            5,
            "declared twice",
        ),
        ('[[tool]]\nname = "bad name!"\nside_effects = []\n', 1, "tool name"),
        (
            '[[tool]]\nname = "w"\nside_effects = []\ncwd_field = "c"\npath_fields = ["c"]\n',
            1,
            "both the cwd_field",
        ),
        ("tools = 1\n", 1, "unknown top-level key"),
        ("", None, "[[tool]]"),
        ("[[tool]\n", 1, "TOML syntax error"),
        ("tool = [1]\n", 1, "tool #1 is a number, not a table"),
        ('tool = ["write_file"]\n', 1, "tool #1 is a string, not a table"),
        (
            '[[tool]]\nname = "w"\nside_effects = []\n' + "x = " + "[" * 5000 + "]" * 5000,
            None,
            "too deeply",
        ),
    ],
)
def test_mistakes_name_file_and_line(
    tmp_path: Path, text: str, line: int | None, words: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ToolsFileError) as raised:
        load_tools_file(path)
    assert raised.value.file == str(path)
    assert raised.value.line == line
    assert words in str(raised.value)


def test_missing_file_and_wrong_argument_type(tmp_path: Path) -> None:
    with pytest.raises(ToolsFileError, match="cannot read the tools file"):
        load_tools_file(tmp_path / "absent.toml")
    with pytest.raises(ToolsFileError, match="is a path"):
        load_tools_file(["tools.toml"])  # type: ignore[arg-type]


def test_an_unknown_side_effect_names_its_line_and_the_nearest_name(tmp_path: Path) -> None:
    path = write(
        tmp_path, '[[tool]]\nname = "w"\npath_fields = ["p"]\nside_effects = ["file_wirte"]\n'
    )
    with pytest.raises(ToolsFileError) as raised:
        load_tools_file(path)
    assert raised.value.line == 4
    assert "did you mean 'file_write'" in str(raised.value).lower()


def test_a_description_is_read_exactly_and_kept_out_of_the_action_digest(tmp_path: Path) -> None:
    """``description`` pins the reviewed text (a plugin in front of someone else's tools
    withdraws a tool listed with another); it is not policy, so no digest changes."""
    text = (
        '[[tool]]\nname = "write_file"\nside_effects = ["file_write"]\npath_fields = ["path"]\n'
        'description = "Write a file.\\nSay \\"why\\" first.\\t\\u007f"\n'
    )
    (described,) = load_tools_file(write(tmp_path, text))
    assert described.description == 'Write a file.\nSay "why" first.\t\x7f'
    (plain,) = load_tools_file(write(tmp_path, text.rsplit("description", 1)[0]))
    assert plain.description is None
    context = ExecutionContext(
        task_id="t", actor_id="a", workspace=str(tmp_path), git_sha="0123456789abcdef"
    )
    digests = {
        Action.build(ToolRegistry([spec]), "write_file", {"path": "a.txt"}, context).digest
        for spec in (described, plain)
    }
    assert len(digests) == 1


@pytest.mark.parametrize("value", ["3", "true", '["Write a file."]', '{ text = "x" }'])
def test_a_description_that_is_not_a_string_names_file_line_tool_and_fix(
    tmp_path: Path, value: str
) -> None:
    path = write(
        tmp_path, f'[[tool]]\nname = "write_file"\nside_effects = []\ndescription = {value}\n'
    )
    with pytest.raises(ToolsFileError) as raised:
        load_tools_file(path)
    assert raised.value.file == str(path) and raised.value.line == 4
    message = str(raised.value)
    assert "tool 'write_file': 'description' must be a string" in message
    assert 'description = "..."' in message  # what to write instead


def test_a_misspelt_description_is_a_mistake_not_ignored(tmp_path: Path) -> None:
    path = write(tmp_path, '[[tool]]\nname = "w"\nside_effects = []\ndescripton = "x"\n')
    with pytest.raises(ToolsFileError, match="did you mean 'description'"):
        load_tools_file(path)
