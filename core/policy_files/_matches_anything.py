"""Whether a policy file's argument pattern matches every value (which is worth a warning).

A pattern that can match the empty string without looking at its surroundings (no
anchor, lookaround or back reference on the way) matches at the start of every value. One
that needs its surroundings (``^[^@]*$``) is tried on a few very different probe values —
but only when its shape keeps that cheap: Python's engine backtracks, and a repeat inside
a repeat, alternatives inside a repeat, or several repeats side by side can take
exponential or high-polynomial time on a long probe (``(?:(0+)+y|)`` on 300 zeros runs for
ever). For those the answer is "not known to match everything": no warning, and no hang
of ``jevqueue policy check``.
"""

from __future__ import annotations

import re
import sys
from typing import Any

__all__ = ["matches_any_value"]

# Values of every shape an argument can take.
_PROBES = ("x", "@", "a@b.example", "first\nsecond", " ", "\u00fc\u00df", "0" * 300, "$(x)|;")

# The parser behind re.compile: its tree is what the engine runs.
if sys.version_info >= (3, 11):
    from re import _constants as _sre
    from re import _parser
else:  # pragma: no cover - Python 3.10 names them differently
    import sre_constants as _sre
    import sre_parse as _parser

_REPEATS = frozenset(
    getattr(_sre, name)
    for name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT")
    if hasattr(_sre, name)
)
_CONTEXT = frozenset(
    getattr(_sre, name) for name in ("AT", "ASSERT", "ASSERT_NOT", "GROUPREF", "GROUPREF_EXISTS")
)


class _Shape:
    """What a walk over the parsed pattern found."""

    def __init__(self) -> None:
        self.repeats = 0
        self.context = False
        self.backtracks = False  # a repeat holding a repeat or alternatives


def _children(op: Any, av: Any) -> list[Any]:
    """The sub-patterns below one node of the parse tree."""
    if op in _REPEATS:
        return [av[2]]
    if op == _sre.SUBPATTERN:
        return [av[3]]
    if op == _sre.BRANCH:
        return list(av[1])
    if op in (_sre.ASSERT, _sre.ASSERT_NOT):
        return [av[1]]
    if op == _sre.GROUPREF_EXISTS:
        return [branch for branch in av[1:] if branch is not None]
    if op == getattr(_sre, "ATOMIC_GROUP", None):
        return [av]
    return []


def _walk(nodes: Any, shape: _Shape, inside_repeat: bool) -> None:
    # Iterative, so a deeply nested pattern cannot exhaust the stack here.
    pending: list[tuple[Any, bool]] = [(nodes, inside_repeat)]
    while pending:
        sequence, in_repeat = pending.pop()
        for op, av in sequence:
            if op in _CONTEXT:
                shape.context = True
            if op in _REPEATS:
                shape.repeats += 1
                if in_repeat:
                    shape.backtracks = True
            elif op == _sre.BRANCH and in_repeat:
                shape.backtracks = True
            below = in_repeat or op in _REPEATS
            pending.extend((child, below) for child in _children(op, av))


def matches_any_value(compiled: re.Pattern[str]) -> bool:
    """True when ``compiled`` (searched, as rules search) matches every value.

    False when it does not, or when that cannot be told cheaply (see the module docstring).
    """
    if compiled.search("") is None:
        return False
    try:
        tree = _parser.parse(compiled.pattern, compiled.flags)
    except (re.error, RecursionError, OverflowError):  # pragma: no cover - compiled already
        return False
    shape = _Shape()
    _walk(tree, shape, False)
    if not shape.context:
        return True  # the empty match at the start does not depend on what surrounds it
    if shape.backtracks or shape.repeats > 1:
        return False
    return all(compiled.search(probe) is not None for probe in _PROBES)
