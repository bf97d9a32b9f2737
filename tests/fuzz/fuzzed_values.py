"""Python values built from fuzz input: what a caller or an agent could pass as arguments.

JSON values, and everything that is not one but looks close: tuples, sets, bytes, ``str``
and ``dict`` subclasses, non-string keys, integers and floats at the edges of exactness,
NaN, lone surrogates, cycles, deep nesting and payloads near the size limit.
"""

from __future__ import annotations

from typing import Any

import atheris

__all__ = ["fuzzed_path", "fuzzed_text", "fuzzed_value"]

_EDGE_INTEGERS = [0, -1, 1, 2**53 - 1, -(2**53 - 1), 2**53, -(2**53), 2**63, 10**400]
_EDGE_FLOATS = [
    0.0,
    -0.0,
    5e-324,
    1e-7,
    1e21,
    9.007199254740992e15,
    2.0**53,
    -(2.0**53),
    1.7976931348623157e308,
    float("nan"),
    float("inf"),
    float("-inf"),
]
_PATH_PIECES = [
    "src",
    "app.py",
    ".git",
    ".GIT",
    "hooks",
    ".github",
    "workflows",
    ".env",
    "..",
    ".",
    "",
    "~",
    "~root",
    "$HOME",
    "${X}",
    "%2e%2e",
    "a\\b",
    "C:",
    "x\x00y",
    "dir.",
    "dir ",
    "GIT~1",
    ".git::$INDEX_ALLOCATION",
    ".g\u200cit",
    "link-out",
    "hard",
    "file.txt",
    "\u00e9",
    "\ud800",
]


class _Text(str):
    """A str subclass: it could redefine comparison and look different to a rule."""


class _Mapping(dict):  # type: ignore[type-arg]
    """A dict subclass."""


class _Number(int):
    """An int subclass."""


class _Opaque:
    """Neither JSON nor a container."""


def fuzzed_text(fdp: atheris.FuzzedDataProvider, limit: int = 40) -> str:
    """A short string: sometimes with lone surrogates, sometimes plain ASCII."""
    length = fdp.ConsumeIntInRange(0, limit)
    if fdp.ConsumeBool():
        return fdp.ConsumeUnicode(length)
    return fdp.ConsumeUnicodeNoSurrogates(length)


def fuzzed_path(fdp: atheris.FuzzedDataProvider) -> str:
    """A path written from pieces that fool path checks: '..', '~', aliases of .git ..."""
    pieces = [
        fdp.PickValueInList(_PATH_PIECES) if fdp.ConsumeBool() else fuzzed_text(fdp, 12)
        for _ in range(fdp.ConsumeIntInRange(0, 6))
    ]
    path = "/".join(pieces)
    if fdp.ConsumeIntInRange(0, 4) == 0:
        path = "/" + path
    return path


def fuzzed_value(fdp: atheris.FuzzedDataProvider, depth: int = 0) -> Any:
    """Any value, JSON or not; containers hold further values up to a modest depth."""
    kind = fdp.ConsumeIntInRange(0, 22 if depth < 6 else 9)
    if kind == 0:
        return None
    if kind == 1:
        return fdp.ConsumeBool()
    if kind == 2:
        return fdp.ConsumeIntInRange(-(2**60), 2**60)
    if kind == 3:
        return fdp.PickValueInList(_EDGE_INTEGERS) * (1 if fdp.ConsumeBool() else -1)
    if kind == 4:
        return fdp.ConsumeFloat()
    if kind == 5:
        return fdp.PickValueInList(_EDGE_FLOATS)
    if kind in (6, 7):
        return fuzzed_text(fdp)
    if kind == 8:
        return fuzzed_path(fdp)
    if kind == 9:
        return fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 8))
    if kind == 10:
        return [fuzzed_value(fdp, depth + 1) for _ in range(fdp.ConsumeIntInRange(0, 4))]
    if kind in (11, 12):
        return {
            fuzzed_text(fdp, 12): fuzzed_value(fdp, depth + 1)
            for _ in range(fdp.ConsumeIntInRange(0, 4))
        }
    if kind == 13:
        return tuple(fuzzed_value(fdp, depth + 1) for _ in range(fdp.ConsumeIntInRange(0, 3)))
    if kind == 14:
        return {fdp.ConsumeIntInRange(0, 3), fuzzed_text(fdp, 4)}
    if kind == 15:
        key = fdp.PickValueInList([1, None, True, 1.5, ("t",), b"k", _Text("k")])
        return {key: fuzzed_value(fdp, depth + 1)}
    if kind == 16:
        return fdp.PickValueInList([_Text("s"), _Mapping(a=1), _Number(3), _Opaque(), 1j])
    if kind == 17:
        cycle: list[Any] = [fuzzed_value(fdp, depth + 1)]
        holder: Any = {"again": cycle} if fdp.ConsumeBool() else cycle
        cycle.append(holder)
        return cycle
    if kind == 18:
        # Nesting around the depth limit (64) and far beyond it.
        levels = fdp.PickValueInList([63, 64, 65, 200, 201, 5000])
        value: Any = fuzzed_value(fdp, 6)
        for level in range(levels):
            value = [value] if level % 2 else {"k": value}
        return value
    if kind == 19:
        # Payloads at the 1 MiB limit: the size is counted in UTF-8 bytes, not characters.
        size = fdp.PickValueInList([(1 << 20) - 2, (1 << 20) - 1, 1 << 20, (1 << 20) + 1])
        char = fdp.PickValueInList(["a", "\u00e9", "\U0001f600", '"', "\n"])
        return char * (size // len(char.encode("utf-8")))
    if kind == 20:
        shared = [fuzzed_value(fdp, depth + 1)]
        return [shared, shared]  # the same list twice is a tree, not a cycle
    if kind == 21:
        key = "\U0001f600" if fdp.ConsumeBool() else "\ufb01"
        return {key: 1, "z": 2, fuzzed_text(fdp, 3): 3}
    return fdp.ConsumeRegularFloat()
