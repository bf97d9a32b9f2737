"""Declaring a LlamaIndex tool to the policy registry, once, from the tool itself."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from typing import Any

from jevqueue.errors import ConfigurationError
from jevqueue.plugins.llamaindex._framework import BaseTool, FunctionTool
from jevqueue.policy import ToolSpec

__all__ = ["as_tool", "check_context_annotation", "tool_spec"]


def check_context_annotation(tool: BaseTool) -> None:
    """Refuse a function tool whose ``Context`` parameter LlamaIndex cannot see.

    Under ``from __future__ import annotations`` a ``ctx: Context`` annotation is the
    string ``"Context"``; LlamaIndex compares the annotation with the class, so it neither
    injects the workflow context nor leaves the parameter out of the schema the model sees.

    Raises:
        ConfigurationError: The tool's function has such a parameter.
    """
    if not isinstance(tool, FunctionTool) or tool.requires_context:
        return
    try:
        parameters = inspect.signature(tool.real_fn).parameters.values()
    except (TypeError, ValueError):
        return
    for parameter in parameters:
        annotation = parameter.annotation
        if isinstance(annotation, str) and annotation.split("[")[0].split(".")[-1] == "Context":
            raise ConfigurationError(
                f"tool {tool.metadata.name!r}: parameter {parameter.name!r} is annotated with "
                f"the string {annotation!r} (from __future__ import annotations), so "
                "LlamaIndex will not inject the workflow Context and shows the parameter to "
                "the model; define the function in a module without that import, or set "
                f"{tool.real_fn.__name__}.__annotations__[{parameter.name!r}] = Context "
                "before building the tool"
            )


def as_tool(tool: BaseTool | Callable[..., Any]) -> BaseTool:
    """``tool`` as a LlamaIndex tool: a plain function becomes a ``FunctionTool``, as the
    agents convert it.

    Raises:
        ConfigurationError: ``tool`` is neither a LlamaIndex tool nor a callable.
    """
    if isinstance(tool, BaseTool):
        return tool
    if callable(tool):
        return FunctionTool.from_defaults(tool)
    raise ConfigurationError(
        f"expected a LlamaIndex tool (FunctionTool, QueryEngineTool ...) or a function, not "
        f"{type(tool).__name__}"
    )


def tool_spec(
    tool: BaseTool | Callable[..., Any],
    *,
    side_effects: Iterable[str],
    path_fields: Iterable[str] = (),
    required_path_fields: Iterable[str] | None = None,
    cwd_field: str | None = None,
    content_fields: Iterable[str] = (),
    with_schema: bool = True,
    output_trust: str = "untrusted",
) -> ToolSpec:
    """The registry declaration of a LlamaIndex tool, under the name agents dispatch it by.

    Args:
        tool: A LlamaIndex tool (``FunctionTool`` ...) or a plain function.
        side_effects: What the tool does, e.g. ``{"network"}`` or ``{"file_write"}``.
        path_fields: Argument names that hold file paths.
        required_path_fields: Path fields a call must carry (default: every path field and
            the ``cwd_field``).
        cwd_field: The argument naming a working directory, for shell-like tools.
        content_fields: Where the tool's payload lives (credential scanning reads these).
        with_schema: Also require the arguments to satisfy the tool's own argument schema.
        output_trust: How far what the tool returns is trusted: ``"untrusted"`` (the
            default: e-mail, web pages, messages, files others wrote) or ``"trusted"``
            (the user's own data or the system's). A value the agent read in an untrusted
            output is labelled so when it reaches another call's arguments.

    Returns:
        A :class:`~jevqueue.policy.ToolSpec` named ``tool.metadata.name``.

    Raises:
        ConfigurationError: ``tool`` is not a tool, has no name, or a field is malformed
            (a path field that is not one of its parameters, for one).
    """
    tool = as_tool(tool)
    check_context_annotation(tool)
    name = tool.metadata.name
    if not name:
        raise ConfigurationError("the tool has no name: give it one (FunctionTool(name=...))")
    schema: dict[str, Any] | None = None
    properties: dict[str, Any] = {}
    if tool.metadata.fn_schema is not None:
        parameters = tool.metadata.get_parameters_dict()
        properties = dict(parameters.get("properties") or {})
        if with_schema:
            schema = parameters
    paths = tuple(path_fields)
    fields = [*paths, *(content_fields or ()), *([cwd_field] if cwd_field else [])]
    unknown = [field for field in fields if properties and field not in properties]
    if unknown:
        raise ConfigurationError(
            f"tool {name!r}: {unknown} are not parameters of the tool (it takes "
            f"{sorted(properties)}); name the argument that holds the path or content"
        )
    return ToolSpec.declare(
        name,
        side_effects=side_effects,
        path_fields=paths,
        required_path_fields=required_path_fields,
        cwd_field=cwd_field,
        content_fields=content_fields,
        schema=schema,
        output_trust=output_trust,
    )
