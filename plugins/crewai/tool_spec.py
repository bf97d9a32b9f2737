"""Declaring a CrewAI tool to the policy registry, once, from the tool itself."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from crewai.tools import BaseTool
from crewai.utilities.string_utils import sanitize_tool_name
from jevqueue.errors import ConfigurationError
from jevqueue.policy import ToolSpec

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
    output_trust: str = "untrusted",
) -> ToolSpec:
    """The registry declaration of a CrewAI tool, under the name CrewAI dispatches it by.

    Args:
        tool: The CrewAI tool (a ``BaseTool`` or ``@tool`` function).
        side_effects: What the tool does, e.g. ``{"network"}`` or ``{"file_write"}``.
        path_fields: Argument names that hold file paths.
        required_path_fields: Path fields a call must carry (default: every path field and
            the ``cwd_field``).
        cwd_field: The argument naming a working directory, for shell-like tools.
        content_fields: Where the tool's payload lives (credential scanning reads these).
        with_schema: Also require the arguments to satisfy the tool's own argument schema.
        output_trust: ``"untrusted"`` (the default: an e-mail, a web page, a file anyone
            could have written) or ``"trusted"`` (a clock, your own database): a value the
            agent read in an untrusted output is labelled so when a later call carries it.

    Returns:
        A :class:`~jevqueue.policy.ToolSpec` named ``sanitize_tool_name(tool.name)``.

    Raises:
        ConfigurationError: ``tool`` is not a CrewAI tool, a field is malformed, or
            ``output_trust`` is neither ``"trusted"`` nor ``"untrusted"``.
    """
    if not isinstance(tool, BaseTool):
        raise ConfigurationError(
            f"tool_spec needs a CrewAI BaseTool (or @tool function), not {type(tool).__name__}"
        )
    schema: dict[str, Any] | None = None
    if with_schema and tool.args_schema is not None and tool.args_schema.model_fields:
        schema = tool.args_schema.model_json_schema()
    return ToolSpec.declare(
        sanitize_tool_name(tool.name),
        side_effects=side_effects,
        path_fields=path_fields,
        required_path_fields=required_path_fields,
        cwd_field=cwd_field,
        content_fields=content_fields,
        schema=schema,
        output_trust=output_trust,
    )
