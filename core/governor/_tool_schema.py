"""Tool schemas in either OpenAI shape, converted once into one canonical form.

The two accepted shapes::

    {"type": "function", "function": {"name": "read_file", "description": "...",
                                      "parameters": {...}}}
    {"name": "read_file", "description": "...", "parameters": {...}}

Anything else raises :class:`~jevqueue.errors.InvalidToolSchemaError` naming the offending
tool and what to change. Plugins use :func:`normalize_tools` to read a host's tools.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, cast

from jevqueue.errors import InvalidToolSchemaError

__all__ = ["EMPTY_PARAMETERS", "ToolSchema", "normalize_tool", "normalize_tools", "tool_names"]

EMPTY_PARAMETERS: Mapping[str, Any] = MappingProxyType({"type": "object", "properties": {}})
"""The parameters of a tool that declares none: an object with no properties."""

_SHAPES = (
    '{"type": "function", "function": {"name": ..., "description": ..., "parameters": {...}}} '
    'or {"name": ..., "description": ..., "parameters": {...}}'
)


@dataclass(frozen=True, slots=True)
class ToolSchema:
    """One tool in canonical form.

    Attributes:
        name: The tool's name, non-empty.
        description: What the tool is for ("" when the schema gives none). This text is
            what ballots score: describe the choice criteria, not the implementation.
        parameters: The JSON Schema of the tool's arguments (an object schema).
    """

    name: str
    description: str
    parameters: Mapping[str, Any]

    def as_openai(self) -> dict[str, Any]:
        """The tool in the nested OpenAI shape (``{"type": "function", "function": {...}}``)."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": dict(self.parameters),
            },
        }


def _spec_of(tool: Any, where: str) -> Mapping[str, Any]:
    """The mapping that holds name/description/parameters, from either shape."""
    if not isinstance(tool, Mapping):
        raise InvalidToolSchemaError(
            f"{where} is a {type(tool).__name__}, not a mapping: pass {_SHAPES}"
        )
    inner = tool.get("function")
    if inner is None:
        return tool
    if not isinstance(inner, Mapping):
        raise InvalidToolSchemaError(
            f"{where} has a 'function' entry that is a {type(inner).__name__}, not a "
            f"mapping: pass {_SHAPES}"
        )
    kind = tool.get("type", "function")
    if kind != "function":
        raise InvalidToolSchemaError(
            f"{where} has type {kind!r}; only function tools can be governed: pass {_SHAPES}"
        )
    return inner


def _name_of(spec: Mapping[str, Any], where: str) -> str:
    name = spec.get("name")
    if not isinstance(name, str) or not name:
        raise InvalidToolSchemaError(
            f"{where} has no non-empty string 'name' (got {name!r}): pass {_SHAPES}"
        )
    return name


def normalize_tool(tool: Mapping[str, Any], *, where: str = "the tool") -> ToolSchema:
    """Convert one tool in either OpenAI shape into a :class:`ToolSchema`.

    Args:
        tool: The tool schema.
        where: How to name the tool in an error message (e.g. ``"tools[3]"``).

    Raises:
        InvalidToolSchemaError: The tool is in neither shape, has no name, or its
            description or parameters have the wrong type.
    """
    spec = _spec_of(tool, where)
    name = _name_of(spec, where)
    description = spec.get("description")
    if description is None:
        description = ""
    elif not isinstance(description, str):
        raise InvalidToolSchemaError(
            f"tool {name!r} has a description of type {type(description).__name__}: "
            "describe the tool in a string"
        )
    parameters = spec.get("parameters")
    if parameters is None:
        parameters = EMPTY_PARAMETERS
    elif not isinstance(parameters, Mapping):
        raise InvalidToolSchemaError(
            f"tool {name!r} has parameters of type {type(parameters).__name__}: pass a JSON "
            'Schema object such as {"type": "object", "properties": {...}}'
        )
    return ToolSchema(name, description, parameters)


def _check_sequence(tools: Any) -> None:
    if isinstance(tools, (str, bytes, Mapping)) or not isinstance(tools, Sequence):
        raise InvalidToolSchemaError(
            f"tools must be a list of tool schemas, got a {type(tools).__name__}: "
            f"pass [tool, ...] where each tool is {_SHAPES}"
        )


def normalize_tools(tools: Sequence[Mapping[str, Any]]) -> list[ToolSchema]:
    """Convert a toolset in either (or both) OpenAI shapes into :class:`ToolSchema` objects.

    Args:
        tools: The tools, in order, as a host's ``tools()`` returns them.

    Returns:
        One :class:`ToolSchema` per tool, in the same order.

    Raises:
        InvalidToolSchemaError: ``tools`` is not a list, a tool is in neither shape, or two
            tools share a name (forcing one of them would be ambiguous).
    """
    _check_sequence(tools)
    out: list[ToolSchema] = []
    seen: set[str] = set()
    for position, tool in enumerate(tools):
        schema = normalize_tool(tool, where=f"tools[{position}]")
        if schema.name in seen:
            raise InvalidToolSchemaError(
                f"two tools are named {schema.name!r}: give every tool a unique name so "
                "that forcing one is unambiguous"
            )
        seen.add(schema.name)
        out.append(schema)
    return out


def tool_names(tools: Sequence[Mapping[str, Any]]) -> list[str]:
    """The names of ``tools`` in order, checking only what a name needs (cheap, every turn).

    Raises:
        InvalidToolSchemaError: ``tools`` is not a list, a tool is in neither shape, has no
            name, or two tools share a name.
    """
    # Fast path for well-formed toolsets, which is every turn of a working host; anything
    # unusual takes the checked path below, which raises with a precise message.
    try:
        names = [(t if (f := t.get("function")) is None else f).get("name") for t in tools]
        offered = set(names)
    except (AttributeError, TypeError):
        pass
    else:
        if (
            len(offered) == len(names)
            and set(map(type, offered)) == {str}
            and "" not in offered
            and not isinstance(tools, (str, bytes, Mapping))
        ):
            return cast("list[str]", names)
    _check_sequence(tools)
    checked: list[str] = []
    for position, tool in enumerate(tools):
        where = f"tools[{position}]"
        checked.append(_name_of(_spec_of(tool, where), where))
    if len(set(checked)) != len(checked):
        duplicate = next(name for name in checked if checked.count(name) > 1)
        raise InvalidToolSchemaError(
            f"two tools are named {duplicate!r}: give every tool a unique name so that "
            "forcing one is unambiguous"
        )
    return checked
