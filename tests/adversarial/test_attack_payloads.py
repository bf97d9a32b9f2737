"""Payload attacks: arguments that are not canonical JSON, or built to crash the gate."""

from __future__ import annotations

import math
from collections import OrderedDict
from typing import Any

import pytest
from attack_harness import GuardedTools, assert_refused
from jevqueue.errors import (
    ArgumentsTooDeepError,
    ArgumentsTooLargeError,
    CyclicArgumentsError,
    IntegerOutOfRangeError,
    NonCanonicalArgumentsError,
    NonFiniteNumberError,
    NonStringKeyError,
    UnsupportedTypeError,
)
from jevqueue.testing.recording_audit import RecordingAuditSink


class LooksLikeAString:
    """A custom object whose str() is a harmless path."""

    def __str__(self) -> str:
        return "src/app.py"


class ShapeShifter(str):
    """A str subclass that compares equal to a safe value but is something else."""

    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = str.__hash__


def cyclic_dict() -> dict[str, Any]:
    node: dict[str, Any] = {}
    node["self"] = node
    return node


def cyclic_list() -> list[Any]:
    node: list[Any] = []
    node.append(node)
    return node


def deep_list(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = [value]
    return value


def deep_dict(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = {"k": value}
    return value


# name -> (the extra argument's value, the typed error)
PAYLOADS: dict[str, tuple[Any, type[NonCanonicalArgumentsError]]] = {
    "bytes": (b"rm -rf /", UnsupportedTypeError),
    "bytearray": (bytearray(b"x"), UnsupportedTypeError),
    "memoryview": (memoryview(b"x"), UnsupportedTypeError),
    "set": ({"a", "b"}, UnsupportedTypeError),
    "frozenset": (frozenset({"a"}), UnsupportedTypeError),
    "tuple": (("a", "b"), UnsupportedTypeError),
    "custom-object": (LooksLikeAString(), UnsupportedTypeError),
    "str-subclass": (ShapeShifter("x"), UnsupportedTypeError),
    "complex-number": (1 + 2j, UnsupportedTypeError),
    "nan": (math.nan, NonFiniteNumberError),
    "plus-infinity": (math.inf, NonFiniteNumberError),
    "minus-infinity": (-math.inf, NonFiniteNumberError),
    "nan-nested-in-list": ([1.0, [math.nan]], NonFiniteNumberError),
    "integer-beyond-2-53": (2**53 + 1, IntegerOutOfRangeError),
    "cycle-through-dict": (cyclic_dict(), CyclicArgumentsError),
    "cycle-through-list": (cyclic_list(), CyclicArgumentsError),
    "int-key": ({1: "a"}, NonStringKeyError),
    "tuple-key": ({("a",): "b"}, NonStringKeyError),
    "none-key": ({None: "a"}, NonStringKeyError),
    "bool-key": ({True: "a"}, NonStringKeyError),
    "deep-list-10000": (deep_list(10_000), ArgumentsTooDeepError),
    "deep-dict-10000": (deep_dict(10_000), ArgumentsTooDeepError),
    "just-over-the-depth-limit": (deep_list(65), ArgumentsTooDeepError),
    "oversize-string-2mib": ("A" * (2 << 20), ArgumentsTooLargeError),
    "oversize-many-small-items": (["xxxxxxxx"] * 200_000, ArgumentsTooLargeError),
    "lone-surrogate": ("\ud800", UnsupportedTypeError),
}


@pytest.mark.parametrize(("value", "error"), PAYLOADS.values(), ids=PAYLOADS.keys())
def test_non_canonical_arguments_are_refused_with_a_typed_error(
    tools: GuardedTools,
    audit: RecordingAuditSink,
    value: Any,
    error: type[NonCanonicalArgumentsError],
) -> None:
    arguments = {"TargetFile": "src/app.py", "CodeContent": "x", "Extra": value}
    refused = assert_refused(tools, audit, "write_to_file", arguments, error=error)
    assert isinstance(refused, NonCanonicalArgumentsError)
    assert refused.path.startswith("/Extra")
    # never a raw crash, and the refusal record says why without the payload
    assert audit.events[-1]["reasons"] == [f"refused before evaluation: {type(refused).__name__}"]


@pytest.mark.parametrize(
    "arguments",
    [
        ["TargetFile", "src/app.py"],
        "TargetFile=src/app.py",
        None,
        OrderedDict(TargetFile="src/app.py", CodeContent="x"),
    ],
    ids=["list", "string", "none", "dict-subclass"],
)
def test_arguments_that_are_not_a_plain_dict_are_refused(
    tools: GuardedTools, audit: RecordingAuditSink, arguments: Any
) -> None:
    assert_refused(tools, audit, "write_to_file", arguments, error=UnsupportedTypeError)


def test_a_content_field_hiding_bytes_deep_inside_is_refused(
    tools: GuardedTools, audit: RecordingAuditSink
) -> None:
    arguments = {
        "TargetFile": "src/app.py",
        "ReplacementChunks": [
            {"TargetContent": "value = 1", "ReplacementContent": b"\x7fELF"},
        ],
    }
    refused = assert_refused(
        tools, audit, "multi_replace_file_content", arguments, error=UnsupportedTypeError
    )
    assert refused.path == "/ReplacementChunks/0/ReplacementContent"  # type: ignore[attr-defined]
