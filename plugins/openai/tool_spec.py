"""Declaring an OpenAI-style tool to the policy, once, from its schema."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from jevqueue.governor import normalize_tool
from jevqueue.policy import ToolSpec

__all__ = ["tool_spec"]


def tool_spec(
    tool: Mapping[str, Any],
    *,
    side_effects: Iterable[str],
    path_fields: Iterable[str] = (),
    required_path_fields: Iterable[str] | None = None,
    cwd_field: str | None = None,
    content_fields: Iterable[str] = (),
    with_schema: bool = True,
    output_trust: str = "untrusted",
) -> ToolSpec:
    """The declaration of a tool the model is offered, under the name it calls it by.

    Args:
        tool: The tool schema, in either OpenAI shape (``{"type": "function", "function":
            {...}}`` or ``{"name": ..., "parameters": ...}``).
        side_effects: What the tool does, e.g. ``{"file_read"}`` or ``{"network"}``.
        path_fields: Argument names that hold file paths.
        required_path_fields: Path fields a call must carry (default: every path field and
            the ``cwd_field``).
        cwd_field: The argument naming a working directory, for shell-like tools.
        content_fields: Where the tool's payload lives (credential scanning reads these).
        with_schema: Also require the arguments to satisfy the tool's ``parameters``.
        output_trust: ``"untrusted"`` (the default: e-mail, web pages, messages, files
            others wrote) or ``"trusted"`` (the user's own or the system's data): how far
            a value read in what the tool returns is trusted when it reaches another call.

    Returns:
        A :class:`~jevqueue.ToolSpec` for :class:`PolicyToolRunner`'s ``specs=``.

    Raises:
        InvalidToolSchemaError: ``tool`` is in neither OpenAI shape.
        ConfigurationError: a field is malformed.
    """
    schema = normalize_tool(tool)
    return ToolSpec.declare(
        schema.name,
        side_effects=side_effects,
        path_fields=path_fields,
        required_path_fields=required_path_fields,
        cwd_field=cwd_field,
        content_fields=content_fields,
        schema=dict(schema.parameters) if with_schema else None,
        output_trust=output_trust,
    )
