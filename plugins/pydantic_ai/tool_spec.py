"""Declaring a Pydantic AI tool to the policy registry, once, from the tool itself."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from jevqueue.errors import ConfigurationError
from jevqueue.plugins.pydantic_ai._framework import Tool, ToolDefinition
from jevqueue.policy import ToolSpec

__all__ = ["tool_spec"]


def tool_spec(
    tool: Tool[Any] | ToolDefinition,
    *,
    side_effects: Iterable[str],
    path_fields: Iterable[str] = (),
    required_path_fields: Iterable[str] | None = None,
    cwd_field: str | None = None,
    content_fields: Iterable[str] = (),
    with_schema: bool = True,
    output_trust: str = "untrusted",
) -> ToolSpec:
    """The registry declaration of a Pydantic AI tool, under the name the agent calls it by.

    Args:
        tool: A ``pydantic_ai.Tool`` (or its ``ToolDefinition``). For a function
            registered with ``@agent.tool``, wrap it: ``tool_spec(Tool(func), ...)``.
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
        A :class:`~jevqueue.policy.ToolSpec` named ``tool.name``.

    Raises:
        ConfigurationError: ``tool`` is not a Pydantic AI tool, a field is not one of its
            parameters, or a field is malformed.
    """
    if isinstance(tool, Tool):
        definition = tool.tool_def
    elif isinstance(tool, ToolDefinition):
        definition = tool
    else:
        raise ConfigurationError(
            f"tool_spec needs a pydantic_ai Tool or ToolDefinition, not {type(tool).__name__}; "
            "wrap a plain function as Tool(function)"
        )
    paths = tuple(path_fields)
    required = (
        (*paths, *((cwd_field,) if cwd_field else ()))
        if required_path_fields is None
        else tuple(required_path_fields)
    )
    contents = tuple(content_fields)
    parameters = set((definition.parameters_json_schema or {}).get("properties") or {})
    named = [*paths, *required, *((cwd_field,) if cwd_field else ())]
    named += [str(field).split("/", 1)[0] for field in contents]
    unknown = sorted({str(field) for field in named if field not in parameters})
    if unknown:
        raise ConfigurationError(
            f"tool {definition.name!r}: {unknown} are not parameters of the tool (it has "
            f"{sorted(parameters)}); name path, cwd and content fields by their parameter names"
        )
    schema = definition.parameters_json_schema if with_schema else None
    return ToolSpec.declare(
        definition.name,
        side_effects=side_effects,
        path_fields=paths,
        required_path_fields=required_path_fields,
        cwd_field=cwd_field,
        content_fields=contents,
        schema=schema or None,
        output_trust=output_trust,
    )
