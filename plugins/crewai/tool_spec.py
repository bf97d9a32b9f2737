"""Declaring a CrewAI tool to the policy registry, once, from the tool itself."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from crewai.tools import BaseTool
from crewai.utilities.string_utils import sanitize_tool_name
from jevqueue.errors import ConfigurationError
from jevqueue.registry import ToolSpec

__all__ = ["tool_spec"]


def tool_spec(
    tool: BaseTool,
    *,
    side_effects: Iterable[str],
    path_fields: Iterable[str] = (),
    required_path_fields: Iterable[str] | None = None,
    cwd_field: str | None = None,
    content_fields: Iterable[str] = (),
    with_schema: bool = True,
) -> ToolSpec:
    """The registry declaration of a CrewAI tool, under the name CrewAI dispatches it by.

    Args:
        tool: The CrewAI tool (a ``BaseTool`` or ``@tool`` function).
        side_effects: What the tool does, e.g. ``{"network"}`` or ``{"file_write"}``.
        path_fields: Argument names that hold file paths.
        required_path_fields: Path fields a call must carry (default: all of them).
        cwd_field: The argument naming a working directory, for shell-like tools.
        content_fields: Where the tool's payload lives (credential scanning reads these).
        with_schema: Also require the arguments to satisfy the tool's own argument schema.

    Returns:
        A :class:`~jevqueue.registry.ToolSpec` named ``sanitize_tool_name(tool.name)``.

    Raises:
        ConfigurationError: ``tool`` is not a CrewAI tool, or a field is malformed.
    """
    if not isinstance(tool, BaseTool):
        raise ConfigurationError(
            f"tool_spec needs a CrewAI BaseTool (or @tool function), not {type(tool).__name__}"
        )
    paths = path_fields if isinstance(path_fields, str) else tuple(path_fields)
    schema: dict[str, Any] | None = None
    if with_schema and tool.args_schema is not None and tool.args_schema.model_fields:
        schema = tool.args_schema.model_json_schema()
    return ToolSpec(
        name=sanitize_tool_name(tool.name),
        side_effects=side_effects,  # type: ignore[arg-type]  # ToolSpec refuses a bare str
        path_fields=paths,
        required_path_fields=paths if required_path_fields is None else tuple(required_path_fields),
        cwd_field=cwd_field,
        content_fields=tuple(content_fields),
        schema=schema,
    )
