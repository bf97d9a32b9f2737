"""Declaring an AutoGen tool to the policy registry, once, from the tool itself."""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Mapping
from typing import Any

from jevqueue.errors import ConfigurationError
from jevqueue.policy import ToolSpec

__all__ = ["tool_spec"]


def _function_schema(function: Any) -> Mapping[str, Any]:
    """A plain function's schema, as the installed AutoGen builds it (its name is the
    function's name in both worlds)."""
    try:
        from autogen.tools import Tool

        return Tool(func_or_tool=function).tool_schema["function"]  # type: ignore[no-any-return]
    except ImportError:
        pass
    try:
        from autogen_core.tools import FunctionTool
    except ImportError as exc:
        raise ConfigurationError(
            "tool_spec of a plain function needs AutoGen to read its schema: "
            'pip install "jevqueue[autogen]" or "jevqueue[ag2]"'
        ) from exc
    return FunctionTool(function, description=function.__doc__ or "").schema


def _schema_of(tool: Any) -> Mapping[str, Any]:
    """The tool's ``{"name", "description", "parameters"}`` as the framework sends it."""
    if isinstance(tool, Mapping):
        function = tool.get("function")
        schema = function if isinstance(function, Mapping) else tool
    elif callable(getattr(tool, "func", None)) and isinstance(
        getattr(tool, "tool_schema", None), Mapping
    ):
        schema = tool.tool_schema["function"]  # classic AutoGen (ag2) Tool
    elif isinstance(getattr(tool, "schema", None), Mapping):
        schema = tool.schema  # AgentChat BaseTool / FunctionTool / any Tool
    elif inspect.isfunction(tool):
        schema = _function_schema(tool)
    else:
        raise ConfigurationError(
            "tool_spec needs an AutoGen tool: an AgentChat tool (FunctionTool, BaseTool), a "
            "classic AutoGen autogen.tools.Tool (wrap a function with Tool(func_or_tool=f)), "
            f"or a tool schema from a workbench's list_tools(); got {type(tool).__name__}"
        )
    if not isinstance(schema.get("name"), str) or not schema["name"]:
        raise ConfigurationError(f"the tool's schema has no name: {dict(schema)!r:.200}")
    return schema


def tool_spec(
    tool: Any,
    *,
    side_effects: Iterable[str],
    path_fields: Iterable[str] = (),
    required_path_fields: Iterable[str] | None = None,
    cwd_field: str | None = None,
    content_fields: Iterable[str] = (),
    with_schema: bool = True,
    output_trust: str = "untrusted",
) -> ToolSpec:
    """The registry declaration of an AutoGen tool, under the name AutoGen dispatches it by.

    Works for both worlds: an AgentChat tool (``FunctionTool``, any ``BaseTool``), a tool
    schema a workbench lists (``await McpWorkbench(...).list_tools()``), a classic
    AutoGen ``autogen.tools.Tool``, or a plain function (registered under its own name).

    Args:
        tool: The AutoGen tool or tool schema.
        side_effects: What the tool does, e.g. ``{"network"}`` or ``{"file_write"}``.
        path_fields: Argument names that hold file paths.
        required_path_fields: Path fields a call must carry (default: every path field and
            the ``cwd_field``).
        cwd_field: The argument naming a working directory, for shell-like tools.
        content_fields: Where the tool's payload lives (credential scanning reads these).
        with_schema: Also require the arguments to satisfy the tool's own JSON Schema.
        output_trust: ``"untrusted"`` (the default: an e-mail, a web page, a file anyone
            could have written) or ``"trusted"`` (a clock, your own database): a value the
            agent read in an untrusted output is labelled so when a later call carries it.

    Returns:
        A :class:`~jevqueue.policy.ToolSpec` named after the tool's schema name.

    Raises:
        ConfigurationError: ``tool`` is not an AutoGen tool, a field is malformed or is
            not one of the tool's parameters, or ``output_trust`` is neither
            ``"trusted"`` nor ``"untrusted"``.
    """
    schema = _schema_of(tool)
    parameters = schema.get("parameters")
    paths = tuple(path_fields)
    declared = [*paths, *([cwd_field] if cwd_field is not None else [])]
    properties = parameters.get("properties") if isinstance(parameters, Mapping) else None
    if isinstance(properties, Mapping):
        unknown = [name for name in declared if name not in properties]
        if unknown:
            raise ConfigurationError(
                f"tool {schema['name']!r}: {unknown} are not parameters of the tool "
                f"(its parameters: {sorted(properties)}); fix the path_fields / cwd_field"
            )
    return ToolSpec.declare(
        schema["name"],
        side_effects=side_effects,
        path_fields=paths,
        required_path_fields=required_path_fields,
        cwd_field=cwd_field,
        content_fields=content_fields,
        schema=dict(parameters) if with_schema and isinstance(parameters, Mapping) else None,
        output_trust=output_trust,
    )
