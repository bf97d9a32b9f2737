from __future__ import annotations

import json
import math
from collections import OrderedDict
from typing import Any

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st
from jevqueue.errors import (
    ArgumentsTooDeepError,
    ArgumentsTooLargeError,
    ConfigurationError,
    CyclicArgumentsError,
    IntegerOutOfRangeError,
    NonCanonicalArgumentsError,
    NonFiniteNumberError,
    NonStringKeyError,
    UnsupportedTypeError,
    UsageError,
)
from jevqueue.policy import (
    MAX_BYTES,
    MAX_DEPTH,
    MAX_SAFE_INTEGER,
    canonical_json,
    check_canonical,
)

# Text without lone surrogates (which no UTF-8 document can carry).
text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
safe_ints = st.integers(min_value=-MAX_SAFE_INTEGER, max_value=MAX_SAFE_INTEGER)
# Floats in [2**53, 1e21) print as unsafe integer literals and are refused (tested below).
finite_floats = st.floats(allow_nan=False, allow_infinity=False).filter(
    lambda f: not 2**53 <= abs(f) < 1e21
)


def json_values(scalars: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.recursive(
        scalars,
        lambda children: (
            st.lists(children, max_size=4) | st.dictionaries(text, children, max_size=4)
        ),
        max_leaves=20,
    )


no_floats = json_values(st.none() | st.booleans() | safe_ints | text)
with_floats = json_values(st.none() | st.booleans() | safe_ints | finite_floats | text)


@settings(max_examples=150, deadline=None)
@given(no_floats)
def test_stdlib_route_is_byte_identical_to_rfc8785(value: Any) -> None:
    # Keys include characters above U+FFFF: those take the rfc8785 route, the rest the
    # standard library one. Either way the bytes must equal rfc8785's.
    assert canonical_json(value) == rfc8785.dumps(value)


@settings(max_examples=150, deadline=None)
@given(
    json_values(
        st.none()
        | st.booleans()
        | safe_ints
        | st.text(max_size=8).filter(lambda s: not any(0xD800 <= ord(c) <= 0xDFFF for c in s))
    )
)
def test_plain_json_dumps_equals_rfc8785_for_bmp_keys_without_floats(value: Any) -> None:
    def bmp_keys(node: Any) -> bool:
        if isinstance(node, dict):
            return all(
                max(map(ord, k), default=0) <= 0xFFFF and bmp_keys(v) for k, v in node.items()
            )
        if isinstance(node, list):
            return all(bmp_keys(item) for item in node)
        return True

    if bmp_keys(value):
        stdlib = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        assert stdlib.encode("utf-8") == rfc8785.dumps(value)


@settings(max_examples=150, deadline=None)
@given(with_floats)
def test_floats_are_serialized_as_rfc8785(value: Any) -> None:
    assert canonical_json(value) == rfc8785.dumps(value)


@settings(max_examples=150, deadline=None)
@given(with_floats)
def test_canonicalization_round_trips(value: Any) -> None:
    encoded = canonical_json(value)
    decoded = json.loads(encoded)
    assert canonical_json(decoded) == encoded
    assert decoded == value  # -0.0 == 0 and 1.0 == 1 in Python, so this holds exactly


def test_non_bmp_keys_sort_by_utf16_code_units() -> None:
    # U+1F600 is D83D DE00 in UTF-16, which sorts before U+FF61; by code point it is after.
    value = {"\U0001f600": 1, "\uff61": 2}
    assert canonical_json(value) == rfc8785.dumps(value)
    assert canonical_json(value).index("😀".encode()) < canonical_json(value).index("｡".encode())


def test_numbers_follow_ecmascript() -> None:
    assert canonical_json({"a": 1.0, "b": -0.0, "c": 1e21, "d": 0.1, "e": 9007199254740991.0}) == (
        b'{"a":1,"b":0,"c":1e+21,"d":0.1,"e":9007199254740991}'
    )


def test_booleans_are_not_numbers() -> None:
    assert canonical_json([True, 1, False, 0]) == b"[true,1,false,0]"


@pytest.mark.parametrize(
    ("value", "error", "path"),
    [
        ({"a": b"x"}, UnsupportedTypeError, "/a"),
        ({"a": bytearray(b"x")}, UnsupportedTypeError, "/a"),
        ({"a": {1, 2}}, UnsupportedTypeError, "/a"),
        ({"a": frozenset()}, UnsupportedTypeError, "/a"),
        ({"a": (1, 2)}, UnsupportedTypeError, "/a"),
        ({"a": [object()]}, UnsupportedTypeError, "/a/0"),
        ({"a": OrderedDict()}, UnsupportedTypeError, "/a"),
        ({"a": float("nan")}, NonFiniteNumberError, "/a"),
        ({"a": [float("inf")]}, NonFiniteNumberError, "/a/0"),
        ({"a": -math.inf}, NonFiniteNumberError, "/a"),
        ({"a": MAX_SAFE_INTEGER + 1}, IntegerOutOfRangeError, "/a"),
        ({"a": -(2**64)}, IntegerOutOfRangeError, "/a"),
        ({"a": float(2**53)}, IntegerOutOfRangeError, "/a"),
        ({"a": -1e20}, IntegerOutOfRangeError, "/a"),
        ({1: "x"}, NonStringKeyError, "/1"),
        ({"a": {None: 1}}, NonStringKeyError, "/a/None"),
        ({"a": {("t",): 1}}, NonStringKeyError, "/a/('t',)"),
        ({"a": "\ud800"}, UnsupportedTypeError, "/a"),
        ({"\udfff": 1}, UnsupportedTypeError, "/\\udfff"),
        ({"a/b": {"c~d": b""}}, UnsupportedTypeError, "/a~1b/c~0d"),
    ],
)
def test_non_canonical_values_raise_typed_errors(
    value: Any, error: type[NonCanonicalArgumentsError], path: str
) -> None:
    with pytest.raises(error) as caught:
        canonical_json(value)
    assert caught.value.path == path
    assert isinstance(caught.value, UsageError)


def test_str_subclass_is_refused() -> None:
    class Sneaky(str):
        def startswith(self, *_: Any) -> bool:  # type: ignore[override]
            return False

    with pytest.raises(UnsupportedTypeError):
        canonical_json({"a": Sneaky("x")})


def test_extreme_safe_integers_are_accepted() -> None:
    assert canonical_json([MAX_SAFE_INTEGER, -MAX_SAFE_INTEGER]) == rfc8785.dumps(
        [MAX_SAFE_INTEGER, -MAX_SAFE_INTEGER]
    )


def test_cycles_are_refused() -> None:
    looped: dict[str, Any] = {}
    looped["self"] = looped
    with pytest.raises(CyclicArgumentsError) as caught:
        canonical_json(looped)
    assert caught.value.path == "/self"
    listed: list[Any] = []
    listed.append(listed)
    with pytest.raises(CyclicArgumentsError):
        canonical_json({"a": listed})


def test_shared_but_acyclic_containers_are_fine() -> None:
    shared = {"x": 1}
    assert canonical_json({"a": shared, "b": [shared, shared]}) == (
        b'{"a":{"x":1},"b":[{"x":1},{"x":1}]}'
    )


def test_depth_limit_is_exact() -> None:
    def nested(levels: int) -> Any:
        value: Any = 0
        for _ in range(levels):
            value = [value]
        return value

    canonical_json(nested(MAX_DEPTH))
    with pytest.raises(ArgumentsTooDeepError):
        canonical_json(nested(MAX_DEPTH + 1))


def test_very_deep_nesting_never_escapes_as_recursion_error() -> None:
    value: Any = {}
    cursor = value
    for _ in range(100_000):
        cursor["k"] = {}
        cursor = cursor["k"]
    with pytest.raises(ArgumentsTooDeepError):
        canonical_json(value)


def test_size_limit() -> None:
    with pytest.raises(ArgumentsTooLargeError):
        canonical_json({"a": "x" * MAX_BYTES})
    with pytest.raises(ArgumentsTooLargeError):
        canonical_json(["y" * 1000] * 2000)
    canonical_json({"a": "x" * (MAX_BYTES // 2)})


def test_size_limit_counts_escapes_exactly() -> None:
    # 600 KiB of newlines is 1.2 MiB once escaped: only the exact check catches it.
    with pytest.raises(ArgumentsTooLargeError):
        canonical_json({"a": "\n" * (600 * 1024)})


def test_check_canonical_limits_are_configurable() -> None:
    check_canonical({"a": [1]}, max_depth=2)
    with pytest.raises(ArgumentsTooDeepError):
        check_canonical({"a": [1]}, max_depth=1)
    with pytest.raises(ArgumentsTooLargeError):
        check_canonical({"a": "xyz"}, max_bytes=8)
    with pytest.raises(ConfigurationError):
        check_canonical({}, max_depth=100_000)


def test_key_order_does_not_matter() -> None:
    assert canonical_json({"b": 1, "a": [2, {"d": 3, "c": 4}]}) == canonical_json(
        {"a": [2, {"c": 4, "d": 3}], "b": 1}
    )
