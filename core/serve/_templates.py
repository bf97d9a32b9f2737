"""The pages' Jinja2 environment: autoescaping on for every template, and the filters the
pages share (times, spans, JSON, a request's state in words).

Every value a page prints passes :func:`visible` (the environment's ``finalize``, and the
``visible`` filter): a character that hides or disguises text — a bidi override or
isolate, a zero-width or other format character, a control character, a space other than
U+0020, a line or paragraph separator — is shown as a ``\\uXXXX`` escape, so what a
reviewer reads is what the agent sent."""

from __future__ import annotations

import json
import unicodedata
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import jinja2
import markupsafe
from jevqueue.approvals import InboxRequest
from jevqueue.serve._needed_approvals import needed_approvals
from starlette.templating import Jinja2Templates

__all__ = [
    "TEMPLATES_DIR",
    "hidden_characters",
    "is_hidden",
    "page_templates",
    "span",
    "state_words",
    "visible",
]

TEMPLATES_DIR = Path(__file__).parent / "templates"


def span(seconds: float) -> str:
    """A duration as the command line shows it: ``42s``, ``3m05s``, ``2h10m``, ``1d04h``."""
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    if seconds < 86400:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 86400}d{seconds % 86400 // 3600:02d}h"


_SHOWN_AS_IS = frozenset("\n")
_HIDING_CATEGORIES = frozenset({"Cf", "Cc", "Zs", "Zl", "Zp", "Co", "Cs", "Cn"})


def is_hidden(character: str) -> bool:
    """Whether ``character`` can hide or disguise text on a page (shown escaped)."""
    if character == " " or character in _SHOWN_AS_IS:
        return False
    return unicodedata.category(character) in _HIDING_CATEGORIES


def _escape(character: str) -> str:
    code = ord(character)
    return f"\\u{code:04X}" if code <= 0xFFFF else f"\\U{code:08X}"


def visible(value: Any) -> Any:
    """``value`` with every character that could hide text as a visible ``\\uXXXX`` escape.

    Strings only (other values are returned as they are, for Jinja to print); a newline
    stays a newline.
    """
    if not isinstance(value, str) or isinstance(value, markupsafe.Markup):
        return value
    if value.isascii() and value.isprintable():
        return value
    return "".join(_escape(c) if is_hidden(c) else c for c in value)


def hidden_characters(value: Any) -> list[str]:
    """The distinct hiding characters in the strings (keys too) of a JSON-like ``value``."""
    found: dict[str, None] = {}
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            found.update((c, None) for c in item if is_hidden(c))
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return [_escape(c) for c in found]


def _when(moment: datetime | None) -> str:
    if moment is None:
        return "-"
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _ago(moment: datetime, now: datetime) -> str:
    return span((now - moment).total_seconds()) + " ago"


def _until(moment: datetime, now: datetime) -> str:
    left = (moment - now).total_seconds()
    return span(left) if left > 0 else "expired"


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)


def state_words(request: InboxRequest) -> str:
    """The request's state as a reviewer reads it; expiry is never a denial."""
    state = request.state.value
    if state == "expired":
        return "expired — nobody decided"
    if state == "denied":
        denial = request.denial
        return f"denied by {denial.reviewer}" if denial is not None else "denied"
    if state == "approved":
        names = ", ".join(d.reviewer for d in request.approvals)
        return f"approved by {names}" if names else "approved"
    if state == "cancelled":
        return "cancelled — the agent stopped waiting"
    return state


def _approvals_so_far(request: InboxRequest) -> str:
    needed = needed_approvals(request)
    return f"{len(request.approvals)} of {needed if needed is not None else '?'}"


def page_templates() -> Jinja2Templates:
    """The templates of the pages, with autoescaping on whatever a file is called."""
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES_DIR),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=visible,
    )
    environment.filters.update(
        when=_when,
        ago=_ago,
        until=_until,
        pretty=_pretty,
        state_words=state_words,
        visible=visible,
    )
    environment.globals.update(
        needed_approvals=needed_approvals, approvals_so_far=_approvals_so_far
    )
    return Jinja2Templates(env=environment)
