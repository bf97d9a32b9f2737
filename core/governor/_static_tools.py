"""Static tool payloads: a tool call answered locally with fixed arguments.

``Governor(static_tools={"list_tasks": {"status": "open"}})`` means: when the ballot routes a
turn to ``list_tasks``, do not ask the provider for its arguments — say the call locally
(``host.say_tool_call``), with no provider call. A payload is a mapping, or a callable of
the messages that returns one. Before it goes out it is validated against the tool's JSON
Schema (its ``parameters``); a payload that fails is never sent, and the turn forces the
tool through the provider instead.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from jevqueue.errors import ConfigurationError

__all__ = [
    "StaticPayload",
    "check_static_tools",
    "payload_problem",
    "plain_arguments",
    "resolve_payload",
]

StaticPayload = Mapping[str, Any] | Callable[[Sequence[Mapping[str, Any]]], Mapping[str, Any]]
"""Fixed arguments for a tool, or a callable of the messages that returns them."""


def check_static_tools(
    static_tools: Mapping[str, StaticPayload] | None,
) -> dict[str, StaticPayload]:
    """Check a ``static_tools`` setting once, when the governor is built.

    Raises:
        ConfigurationError: Not a mapping, a key that is not a non-empty string, or a value
            that is neither a mapping nor a callable.
    """
    if static_tools is None:
        return {}
    if not isinstance(static_tools, Mapping):
        raise ConfigurationError(
            f"static_tools must map tool names to payloads, got a {type(static_tools).__name__}: "
            'pass {"tool_name": {"argument": "value"}}'
        )
    checked: dict[str, StaticPayload] = {}
    for name, payload in static_tools.items():
        if not isinstance(name, str) or not name:
            raise ConfigurationError(
                f"static_tools keys must be tool names (non-empty strings), got {name!r}"
            )
        if not isinstance(payload, Mapping) and not callable(payload):
            raise ConfigurationError(
                f"static_tools[{name!r}] must be the arguments (a mapping) or a callable of the "
                f"messages that returns them, got a {type(payload).__name__}"
            )
        checked[name] = payload
    return checked


def resolve_payload(payload: StaticPayload, messages: Sequence[Mapping[str, Any]]) -> Any:
    """The arguments of a static payload for this turn (calls it when it is a callable)."""
    if isinstance(payload, Mapping):
        return payload
    return payload(messages)


def plain_arguments(value: Any) -> Any:
    """A fresh copy of ``value`` with every mapping turned into a ``dict`` and lists copied.

    Other values (tuples and custom objects included) are kept as they are, so that schema
    validation judges, and rejects, exactly what would be sent.
    """
    if isinstance(value, Mapping):
        return {key: plain_arguments(item) for key, item in value.items()}
    if isinstance(value, list):
        return [plain_arguments(item) for item in value]
    return value


def payload_problem(payload: Any, parameters: Mapping[str, Any]) -> str | None:
    """Why ``payload`` may not be sent as the arguments of a tool with these ``parameters``.

    Args:
        payload: The resolved static payload, as :func:`plain_arguments` returns it.
        parameters: The tool's JSON Schema.

    Returns:
        ``None`` when the payload is a mapping with string keys that validates against the
        schema, else a sentence naming the problem (a broken schema counts as a problem:
        an unvalidated payload never goes out).
    """
    if not isinstance(payload, Mapping):
        return f"the payload is a {type(payload).__name__}, not a mapping of arguments"
    if not all(isinstance(key, str) for key in payload):
        return "the payload has a key that is not a string"
    # Imported here: only turns that reach a static payload pay for the validator.
    from jsonschema import exceptions, validators

    schema = plain_arguments(parameters)
    try:
        validator_class = validators.validator_for(schema)
        validator_class.check_schema(schema)
    except exceptions.SchemaError as exc:
        return f"the tool's parameters are not a valid JSON Schema ({exc.message})"
    error = exceptions.best_match(validator_class(schema).iter_errors(payload))
    if error is None:
        return None
    where = (
        "/" + "/".join(str(part) for part in error.absolute_path)
        if error.absolute_path
        else "the payload"
    )
    return f"{where}: {error.message}"
