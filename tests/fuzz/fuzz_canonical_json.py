"""Canonical JSON: any value in, canonical bytes or a typed refusal out.

The first byte picks the input: a Python value built from the rest (JSON or close to it),
or the rest read as JSON text by ``json.loads`` (which also yields NaN and huge integers).
An accepted value must read back, from its bytes, as an equal value (booleans stay
booleans) whose canonical form is the same bytes, and the bytes must be RFC 8785's.
"""

from __future__ import annotations

import json
import math
from typing import Any

import atheris
from fuzz_main import fuzz_main, instrumented
from fuzzed_values import fuzzed_value

with instrumented():
    import rfc8785
    from jevqueue.errors import NonCanonicalArgumentsError
    from jevqueue.policy._canonical import (
        MAX_BYTES,
        canonical_arguments,
        canonical_json,
        check_canonical,
    )


def _same(first: Any, second: Any) -> bool:
    """Equal as JSON: numbers by value (1 and 1.0 print alike), booleans only to booleans."""
    if isinstance(first, bool) or isinstance(second, bool):
        return type(first) is type(second) and first == second
    if isinstance(first, (int, float)) and isinstance(second, (int, float)):
        return first == second
    if isinstance(first, list) and isinstance(second, list):
        return len(first) == len(second) and all(map(_same, first, second))
    if isinstance(first, dict) and isinstance(second, dict):
        return first.keys() == second.keys() and all(_same(first[k], second[k]) for k in first)
    return type(first) is type(second) and first == second


def _input(data: bytes) -> Any:
    if not data:
        return None
    if data[0] % 2:
        try:
            return json.loads(data[1:])
        except (ValueError, RecursionError):
            return None  # not JSON text: json.loads, not jevqueue, refused it
    return fuzzed_value(atheris.FuzzedDataProvider(data[1:]))


def test_one_input(data: bytes) -> None:
    value = _input(data)
    try:
        encoded = canonical_json(value)
    except NonCanonicalArgumentsError:
        try:
            check_canonical(value)
        except NonCanonicalArgumentsError:
            return
        raise AssertionError("check_canonical accepted what canonical_json refused") from None
    assert type(encoded) is bytes and len(encoded) <= MAX_BYTES
    back = json.loads(encoded)
    assert _same(back, value), (value, encoded)
    assert canonical_json(back) == encoded, "the canonical form does not read back to itself"
    if not (isinstance(value, float) and math.isnan(value)):
        assert encoded == rfc8785.dumps(value), (value, encoded)
    if type(value) is dict:
        arguments, _ = canonical_arguments(value)
        assert arguments == encoded, "canonical_arguments disagrees with canonical_json"


if __name__ == "__main__":
    fuzz_main(test_one_input)
