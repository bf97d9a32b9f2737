"""Where each argument of a call came from: the user's words, an output the agent read, or
nowhere the agent was shown.

Prompt injection steers a side effect through a value: an e-mail's body names an address,
a web page a URL, an invoice an IBAN, and the model copies it into a call. A
:class:`Transcript` holds what one task's agent read — what the user wrote (trusted) and
each tool output, with the tool, the call id and the tool's declared
:attr:`~jevqueue.policy.ToolSpec.output_trust` — and :meth:`Transcript.provenance` labels
each argument of a proposed call by where its value occurs:

* ``user`` — in what the user wrote (the user named it, whatever else also shows it);
* ``untrusted`` — in an untrusted output and not in what the user wrote;
* ``trusted`` — only in a trusted tool's output;
* ``unseen`` — nowhere the agent was shown (the model wrote it).

A value is each string or number in the arguments (nested ones by their ``/`` path, such
as ``recipients/0``) of at least :data:`MIN_CHARS` characters, compared case-insensitively
and as a whole token (``bob@x.com`` does not occur in ``bob@x.community``). Inside a text
argument, each e-mail address, URL, IBAN, phone number and path is labelled on its own,
so a link an attacker planted in a message body is seen even when the rest of the body is
the model's.

The :class:`Provenance` of an action is part of what the policy judges and of the action
digest, so an approval binds to it; the audit record keeps the labels and the sources'
tools and call ids, never the content of an output.
"""

from __future__ import annotations

import dataclasses
import json
import re
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from jevqueue.errors import ConfigurationError
from jevqueue.policy._registry import TRUSTED, UNTRUSTED

__all__ = [
    "MIN_CHARS",
    "TRUSTED",
    "UNSEEN",
    "UNTRUSTED",
    "USER",
    "Origin",
    "Provenance",
    "Source",
    "Transcript",
    "provenance_line",
]

USER = "user"
"""The value occurs in what the user wrote."""
UNSEEN = "unseen"
"""The value occurs nowhere the agent was shown: the model wrote it."""
MIN_CHARS = 3
"""Values shorter than this are too common to trace and get no label."""
_LABELS = (USER, UNTRUSTED, TRUSTED, UNSEEN)
_SOURCED = frozenset({UNTRUSTED, TRUSTED})
_SOURCES_KEPT = 3  # the sources named per value (the first, in a stable order)
_WHOLE_VALUE_LIMIT = 10_000  # longer text is traced by what is found inside it only
_DEPTH_LIMIT = 32

# What is labelled on its own inside a text argument, searched in its case-folded form.
_FOUND = (
    ("address", re.compile(r"[a-z0-9._%+\-]+@[a-z0-9\-]+(?:\.[a-z0-9\-]+)+")),
    (
        "url",
        re.compile(
            r"(?:[a-z][a-z0-9+.\-]*://|www\.)[^\s<>\"'`]+"
            r"|\b[a-z0-9\-]+(?:\.[a-z0-9\-]+)*\.[a-z]{2,}/[^\s<>\"'`]*"
        ),
    ),
    (
        "iban",
        re.compile(
            r"\b[a-z]{2}[0-9]{2}(?:[a-z0-9]{11,30}|(?: [a-z0-9]{4}){2,7}(?: [a-z0-9]{1,3})?)\b"
        ),
    ),
    ("phone", re.compile(r"(?<![\w+])\+?[0-9][0-9 ().\-]{6,}[0-9](?!\w)")),
    ("path", re.compile(r"(?<![\w/])(?:~|\.{1,2})?/[\w.\-]+(?:/[\w.\-]+)+")),
)
_TRAILING = ".,;:!?)]}"


@dataclass(frozen=True)
class Source:
    """One tool output a value occurs in.

    Attributes:
        tool: the tool whose output it was.
        call_id: the call that returned it, when the framework gave one.
        at: where in the output: ``""`` for plain text, else a ``/`` path into the
            returned structure (``/2/body``: the ``body`` of the third item).
        trust: the tool's declared output trust.
    """

    tool: str
    call_id: str | None
    at: str
    trust: str

    def describe(self) -> str:
        """``the body of item 3 of read_inbox's output (call c1)``."""
        where = _where(self.at)
        call = f" (call {self.call_id})" if self.call_id else ""
        return f"{where}{self.tool}'s output{call}"

    def to_dict(self) -> dict[str, Any]:
        """The source as the digest and the audit log keep it: no content."""
        return {"at": self.at, "call_id": self.call_id, "tool": self.tool}


def _where(at: str) -> str:
    parts = [part for part in at.split("/") if part]
    if not parts:
        return ""
    words = []
    for part in reversed(parts):
        words.append(f"item {int(part) + 1}" if part.isdigit() else f"the {part!r} field")
    return " of ".join(words) + " of "


@dataclass(frozen=True)
class Origin:
    """Where one value of a call's arguments came from.

    Attributes:
        argument: the argument's ``/`` path (``to``, ``recipients/0``).
        label: ``user``, ``untrusted``, ``trusted`` or ``unseen``.
        sources: the outputs the value occurs in (for ``untrusted`` and ``trusted``).
        kind: ``""`` for the argument's whole value; for a value found inside a text
            argument, what it is: ``address``, ``url``, ``iban``, ``phone`` or ``path``.
        found: the value found inside the text (``""`` for the whole value).
    """

    argument: str
    label: str
    sources: tuple[Source, ...] = ()
    kind: str = ""
    found: str = ""

    @property
    def field(self) -> str:
        """The top-level argument name (what policy rules name)."""
        return self.argument.split("/", 1)[0]

    def describe(self) -> str:
        """``to came from item 3 of read_inbox's output (call c1), not from your request``."""
        what = f"the {self.kind} {self.found!r} in {self.argument}" if self.kind else self.argument
        if self.label == USER:
            return f"{what} came from your request"
        if self.label == UNSEEN:
            return f"{what} was written by the agent (seen in no request or output)"
        where = " and ".join(source.describe() for source in self.sources) or "an output"
        if self.label == UNTRUSTED:
            return f"{what} came from {where}, not from your request"
        return f"{what} came from {where} (a trusted tool)"

    def to_dict(self) -> dict[str, Any]:
        """The label as the digest and the audit log keep it: no argument or output text."""
        document: dict[str, Any] = {"argument": self.argument, "label": self.label}
        if self.kind:
            document["kind"] = self.kind
        if self.sources:
            document["sources"] = [source.to_dict() for source in self.sources]
        return document


@dataclass(frozen=True)
class Provenance:
    """The origins of every traceable value of one call's arguments."""

    origins: tuple[Origin, ...] = ()

    def untrusted(self, fields: frozenset[str] | None = None) -> tuple[Origin, ...]:
        """The values that came from untrusted data (of ``fields`` only, when given)."""
        return tuple(
            origin
            for origin in self.origins
            if origin.label == UNTRUSTED and (fields is None or origin.field in fields)
        )

    def of(self, argument: str) -> tuple[Origin, ...]:
        """The origins of one top-level argument (its whole value and what is inside)."""
        return tuple(origin for origin in self.origins if origin.field == argument)

    def describe(self) -> str:
        """One line per value that did not come from the user's request."""
        return "\n".join(origin.describe() for origin in self.origins if origin.label != USER)

    def to_document(self) -> list[dict[str, Any]]:
        """Every label, in its stable order: no argument or output text."""
        return [origin.to_dict() for origin in self.origins]

    def digest_document(self) -> list[dict[str, Any]]:
        """What the action digest covers: the values that came from a tool output
        (``untrusted`` or ``trusted``) with their sources. An approval binds to which
        output steered the call; whether the rest was the user's or the model's words does
        not change the action, so a plugin that cannot see the user's request digests a
        call as one that can."""
        return [origin.to_dict() for origin in self.origins if origin.label in _SOURCED]

    def __bool__(self) -> bool:
        return bool(self.origins)


def provenance_line(provenance: Provenance) -> str:
    """The labels as one line of an audit record: each value's argument, what it is, its
    label and the sources' tools, call ids and places — never a value or an output's text.

    ``provenance: body=unseen; body[url]=untrusted<read_inbox#c1/1/body>; to=user``
    """
    parts = []
    for origin in provenance.origins:
        name = f"{origin.argument}[{origin.kind}]" if origin.kind else origin.argument
        sources = ",".join(
            f"{source.tool}#{source.call_id or '-'}{source.at}" for source in origin.sources
        )
        parts.append(f"{name}={origin.label}" + (f"<{sources}>" if sources else ""))
    return "provenance: " + "; ".join(parts)


@dataclass(frozen=True)
class _Output:
    tool: str
    call_id: str | None
    trust: str
    leaves: tuple[tuple[str, str], ...]  # (where, case-folded text)


class Transcript:
    """What one task's agent read: the user's words and every tool output.

    Thread-safe. Recording the same user text or the same call's output twice keeps one
    copy, so a framework that replays its history (a resumed LangGraph run) records it
    again harmlessly and labels come out the same.

    Args:
        limit: the characters kept; past it the oldest outputs are dropped, and a value
            found nowhere is then labelled untrusted (it may have been in what was
            dropped), to fail closed.
    """

    def __init__(self, *, limit: int = 4_000_000) -> None:
        if type(limit) is not int or limit <= 0:
            raise ConfigurationError("Transcript limit must be a positive number of characters")
        self._limit = limit
        self._size = 0
        self._user: list[str] = []
        self._outputs: list[_Output] = []
        self._calls: set[str] = set()
        self._dropped = False
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._user) + len(self._outputs)

    def user(self, text: str) -> None:
        """Record what the user wrote (trusted)."""
        if not isinstance(text, str):
            raise ConfigurationError(
                f"what the user wrote must be text, not {type(text).__name__}: pass the "
                "message's text"
            )
        folded = text.casefold()
        with self._lock:
            if folded in self._user:
                return
            self._user.append(folded)
            self._grow(len(folded))

    def output(self, tool: str, call_id: str | None, output: Any, trust: str) -> None:
        """Record one tool output, as returned (text, JSON text, or a structure)."""
        if trust not in (TRUSTED, UNTRUSTED):
            raise ConfigurationError(
                f"output trust must be 'trusted' or 'untrusted', not {trust!r}"
            )
        call_id = call_id or None  # some frameworks give "" for "no id"
        if call_id is not None:
            with self._lock:
                if call_id in self._calls:
                    return  # recorded already: not read (nor parsed) again
        leaves = tuple(_leaves(output))
        with self._lock:
            if call_id is not None:
                if call_id in self._calls:
                    return
                self._calls.add(call_id)
            self._outputs.append(_Output(str(tool), call_id, trust, leaves))
            self._grow(sum(len(text) for _, text in leaves))

    def _grow(self, size: int) -> None:
        self._size += size
        while self._size > self._limit and self._outputs:
            dropped = self._outputs.pop(0)
            self._size -= sum(len(text) for _, text in dropped.leaves)
            self._dropped = True

    def provenance(self, arguments: Mapping[str, Any]) -> Provenance:
        """Label every traceable value of ``arguments`` (see the module docstring)."""
        with self._lock:
            user = tuple(self._user)
            outputs = tuple(self._outputs)
            dropped = self._dropped
        origins: list[Origin] = []
        for argument, value in _values(arguments, ""):
            texts = _texts(value)
            if texts is not None and len(texts[0]) <= _WHOLE_VALUE_LIMIT:
                origins.append(_label(argument, texts, user, outputs, dropped))
            if isinstance(value, str):
                folded = value.casefold()
                for kind, found in _found(folded):
                    if found == folded.strip():
                        continue  # the whole value, labelled above
                    origin = _label(argument, (found,), user, outputs, dropped)
                    origins.append(dataclasses.replace(origin, kind=kind, found=found))
        return Provenance(tuple(origins))


def _label(
    argument: str,
    texts: tuple[str, ...],
    user: tuple[str, ...],
    outputs: tuple[_Output, ...],
    dropped: bool,
) -> Origin:
    if any(_occurs(text, said) for text in texts for said in user):
        return Origin(argument, USER)
    untrusted: list[Source] = []
    trusted: list[Source] = []
    for output in outputs:
        for at, text in output.leaves:
            if any(_occurs(needle, text) for needle in texts):
                source = Source(output.tool, output.call_id, at, output.trust)
                (untrusted if output.trust == UNTRUSTED else trusted).append(source)
                break
    if untrusted:
        return Origin(argument, UNTRUSTED, tuple(sorted(untrusted, key=_order)[:_SOURCES_KEPT]))
    if dropped:
        return Origin(argument, UNTRUSTED)
    if trusted:
        return Origin(argument, TRUSTED, tuple(sorted(trusted, key=_order)[:_SOURCES_KEPT]))
    return Origin(argument, UNSEEN)


def _order(source: Source) -> tuple[str, str, str, str]:
    return (source.tool, source.call_id or "", source.at, source.trust)


def _occurs(needle: str, haystack: str) -> bool:
    """Whether ``needle`` occurs in ``haystack`` as a whole token (both case-folded)."""
    start = haystack.find(needle)
    if start < 0:
        return False
    open_edge = needle[0].isalnum()
    close_edge = needle[-1].isalnum()
    size = len(needle)
    while start >= 0:
        before = haystack[start - 1] if start else " "
        end = start + size
        after = haystack[end] if end < len(haystack) else " "
        if not (open_edge and before.isalnum()) and not (close_edge and after.isalnum()):
            return True
        start = haystack.find(needle, start + 1)
    return False


def _texts(value: Any) -> tuple[str, ...] | None:
    """The spellings of one value to look for, or ``None`` when it is too short."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, str):
        text = value.casefold().strip()
        return (text,) if len(text) >= MIN_CHARS else None
    if isinstance(value, int):
        text = str(value)
        return (text,) if len(text) >= MIN_CHARS else None
    if isinstance(value, float):
        spellings = [repr(value)]
        if value.is_integer():
            spellings.insert(0, str(int(value)))
        kept = tuple(text for text in spellings if len(text) >= MIN_CHARS)
        return kept or None
    return None


def _values(value: Any, path: str, depth: int = 0) -> Iterator[tuple[str, Any]]:
    if depth > _DEPTH_LIMIT:
        return
    if isinstance(value, Mapping):
        for key in sorted(value, key=str):
            yield from _values(value[key], f"{path}/{key}" if path else str(key), depth + 1)
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            yield from _values(item, f"{path}/{index}", depth + 1)
    elif path:
        yield path, value


def _found(folded: str) -> Iterator[tuple[str, str]]:
    """Each address, URL, IBAN, phone number and path inside a text, in order, once."""
    seen: set[str] = set()
    taken: list[tuple[int, int]] = []
    for kind, pattern in _FOUND:
        for match in pattern.finditer(folded):
            start, end = match.span()
            if any(start < stop and end > begin for begin, stop in taken):
                continue  # part of an address or URL already found
            text = match.group().rstrip(_TRAILING)
            if len(text) < MIN_CHARS or text in seen:
                continue
            if kind == "phone" and sum(char.isdigit() for char in text) < 7:
                continue
            seen.add(text)
            taken.append((start, end))
            yield kind, text


def _leaves(output: Any, at: str = "", depth: int = 0) -> Iterator[tuple[str, str]]:
    """The texts of an output, each with where it is (see :class:`Source`)."""
    if depth > _DEPTH_LIMIT:
        yield at, repr(output).casefold()
        return
    if isinstance(output, bytes):
        output = output.decode("utf-8", "replace")
    if isinstance(output, str):
        stripped = output.strip()
        if stripped[:1] in ("{", "[") and depth == 0:
            try:
                parsed = json.loads(stripped)
            except ValueError:
                pass
            else:
                yield from _leaves(parsed, at, depth + 1)
                return
        yield at, output.casefold()
        return
    if isinstance(output, bool) or output is None:
        return
    if isinstance(output, (int, float)):
        yield at, repr(output)
        return
    if isinstance(output, Mapping):
        for key, value in output.items():
            yield from _leaves(value, f"{at}/{key}", depth + 1)
        return
    if isinstance(output, (list, tuple)):
        for index, item in enumerate(output):
            yield from _leaves(item, f"{at}/{index}", depth + 1)
        return
    dump = getattr(output, "model_dump", None)  # pydantic models
    if callable(dump):
        try:
            data = dump(mode="json")
        except Exception:  # a model that cannot dump itself is read as its text
            data = None
        if isinstance(data, (Mapping, list)):
            yield from _leaves(data, at, depth + 1)
            return
    if dataclasses.is_dataclass(output) and not isinstance(output, type):
        yield from _leaves(dataclasses.asdict(output), at, depth + 1)
        return
    yield at, str(output).casefold()
