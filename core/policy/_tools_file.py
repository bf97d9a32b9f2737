"""Tool declarations as plain data: a TOML tools file that the CLI and the MCP proxy read.

The same facts a plugin's ``tool_spec(...)`` declares, one ``[[tool]]`` table per tool::

    [[tool]]
    name = "write_file"
    side_effects = ["file_write"]
    path_fields = ["path"]
    content_fields = ["content"]

    [[tool]]
    name = "run_tests"
    side_effects = ["shell_command"]
    cwd_field = "cwd"
    content_fields = ["command"]
    description = "Run the test suite in a directory."   # optional: the reviewed description

    [tool.schema]              # optional: a JSON Schema the arguments must satisfy
    type = "object"
    required = ["command"]
    properties.command = { type = "string" }
    properties.cwd = { type = "string" }

Keys: ``name`` and ``side_effects`` are required; ``path_fields``, ``cwd_field``,
``content_fields``, ``schema``, ``description``, ``output_trust`` (``"trusted"`` or
``"untrusted"``), ``origin``, ``literal_paths`` and ``paths_as_written`` (booleans, see
:class:`~jevqueue.policy.ToolSpec`) are optional. ``schema`` and ``description`` are the tool
as its server lists it (``jevqueue mcp-proxy --describe`` prints both): a plugin in front of
someone else's tools withdraws a tool listed otherwise (:class:`~jevqueue.policy.ListingPins`);
neither is part of an action digest. ``required_path_fields`` defaults to every
path field and the ``cwd_field`` — a call that leaves one out is refused — and can be set
to a shorter list (``[]`` makes them all optional). Any other key is a mistake, reported
with its line and the nearest known key, never ignored: a misspelt ``path_field`` would
otherwise leave a write tool's target unchecked.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from jevqueue.errors import ConfigurationError, PolicyFileError, ToolsFileError
from jevqueue.policy._registry import ToolSpec
from jevqueue.policy_files._lines import TomlLineIndex
from jevqueue.policy_files._loader import read_toml

__all__ = ["load_tools_file"]

_KEYS = (
    "name",
    "side_effects",
    "path_fields",
    "required_path_fields",
    "cwd_field",
    "content_fields",
    "schema",
    "literal_paths",
    "paths_as_written",
    "output_trust",
    "origin",
    "description",
)
_LISTS = ("side_effects", "path_fields", "required_path_fields", "content_fields")


def load_tools_file(path: str | Path) -> tuple[ToolSpec, ...]:
    """Read a TOML tools file into one :class:`~jevqueue.policy.ToolSpec` per ``[[tool]]``.

    Args:
        path: the tools file.

    Returns:
        The declarations in file order, ready for ``specs=`` of any plugin.

    Raises:
        ToolsFileError: the file cannot be read, is not TOML, or declares a tool
            impossibly; ``.file`` and ``.line`` point at the mistake.
    """
    if not isinstance(path, (str, Path)):
        raise ToolsFileError(
            repr(path)[:80],
            None,
            f"a tools file is a path (str or Path), not {type(path).__name__}",
        )
    file = str(path)
    try:
        raw = Path(path).read_bytes()
    except OSError as error:
        raise ToolsFileError(
            file, None, f"cannot read the tools file: {error.strerror or type(error).__name__}"
        ) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        line = raw[: error.start].count(b"\n") + 1
        raise ToolsFileError(file, line, "the file is not UTF-8 text; save it as UTF-8") from None
    document = read_toml(file, text, ToolsFileError)
    lines = TomlLineIndex(text)
    extra = sorted(key for key in document if key != "tool")
    if extra:
        raise ToolsFileError(
            file,
            lines.line_of((extra[0],)),
            f"unknown top-level key {extra[0]!r}: a tools file holds only [[tool]] tables",
        )
    tables = document.get("tool", [])
    if not isinstance(tables, list) or not tables:
        raise ToolsFileError(
            file, lines.line_of(("tool",)), "declare each tool in a [[tool]] table"
        )
    specs: list[ToolSpec] = []
    seen: dict[str, int] = {}
    for index, table in enumerate(tables):
        spec = _spec(file, lines, index, table)
        if spec.name in seen:
            raise ToolsFileError(
                file,
                lines.line_of(("tool", index, "name")),
                f"tool {spec.name!r} is declared twice (first as tool #{seen[spec.name] + 1}); "
                "declare each tool once",
            )
        seen[spec.name] = index
        specs.append(spec)
    return tuple(specs)


def _spec(file: str, lines: TomlLineIndex, index: int, table: Mapping[str, Any]) -> ToolSpec:
    def fail(key: str | None, message: str) -> PolicyFileError:
        where = ("tool", index) if key is None else ("tool", index, key)
        return ToolsFileError(file, lines.line_of(where), message)

    if not isinstance(table, Mapping):
        raise fail(
            None,
            f"tool #{index + 1} is {_kind(table)}, not a table: declare each tool in a "
            "[[tool]] table",
        )
    for key in table:
        if key not in _KEYS:
            near = difflib.get_close_matches(key, _KEYS, n=1)
            hint = f"; did you mean {near[0]!r}?" if near else f"; known keys: {', '.join(_KEYS)}"
            raise fail(key, f"unknown key {key!r} in a [[tool]] table{hint}")
    for key in ("name", "side_effects"):
        if key not in table:
            raise fail(None, f"tool #{index + 1} has no {key!r}; every [[tool]] needs one")
    for key in _LISTS:
        if key in table and not isinstance(table[key], list):
            raise fail(key, f'{key!r} must be a list of strings, such as ["path"]')
    if "schema" in table and not isinstance(table["schema"], dict):
        raise fail("schema", "'schema' must be a table (a JSON Schema written in TOML)")
    if "description" in table and not isinstance(table["description"], str):
        raise fail(
            "description",
            f"tool {str(table['name'])[:80]!r}: 'description' must be a string (the tool's "
            f"description as its server lists it), not {_kind(table['description'])}; quote "
            'it as --describe prints it: description = "..."',
        )
    try:
        return ToolSpec.declare(
            table["name"],
            side_effects=table["side_effects"],
            path_fields=table.get("path_fields", ()),
            required_path_fields=table.get("required_path_fields"),
            cwd_field=table.get("cwd_field"),
            content_fields=table.get("content_fields", ()),
            schema=table.get("schema"),
            literal_paths=table.get("literal_paths", False),
            paths_as_written=table.get("paths_as_written", False),
            output_trust=table.get("output_trust", "untrusted"),
            origin=table.get("origin"),
            description=table.get("description"),
        )
    except ConfigurationError as error:
        message = str(error)
        if "unknown side effect" in message:
            raise fail("side_effects", message) from None  # the line of the typo
        raise fail(None, message) from None


def _kind(value: object) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return f"a {type(value).__name__}"
