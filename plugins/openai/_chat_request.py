"""The request body for each of the three ``generate`` modes, and the checks on the reply.

No HTTP here: the sync and async hosts share this and differ only in how they send.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from jevqueue.errors import ConfigurationError, ProviderHTTPError, UsageError
from jevqueue.governor import normalize_tools, tool_names, with_directive

DirectiveRole = Literal["system", "developer", "user"]

# Request fields the host owns: the caller passes them as constructor arguments.
_OWNED_FIELDS = ("model", "messages", "tools")
_EXCERPT_CHARS = 300


def check_request_fields(request_fields: Mapping[str, Any]) -> dict[str, Any]:
    """The caller's extra request fields, refusing the ones the host builds itself."""
    clashes = [key for key in _OWNED_FIELDS if key in request_fields]
    if clashes:
        raise ConfigurationError(
            f"request_fields must not contain {clashes}: pass the model, the messages and the "
            "tools as the host's own arguments, and only extra fields (temperature, "
            "max_tokens, ...) in request_fields"
        )
    return dict(request_fields)


def wire_tools(tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The tools in the canonical ``{"type": "function", "function": {...}}`` shape.

    A tool already in that shape is sent as the caller built it (fields such as
    ``strict`` survive); a flat ``{"name": ...}`` tool is wrapped, all its fields kept.
    """
    normalize_tools(tools)  # validates both shapes; raises InvalidToolSchemaError
    out: list[dict[str, Any]] = []
    for tool in tools:
        if tool.get("type") == "function" and isinstance(tool.get("function"), Mapping):
            out.append(dict(tool))
        else:
            out.append({"type": "function", "function": dict(tool)})
    return out


def request_body(
    *,
    model: str,
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]],
    request_fields: Mapping[str, Any],
    force_tool: str | None,
    directive: str,
    directive_role: DirectiveRole,
) -> dict[str, Any]:
    """The JSON body for one ``generate`` call.

    With ``force_tool=None`` and ``directive=""`` this is exactly the ungoverned request:
    ``model``, ``messages`` (the caller's list itself), ``tools`` (when there are any),
    then the caller's ``request_fields`` in their order.
    """
    body: dict[str, Any] = {"model": model, "messages": messages}
    wired = wire_tools(tools)
    if wired:
        body["tools"] = wired
    body.update(request_fields)
    if force_tool is None and not directive:
        return body

    if directive:
        # A new list: the caller's list keeps its identity and content (prompt caching).
        body["messages"] = with_directive(messages, directive, role=directive_role)
    if force_tool is not None:
        names = tool_names(tools)
        if force_tool not in names:
            raise UsageError(
                f"cannot force {force_tool!r}: the host offers only {names}; force one of "
                "the tools the host's tools() returns"
            )
        body["tool_choice"] = {"type": "function", "function": {"name": force_tool}}
        body["parallel_tool_calls"] = False
    elif wired:
        # Prose: the model still sees the tools, but may not call any.
        body["tool_choice"] = "none"
        body.pop("parallel_tool_calls", None)
    else:
        body.pop("tool_choice", None)
        body.pop("parallel_tool_calls", None)
    return body


def excerpt(text: str, secret: str | None) -> str:
    """The start of a response body, one line, with ``secret`` blanked out."""
    if secret:
        text = text.replace(secret, "***")
    text = " ".join(text.split())
    if len(text) > _EXCERPT_CHARS:
        text = text[:_EXCERPT_CHARS] + "..."
    return text


def checked_completion(status: int, text: str, url: str, *, secret: str | None) -> dict[str, Any]:
    """The parsed body of a successful chat completion, or a :class:`ProviderHTTPError`."""
    if status >= 400:
        hint = "check the API key" if status in (401, 403) else "check the base URL and the model"
        raise ProviderHTTPError(
            f"POST {url} answered HTTP {status}: {excerpt(text, secret)!r}; {hint}",
            status=status,
            body_excerpt=excerpt(text, secret),
        )
    try:
        body = json.loads(text)
    except ValueError:
        body = None
    choices = body.get("choices") if isinstance(body, dict) else None
    if (
        not isinstance(choices, list)
        or not choices
        or not isinstance(choices[0], dict)
        or not isinstance(choices[0].get("message"), dict)
    ):
        raise ProviderHTTPError(
            f"POST {url} answered HTTP {status} with no chat completion "
            f"(expected JSON with choices[0].message): {excerpt(text, secret)!r}; check that "
            "the base URL points at an OpenAI-compatible /v1 endpoint",
            status=status,
            body_excerpt=excerpt(text, secret),
        )
    assert isinstance(body, dict)
    if len(choices) > 1:
        # Only choices[0] is read back and judged: a second choice with tool calls of its
        # own must never reach a caller that might run them.
        raise ProviderHTTPError(
            f"POST {url} answered with {len(choices)} choices; jevqueue reads back and judges "
            "exactly one: do not ask for n > 1",
            status=status,
            body_excerpt=excerpt(text, secret),
        )
    return body
