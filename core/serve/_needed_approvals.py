"""How many approvals a request needs, and from whom: read in one place.

:attr:`InboxRequest.required` is the count; when the policy names approver groups the
request also says who must approve (``needs()``) and whether a reviewer's approval can
count (``may_approve(reviewer)``). These functions are the one place the pages read them,
and each answers None rather than guess when the request does not say.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["may_approve", "needed_approvals", "who_must_approve"]

_COUNT_NAMES = ("count", "required", "needed", "m")


def needed_approvals(request: Any) -> int | None:
    """The number of distinct approvals ``request`` needs, or None if it cannot be read."""
    required = getattr(request, "required", None)
    if isinstance(required, bool):
        return None
    if isinstance(required, int):
        return required if required >= 1 else None
    for name in _COUNT_NAMES:
        value = (
            required.get(name) if isinstance(required, Mapping) else getattr(required, name, None)
        )
        if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
            return value
    return None


def who_must_approve(request: Any) -> str | None:
    """Who must approve, in words (``2 approvals from ops (alice, bob)``), or None."""
    needs = getattr(request, "needs", None)
    try:
        text = needs() if callable(needs) else None
    except Exception:  # a description is a reading aid; the store enforces the rule
        return None
    return text if isinstance(text, str) and text else None


def may_approve(request: Any, reviewer: str) -> bool | None:
    """Whether ``reviewer``'s approval can count on ``request``, or None if it does not say."""
    check = getattr(request, "may_approve", None)
    if not callable(check):
        return None
    try:
        answer = check(reviewer)
    except Exception:  # the store enforces the rule; the page only hints
        return None
    return answer if isinstance(answer, bool) else None
