"""Declaring a Hermes tool to the policy registry, once, from its schema."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from jevqueue.errors import ConfigurationError
from jevqueue.plugins.hermes._framework import tool_registry
from jevqueue.policy import ToolSpec

__all__ = ["tool_spec"]


def _schema(tool: str | Mapping[str, Any]) -> Mapping[str, Any]:
    if isinstance(tool, str):
        schema = tool_registry.get_schema(tool)
        if not schema:
            raise ConfigurationError(
                f"Hermes has no registered tool {tool!r}: register it first, or pass its schema"
            )
        return schema
    if isinstance(tool, Mapping):
        function = tool.get("function")
        return function if isinstance(function, Mapping) else tool
    raise ConfigurationError(
        f"tool_spec needs a Hermes tool name or schema dict, not {type(tool).__name__}"
    )


def tool_spec(
    tool: str | Mapping[str, Any],
    *,
    side_effects: Iterable[str],
    path_fields: Iterable[str] = (),
    required_path_fields: Iterable[str] | None = None,
    cwd_field: str | None = None,
    content_fields: Iterable[str] = (),
    with_schema: bool = True,
    output_trust: str = "untrusted",
) -> ToolSpec:
    """The registry declaration of a Hermes tool, under the name Hermes dispatches it by.

    Args:
        tool: A tool name registered with Hermes' tool registry, or its schema
            (``{"name", "description", "parameters"}``, either OpenAI shape).
        side_effects: What the tool does, e.g. ``{"network"}`` or ``{"file_write"}``.
        path_fields: Argument names that hold file paths.
        required_path_fields: Path fields a call must carry (default: every path field and
            the ``cwd_field``).
        cwd_field: The argument naming a working directory, for shell-like tools.
        content_fields: Where the tool's payload lives (credential scanning reads these).
        with_schema: Also require the arguments to satisfy the tool's parameters schema.
        output_trust: How far what the tool returns is trusted: ``"untrusted"`` (the
            default: e-mail, web pages, messages, files others wrote) or ``"trusted"``
            (the user's own data or the system's). A value the agent read in an untrusted
            output is labelled so when it reaches another call's arguments.

    Returns:
        A :class:`~jevqueue.policy.ToolSpec` named after the schema's ``name``.

    Raises:
        ConfigurationError: The tool is unknown, a field is not one of its parameters, or
            a field is malformed.
    """
    schema = _schema(tool)
    name = schema.get("name")
    if not isinstance(name, str) or not name:
        raise ConfigurationError(f"the tool schema has no name: {dict(schema)!r}")
    parameters = schema.get("parameters") or {}
    known = set(parameters.get("properties") or {})
    paths = tuple(path_fields)
    required = (
        (*paths, *((cwd_field,) if cwd_field else ()))
        if required_path_fields is None
        else tuple(required_path_fields)
    )
    contents = tuple(content_fields)
    named = [*paths, *required, *((cwd_field,) if cwd_field else ())]
    named += [str(field).split("/", 1)[0] for field in contents]
    unknown = sorted({str(field) for field in named if field not in known})
    if unknown:
        raise ConfigurationError(
            f"tool {name!r}: {unknown} are not parameters of the tool (it has "
            f"{sorted(known)}); name path, cwd and content fields by their parameter names"
        )
    return ToolSpec.declare(
        name,
        side_effects=side_effects,
        path_fields=paths,
        required_path_fields=required_path_fields,
        cwd_field=cwd_field,
        content_fields=contents,
        schema=dict(parameters) if with_schema and parameters else None,
        output_trust=output_trust,
    )
