"""Declaring an MCP tool to the policy registry, and suggesting a declaration from its listing.

:func:`tool_spec` is the plugin's one declaration function, named after the name MCP
dispatches the tool by. :func:`suggest_specs` and :func:`describe_tools` write the
starting tools file ``jevqueue mcp-proxy --describe`` prints: a *suggestion* read from the
upstream's ``inputSchema`` and annotations, for a person to check. Annotations are the
upstream's word about itself, so they only ever make a suggestion stricter:
``readOnlyHint`` alone never drops an effect the names and schema suggest.

Path-named fields are declared as path fields when they hold a string or a list of strings
(each element judged and resolved like a single path); a tool that moves or renames
declares ``file_delete`` beside ``file_write``, since a move removes its source. The
``[tool.schema]`` printed is the upstream's ``inputSchema`` verbatim, and ``description`` its
description exactly (one TOML line, every control character escaped): the proxy pins both.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from jevqueue.errors import ConfigurationError
from jevqueue.policy import ToolSpec

__all__ = ["SuggestedSpec", "describe_tools", "suggest_specs", "tool_spec"]


def _as_dict(tool: Any) -> dict[str, Any]:
    if isinstance(tool, Mapping):
        return dict(tool)
    dump = getattr(tool, "model_dump", None)
    if callable(dump):
        result: dict[str, Any] = dump(by_alias=True, mode="json", exclude_none=True)
        return result
    raise ConfigurationError(
        f"an MCP tool is an mcp.types.Tool or its JSON form, not {type(tool).__name__}"
    )


def tool_spec(
    tool: Any,
    *,
    side_effects: Iterable[str],
    path_fields: Iterable[str] = (),
    required_path_fields: Iterable[str] | None = None,
    cwd_field: str | None = None,
    content_fields: Iterable[str] = (),
    with_schema: bool = True,
) -> ToolSpec:
    """The registry declaration of an MCP tool, under the name clients call it by.

    Args:
        tool: The tool as the server lists it (``mcp.types.Tool`` or its JSON form).
        side_effects: What the tool does, e.g. ``{"file_write"}``.
        path_fields: Argument names that hold file paths.
        required_path_fields: Path fields a call must carry (default: every path field and
            the ``cwd_field``).
        cwd_field: The argument naming a working directory, for shell-like tools.
        content_fields: Where the tool's payload lives (credential scanning reads these).
        with_schema: Also require the arguments to satisfy the tool's ``inputSchema``.

    Returns:
        A :class:`~jevqueue.policy.ToolSpec` named ``tool.name``.

    Raises:
        ConfigurationError: ``tool`` is not an MCP tool, or a field is malformed.
    """
    data = _as_dict(tool)
    name = data.get("name")
    if type(name) is not str:
        raise ConfigurationError("an MCP tool needs a string 'name'")
    schema = data.get("inputSchema") if with_schema else None
    return ToolSpec.declare(
        name,
        side_effects=side_effects,
        path_fields=path_fields,
        required_path_fields=required_path_fields,
        cwd_field=cwd_field,
        content_fields=content_fields,
        schema=schema if isinstance(schema, Mapping) else None,
    )


# Argument names that usually hold one path, a working directory, or a payload.
_PATH_NAME = re.compile(
    r"(^|_)(paths?|files?|filenames?|filepaths?|dirs?|directory|directories|folders?|source|"
    r"destination|target)$",
    re.IGNORECASE,
)
_CWD_NAME = re.compile(r"^(cwd|working_dir|working_directory|workdir)$", re.IGNORECASE)
_CONTENT_NAME = re.compile(
    r"^(content|contents|text|body|data|command|cmd|script|code|message|new_text|edits)$",
    re.IGNORECASE,
)
_DELETE_NAME = re.compile(r"(delete|remove|unlink|rmdir|erase)", re.IGNORECASE)
# A move or rename removes its source: moveFile, move_file, file.rename, mv.
_MOVE_NAME = re.compile(r"(?i:(^|[_.\-])(move|rename|mv)([_.\-]|$))|^(?i:move|rename)[A-Z]")
_SHELL_NAME = re.compile(r"(exec|shell|command|run_|terminal|bash)", re.IGNORECASE)
_READ_NAME = re.compile(
    r"^(read|get|list|search|show|view|find|stat|status|diff|log|describe)", re.IGNORECASE
)


@dataclass(frozen=True)
class SuggestedSpec:
    """One suggested ``[[tool]]`` table, with the notes a reviewer should read.

    ``description`` is the upstream's, exactly as listed (``None``: it lists none).
    """

    name: str
    side_effects: tuple[str, ...]
    path_fields: tuple[str, ...]
    cwd_field: str | None
    content_fields: tuple[str, ...]
    schema: Mapping[str, Any] | None
    notes: tuple[str, ...]
    description: str | None
    declarable: bool = True


def _string_list(definition: Any) -> bool:
    """Whether a property's schema is an array of strings."""
    if not isinstance(definition, Mapping) or definition.get("type") != "array":
        return False
    items = definition.get("items")
    return isinstance(items, Mapping) and items.get("type") == "string"


def suggest_specs(tools: Iterable[Any]) -> list[SuggestedSpec]:
    """Suggest a declaration for each listed tool (the strictest plausible reading)."""
    suggestions = []
    for tool in tools:
        data = _as_dict(tool)
        name = str(data.get("name", ""))
        schema = data.get("inputSchema") if isinstance(data.get("inputSchema"), Mapping) else {}
        properties = schema.get("properties", {}) if isinstance(schema, Mapping) else {}
        annotations = data.get("annotations") or {}
        description = data.get("description")
        notes: list[str] = []
        paths: list[str] = []
        declarable = True
        cwd: str | None = None
        contents: list[str] = []
        for field, definition in properties.items() if isinstance(properties, Mapping) else ():
            kind = definition.get("type") if isinstance(definition, Mapping) else None
            if _CWD_NAME.match(field) and kind == "string":
                cwd = field
            elif _PATH_NAME.search(field):
                if kind == "string" or _string_list(definition):
                    paths.append(field)
                else:
                    declarable = False
                    notes.append(
                        f"left out: {field!r} holds paths in a {kind or 'non-string'} value, "
                        "and only a path field holding a string or a list of strings is "
                        "checked against the workspace, so the proxy refuses this tool "
                        "unless you declare it knowingly"
                    )
            elif _CONTENT_NAME.match(field):
                contents.append(field)
        read_only = annotations.get("readOnlyHint") is True
        destructive = annotations.get("destructiveHint") is True
        effects: set[str] = set()
        if cwd is not None or _SHELL_NAME.search(name):
            effects.add("shell_command")
        if _DELETE_NAME.search(name):
            effects.add("file_delete")
        if _MOVE_NAME.search(name) and paths:
            effects.update(("file_delete", "file_write"))
            notes.append(
                "a move removes its source: declared file_delete beside file_write (the "
                "default policy asks for an approval of each one)"
            )
        if paths:
            looks_read = read_only or bool(_READ_NAME.match(name))
            if destructive or not looks_read:
                effects.add("file_write")
            else:
                effects.add("file_read")
        if annotations.get("openWorldHint") is True:
            effects.add("network")
        if read_only and effects & {"file_write", "file_delete", "shell_command"}:
            notes.append("the upstream says readOnlyHint, but its name or fields suggest writes")
        if not annotations:
            notes.append("the upstream gives no annotations: effects guessed from names only")
        if "shell_command" in effects and cwd is None:
            notes.append("a shell tool without a working-directory field is denied by default")
        suggestions.append(
            SuggestedSpec(
                name=name,
                side_effects=tuple(sorted(effects)),
                path_fields=tuple(paths),
                cwd_field=cwd,
                content_fields=tuple(contents),
                schema=schema or None,
                notes=tuple(notes),
                description=description if isinstance(description, str) else None,
                declarable=declarable,
            )
        )
    return suggestions


_TOML_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\t": "\\t",
    "\n": "\\n",
    "\f": "\\f",
    "\r": "\\r",
}
_SURROGATE = re.compile("[\ud800-\udfff]")


def _control(char: str) -> bool:
    """Whether TOML requires ``char`` escaped in a string (and forbids it in a comment)."""
    return (char < " " and char != "\t") or char == "\x7f"


def _toml_string(text: str) -> str:
    """``text`` as a one-line TOML basic string: quotes, backslashes, line breaks and every
    other control character (DEL included, which JSON leaves as it is) escaped."""
    escaped = []
    for char in text:
        if char in _TOML_ESCAPES:
            escaped.append(_TOML_ESCAPES[char])
        elif _control(char):
            escaped.append(f"\\u{ord(char):04X}")
        else:
            escaped.append(char)
    return '"' + "".join(escaped) + '"'


def _toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else _toml_string(key)


def _toml_value(value: Any) -> str | None:
    """A JSON value as TOML (``None`` for null, which TOML cannot say: the key is left out)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return json.dumps(value)
    if isinstance(value, str):
        return _toml_string(value)
    if isinstance(value, list):
        items = [item for item in (_toml_value(v) for v in value) if item is not None]
        return "[" + ", ".join(items) + "]"
    if isinstance(value, Mapping):
        pairs = []
        for key, item in value.items():
            text = _toml_value(item)
            if text is not None:
                pairs.append(f"{_toml_key(str(key))} = {text}")
        return "{ " + ", ".join(pairs) + " }" if pairs else "{}"
    raise ConfigurationError(f"a tool schema holds a {type(value).__name__}, not JSON")


def _strings(values: Iterable[str]) -> str:
    return "[" + ", ".join(_toml_string(value) for value in values) + "]"


def describe_tools(tools: Iterable[Any], *, source: str = "", resources: bool = False) -> str:
    """A starting tools file (TOML, ``jevqueue.load_tools_file`` reads it) for ``tools``.

    Args:
        tools: the upstream's ``tools/list`` entries.
        source: the upstream, named in the header.
        resources: the upstream offers resources: add a ``resources/read`` table,
            commented out (declaring it relays resources, each read judged).
    """
    lines = [
        "# jevqueue tools file: what each tool of the server does, for the policy.",
        *([f"# Suggested from the tools/list of: {source}"] if source else []),
        "# Review every table: the suggestions come from the server's own schema and",
        "# annotations, which the proxy does not trust. A tool left out is refused.",
        "# Each description and [tool.schema] is what the server lists, pinned: the proxy",
        "# refuses a tool listed with another, and any argument its schema does not name.",
        "# Read each description: it is what the model reads about the tool.",
    ]
    for suggestion in suggest_specs(tools):
        lines.append("")
        notes = list(suggestion.notes)
        description = suggestion.description
        if description is not None and _SURROGATE.search(description):
            notes.append(
                "its description holds unpaired surrogates, which TOML cannot write: it is "
                "left out, and pinned only for the life of each proxy"
            )
            description = None
        if description and description.strip():
            first = description.strip().splitlines()[0][:100]
            # A comment holds no control character (TOML): the description line is exact.
            lines.append("# " + "".join(" " if _control(char) else char for char in first))
        lines.extend(f"# NOTE: {note}" for note in notes)
        start = len(lines)
        lines.append("[[tool]]")
        lines.append(f"name = {_toml_string(suggestion.name)}")
        lines.append(f"side_effects = {_strings(suggestion.side_effects)}")
        if suggestion.path_fields:
            lines.append(f"path_fields = {_strings(suggestion.path_fields)}")
        if suggestion.cwd_field:
            lines.append(f"cwd_field = {_toml_string(suggestion.cwd_field)}")
        if suggestion.content_fields:
            lines.append(f"content_fields = {_strings(suggestion.content_fields)}")
        if description is not None:
            lines.append(f"description = {_toml_string(description)}")
        if suggestion.schema:
            lines.append("")
            lines.append("[tool.schema]")
            for key, value in suggestion.schema.items():
                text = _toml_value(value)
                if text is not None:
                    lines.append(f"{_toml_key(str(key))} = {text}")
        if not suggestion.declarable:
            lines[start:] = [f"# {line}" if line else "#" for line in lines[start:]]
    if resources:
        lines.extend(
            [
                "",
                "# The server offers resources. Declare resources/read to relay them: each",
                "# read is judged as a call of it (a file:// URI as the path field 'path',",
                "# inside the workspace) and audited. Left out, resources are not offered.",
                "# [[tool]]",
                '# name = "resources/read"',
                '# side_effects = ["file_read"]',
                '# path_fields = ["path"]',
            ]
        )
    return "\n".join(lines) + "\n"
