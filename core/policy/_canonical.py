"""Canonical JSON: the one byte form of a tool call that digests and approvals bind to.

Only JSON values are accepted: ``None``, ``bool``, ``int``, ``float``, ``str``, ``list`` and
``dict`` with ``str`` keys — their exact built-in types, not subclasses, because a subclass
can redefine comparison or string methods and so look different to a policy rule than it
will to the tool. Everything else is refused with a typed
:class:`~jevqueue.errors.NonCanonicalArgumentsError` whose ``.path`` points at the value:

============================  ==========================================================
refused                       error
============================  ==========================================================
bytes, sets, tuples, objects  :class:`~jevqueue.errors.UnsupportedTypeError`
NaN, +Infinity, -Infinity     :class:`~jevqueue.errors.NonFiniteNumberError`
``|n| > 2**53 - 1``           :class:`~jevqueue.errors.IntegerOutOfRangeError`
non-``str`` mapping keys      :class:`~jevqueue.errors.NonStringKeyError`
a container inside itself     :class:`~jevqueue.errors.CyclicArgumentsError`
nesting deeper than 64        :class:`~jevqueue.errors.ArgumentsTooDeepError`
more than 1 MiB canonical     :class:`~jevqueue.errors.ArgumentsTooLargeError`
lone UTF-16 surrogates        :class:`~jevqueue.errors.UnsupportedTypeError`
============================  ==========================================================

Large integers: RFC 8785 writes every number as an IEEE-754 double, so an integer beyond
``2**53 - 1`` would silently change value (``2**53 + 1`` reads back as ``2**53``) and two
different calls would share a digest. Such integers are refused; pass them as strings.
For the same reason a float in ``[2**53, 1e21)`` is refused: RFC 8785 prints it as a bare
integer literal, which a reader would parse as such an unsafe integer. Every accepted
value therefore reads back, from its canonical form, as an accepted equal value.
``True``/``False`` are booleans, never the numbers 1 and 0.

Serialization follows RFC 8785 (JSON Canonicalization Scheme) through the ``rfc8785``
package. Values without floats whose object keys all lie in the Basic Multilingual Plane
take a faster, byte-identical route through the standard library: for them RFC 8785 and
``json.dumps(sort_keys=True, separators=(",", ":"), ensure_ascii=False)`` agree (integers
print the same, both escape exactly ``"``, ``\\`` and U+0000..U+001F with the same short
forms, and sorting by UTF-16 code units equals sorting by code points when no key holds a
character above U+FFFF). A property test pins this equivalence against ``rfc8785.dumps``.
Validation never recurses deeper than the depth limit, so no input raises ``RecursionError``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import Any

import rfc8785
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
)

__all__ = [
    "MAX_BYTES",
    "MAX_DEPTH",
    "MAX_SAFE_INTEGER",
    "canonical_arguments",
    "canonical_json",
    "check_canonical",
    "encode_json_string",
    "encode_prevalidated",
    "encode_prevalidated_text",
]

MAX_DEPTH = 64
"""How many containers may nest inside one another (a flat ``{"a": 1}`` has depth 1)."""

MAX_BYTES = 1 << 20
"""The largest canonical payload accepted, in bytes of UTF-8 (1 MiB)."""

MAX_SAFE_INTEGER = 2**53 - 1
"""The largest integer magnitude a JSON number (an IEEE-754 double) holds exactly."""

# RFC 8785 prints floats in [2**53, 1e21) as bare integer literals; a reader would take
# them for integers outside the safe range, so they are refused like those integers.
_FLOAT_AS_BIG_INTEGER = float(2**53)
_EXPONENT_FORM = 1e21
_DEPTH_CEILING = 200  # beyond this, validation itself could exhaust the interpreter's stack

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_ABOVE_BMP = re.compile("[\U00010000-\U0010ffff]")
_STDLIB_ENCODE: Callable[[Any], str] = json.JSONEncoder(
    ensure_ascii=False,
    sort_keys=True,
    separators=(",", ":"),
    allow_nan=False,
    check_circular=False,  # cycles are refused during validation
).encode
encode_json_string: Callable[[str], str] = json.encoder.encode_basestring
"""JSON-quote one string exactly as RFC 8785 does (for strings only)."""


def _reusable_c_encoder() -> Callable[[Any], str] | None:
    # JSONEncoder.encode builds a new C encoder on every call; building it once saves a
    # third of the cost of encoding a small dict. Used only if it matches exactly.
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # pragma: no cover - interpreters without the C accelerator
        return None
    try:
        iterencode = make(None, None, encode_json_string, None, ":", ",", True, False, False)

        def encode(value: Any) -> str:
            return "".join(iterencode(value, 0))

        sample = {"b": [1, None, True, "\u00e9\n"], "a": {"c": -2}}
        if encode(sample) != _STDLIB_ENCODE(sample):  # pragma: no cover
            return None
    except Exception:  # pragma: no cover - a changed C signature
        return None
    return encode


_STDLIB_ENCODE = _reusable_c_encoder() or _STDLIB_ENCODE

_HINTS: dict[type, str] = {
    bytes: "decode it to str, or base64-encode it",
    bytearray: "decode it to str, or base64-encode it",
    memoryview: "decode it to str, or base64-encode it",
    tuple: "use a list",
    set: "use a sorted list",
    frozenset: "use a sorted list",
}


class _Refusal(Exception):
    """Internal: carries a refusal up the stack, collecting the path on the way."""

    def __init__(self, error: type[NonCanonicalArgumentsError], message: str) -> None:
        super().__init__(message)
        self.error = error
        self.message = message
        self.parts: list[str] = []

    def raise_typed(self) -> None:
        pointer = "".join(f"/{part}" for part in reversed(self.parts))
        raise self.error(pointer, self.message) from None


def _key_part(key: object) -> str:
    # Printable whatever the key holds (a lone surrogate would break printing the error).
    text = str(key).encode("utf-8", "backslashreplace").decode("utf-8")
    if len(text) > 64:
        text = text[:61] + "..."
    return text.replace("~", "~0").replace("/", "~1")


_TOO_LARGE = (
    "the payload exceeds the {}-byte limit: pass large content by reference (for example a "
    "file path) instead"
)
_SURROGATE = (
    "a string holds a lone UTF-16 surrogate, which UTF-8 cannot encode: decode the text "
    "properly before passing it"
)


class _Walk:
    """One validation pass; ``needs_rfc8785`` says whether the fast encoder is inexact.

    Each container costs one call; strings and other scalars are checked inline, which is
    what keeps a typical flat argument dict at a few microseconds.
    """

    __slots__ = ("active", "budget", "max_bytes", "max_depth", "needs_rfc8785")

    def __init__(self, max_depth: int, max_bytes: int) -> None:
        self.max_depth = max_depth
        self.max_bytes = max_bytes
        # A lower bound on the encoded size, so a huge payload is refused before encoding.
        self.budget = max_bytes
        self.active: set[int] = set()
        self.needs_rfc8785 = False

    def top(self, value: Any) -> None:
        kind = type(value)
        if kind is dict or kind is list:
            self.container(value, 1)
        elif kind is str:
            self.budget -= len(value) + 2
            if self.budget < 0:
                raise _Refusal(ArgumentsTooLargeError, _TOO_LARGE.format(self.max_bytes))
            if not value.isascii() and _LONE_SURROGATE.search(value):
                raise _Refusal(UnsupportedTypeError, _SURROGATE)
        else:
            self.scalar(value, kind)

    def scalar(self, value: Any, kind: type) -> None:
        """Check a value that is neither a str nor a container."""
        if kind is int:
            self.budget -= 1
            if not -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
                raise _Refusal(
                    IntegerOutOfRangeError,
                    "an integer beyond ±(2**53 - 1) cannot be a JSON number without losing "
                    "precision: pass it as a string",
                )
        elif value is None or kind is bool:
            self.budget -= 4
        elif kind is float:
            self.budget -= 1
            if not math.isfinite(value):
                raise _Refusal(
                    NonFiniteNumberError,
                    "NaN and infinities have no JSON spelling: pass a finite number or null",
                )
            if _FLOAT_AS_BIG_INTEGER <= abs(value) < _EXPONENT_FORM:
                raise _Refusal(
                    IntegerOutOfRangeError,
                    "this float prints as an integer beyond ±(2**53 - 1), which readers parse "
                    "as an imprecise integer: pass it as a string",
                )
            self.needs_rfc8785 = True
        else:
            hint = _HINTS.get(kind, "convert it to a plain JSON value (dict, list, str, ...)")
            raise _Refusal(
                UnsupportedTypeError,
                f"a {kind.__name__} is not a canonical JSON value: {hint}",
            )

    def container(self, value: dict[Any, Any] | list[Any], depth: int) -> None:
        if depth > self.max_depth:
            raise _Refusal(
                ArgumentsTooDeepError,
                f"nesting exceeds the limit of {self.max_depth} levels: flatten the arguments",
            )
        ident = id(value)
        active = self.active
        if ident in active:
            raise _Refusal(
                CyclicArgumentsError,
                "a container contains itself, which JSON cannot express: pass a tree",
            )
        active.add(ident)
        budget = self.budget - 2
        is_dict = type(value) is dict
        pairs = value.items() if is_dict else enumerate(value)  # type: ignore[union-attr]
        for key, item in pairs:
            try:
                if is_dict:
                    if type(key) is not str:
                        raise _Refusal(
                            NonStringKeyError,
                            f"a {type(key).__name__} key is not allowed: JSON object keys "
                            "are strings",
                        )
                    budget -= len(key) + 3
                    if not key.isascii():
                        if _LONE_SURROGATE.search(key):
                            raise _Refusal(UnsupportedTypeError, _SURROGATE)
                        if _ABOVE_BMP.search(key):
                            self.needs_rfc8785 = True
                kind = type(item)
                if kind is str:
                    budget -= len(item) + 3
                    if not item.isascii() and _LONE_SURROGATE.search(item):
                        raise _Refusal(UnsupportedTypeError, _SURROGATE)
                elif kind is dict or kind is list:
                    self.budget = budget
                    self.container(item, depth + 1)
                    budget = self.budget
                else:
                    self.budget = budget
                    self.scalar(item, kind)
                    budget = self.budget
                if budget < 0:
                    raise _Refusal(ArgumentsTooLargeError, _TOO_LARGE.format(self.max_bytes))
            except _Refusal as refusal:
                refusal.parts.append(_key_part(key))
                raise
        self.budget = budget
        active.discard(ident)


def _flat_and_plain(value: Any, max_depth: int) -> bool:
    """True for the common case: a dict of ASCII strings, safe ints, bools and None.

    Such a value needs no path bookkeeping, cycle tracking or rfc8785 route; anything
    else returns False and gets the full walk (which also produces the typed errors).
    """
    if type(value) is not dict or max_depth < 1:
        return False
    size = 0
    for key, item in value.items():
        if type(key) is not str or not key.isascii():
            return False
        kind = type(item)
        if kind is str:
            if not item.isascii():
                return False
            size += len(item)
        elif kind is int:
            if not -MAX_SAFE_INTEGER <= item <= MAX_SAFE_INTEGER:
                return False
        elif item is not None and kind is not bool:
            return False
    return size <= MAX_BYTES


def _validated(value: Any, max_depth: int, max_bytes: int) -> bool:
    if max_depth == MAX_DEPTH and _flat_and_plain(value, max_depth):
        return False  # the exact size is checked after encoding
    if not 0 <= max_depth <= _DEPTH_CEILING:
        raise ConfigurationError(f"max_depth must be between 0 and {_DEPTH_CEILING}")
    if max_bytes < 0:
        raise ConfigurationError("max_bytes must not be negative")
    walk = _Walk(max_depth, max_bytes)
    try:
        walk.top(value)
    except _Refusal as refusal:
        refusal.raise_typed()
    except RecursionError:
        # Only reachable when the caller's own stack is already nearly exhausted.
        raise ArgumentsTooDeepError(
            "", "the arguments are nested too deeply to validate here: flatten them"
        ) from None
    return walk.needs_rfc8785


def _encode(value: Any, needs_rfc8785: bool, max_bytes: int) -> bytes:
    if needs_rfc8785:
        try:
            encoded = rfc8785.dumps(value)
        except rfc8785.CanonicalizationError as error:  # pragma: no cover - validated above
            raise NonCanonicalArgumentsError("", f"cannot canonicalize ({error})") from None
    else:
        encoded = _STDLIB_ENCODE(value).encode("utf-8")
    if len(encoded) > max_bytes:
        raise ArgumentsTooLargeError(
            "",
            f"the canonical form is {len(encoded)} bytes, over the {max_bytes}-byte limit: "
            "pass large content by reference (for example a file path) instead",
        )
    return encoded


def canonical_json(value: Any, *, max_depth: int = MAX_DEPTH, max_bytes: int = MAX_BYTES) -> bytes:
    """Validate ``value`` and return its RFC 8785 canonical form as UTF-8 bytes.

    Args:
        value: a JSON value built from ``dict``, ``list``, ``str``, ``int``, ``float``,
            ``bool`` and ``None``.
        max_depth: the deepest nesting accepted.
        max_bytes: the largest canonical form accepted.

    Returns:
        The canonical bytes; equal values give equal bytes whatever their key order.

    Raises:
        NonCanonicalArgumentsError: a subclass naming what is wrong and where (``.path``).
    """
    needs_rfc8785 = _validated(value, max_depth, max_bytes)
    return _encode(value, needs_rfc8785, max_bytes)


# The JSON of an object key and its colon, per key seen (tool argument names repeat).
_KEY_PREFIXES: dict[str, str] = {}
_KEY_PREFIX_LIMIT = 1024


def _flat_text(value: dict[Any, Any]) -> str | None:
    """The canonical form of a dict of ASCII strings under ASCII keys, else ``None``.

    The commonest tool arguments (paths, commands, file contents) have exactly this
    shape. Keys are exact ``str`` and ASCII, so sorting by code point is RFC 8785's
    order, and each string is quoted by the same escaper the encoder uses.
    """
    for key, item in value.items():
        if type(key) is not str or type(item) is not str or not item.isascii():
            return None
    prefixes = _KEY_PREFIXES
    parts = []
    for key in sorted(value):
        prefix = prefixes.get(key)
        if prefix is None:
            if not key.isascii():
                return None
            if len(prefixes) >= _KEY_PREFIX_LIMIT:
                prefixes.clear()
            prefix = prefixes[key] = encode_json_string(key) + ":"
        parts.append(prefix + encode_json_string(value[key]))
    return "{" + ",".join(parts) + "}"


def canonical_arguments(value: Any) -> tuple[bytes, bool]:
    """:func:`canonical_json` with the default limits, and whether ``value`` is flat.

    Returns:
        The canonical bytes, and True when ``value`` is a dict of plain scalars (no
        nested container), False when that was not established.

    Raises:
        NonCanonicalArgumentsError: as :func:`canonical_json`.
    """
    if type(value) is dict:
        encoded_text = _flat_text(value)
        # ASCII: one byte per character. Larger payloads take the route below, which
        # reports them.
        if encoded_text is not None and len(encoded_text) <= MAX_BYTES:
            return encoded_text.encode("ascii"), True
    if _flat_and_plain(value, MAX_DEPTH):
        encoded = _STDLIB_ENCODE(value).encode("utf-8")
        if len(encoded) > MAX_BYTES:
            _encode(value, False, MAX_BYTES)  # raises the size error
        return encoded, True
    return canonical_json(value), False


def encode_prevalidated(value: Any) -> bytes:
    """Encode a value already known to be canonical and float-free with BMP-only keys.

    For internal documents assembled from validated parts (contexts, resolved paths). The
    result equals :func:`canonical_json` for such values, without validating again.

    Raises:
        UnsupportedTypeError: a string cannot be encoded as UTF-8 (a lone surrogate).
    """
    try:
        return _STDLIB_ENCODE(value).encode("utf-8")
    except UnicodeEncodeError:
        raise UnsupportedTypeError("", _SURROGATE) from None


def encode_prevalidated_text(value: Any) -> str:
    """Like :func:`encode_prevalidated`, but return the text before UTF-8 encoding."""
    return _STDLIB_ENCODE(value)


def check_canonical(value: Any, *, max_depth: int = MAX_DEPTH, max_bytes: int = MAX_BYTES) -> None:
    """Raise if ``value`` is not a canonical JSON value within the limits.

    Args:
        value: the value to check.
        max_depth: the deepest nesting accepted.
        max_bytes: the largest canonical form accepted.

    Raises:
        NonCanonicalArgumentsError: a subclass naming what is wrong and where (``.path``).
    """
    canonical_json(value, max_depth=max_depth, max_bytes=max_bytes)
