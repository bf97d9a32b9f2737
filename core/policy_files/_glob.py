"""The two glob dialects of policy files, compiled to regular expressions.

*Name globs* (``tools``, ``actors``, ``environments``) match a whole name: ``*`` any run
of characters, ``?`` one character, ``[abc]`` / ``[!abc]`` a character class. A name
without any of those is matched exactly.

*Path globs* (``paths``) match a target path relative to the workspace, with ``/`` as the
separator, the way ``.gitignore`` patterns do:

* ``*``, ``?`` and ``[...]`` never cross a ``/``; a ``**`` segment spans any number of
  directories (zero included);
* a glob without a ``/`` matches a file or directory name at any depth (``*.pem``,
  ``.env*``); a glob with a ``/`` is anchored at the workspace root
  (``.github/workflows/*.yml``); a trailing ``/`` is accepted and changes nothing
  (whether a target is a directory is not known when a call is judged);
* a glob that matches a directory matches everything below it (``.git`` covers
  ``.git/hooks/pre-commit``) — unless compiled with ``cover_below=False``, as globs of
  allowlist rules are: those match the path itself only, so ``*.md`` never lets
  ``src/x.md/app.py`` through, and a directory's contents are allowed with ``docs/**``.

Name globs over ``tools`` are case-sensitive, like the registry's names; over ``actors``
and ``environments`` they match regardless of case (``prod*`` matches ``PROD`` and
``Prod-eu``: the compiler folds both sides). Path globs are case-sensitive
when asked to (allowlists) and case-insensitive otherwise.
"""

from __future__ import annotations

import re

__all__ = ["GlobError", "compile_name_glob", "compile_path_glob", "is_glob"]

_GLOB_CHARS = frozenset("*?[")


class GlobError(ValueError):
    """A glob that cannot mean what its author intended; the message says why."""


def is_glob(pattern: str) -> bool:
    """True when ``pattern`` uses any glob syntax (otherwise it is an exact name)."""
    return any(char in _GLOB_CHARS for char in pattern)


def _class_end(pattern: str, start: int) -> int:
    """Index just past the ``]`` closing the class that opens at ``start``."""
    index = start + 1
    if index < len(pattern) and pattern[index] in "!^":
        index += 1
    if index < len(pattern) and pattern[index] == "]":
        index += 1  # a leading "]" is a literal member
    while index < len(pattern) and pattern[index] != "]":
        index += 1
    if index >= len(pattern):
        raise GlobError(f"'[' at position {start} is never closed; write '[[]' for a literal '['")
    return index + 1


def _translate(pattern: str, *, any_char: str) -> str:
    parts: list[str] = []
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if char == "*":
            parts.append(f"{any_char}*")
            index += 1
        elif char == "?":
            parts.append(any_char)
            index += 1
        elif char == "[":
            end = _class_end(pattern, index)
            body = pattern[index + 1 : end - 1]
            negate = body[:1] in ("!", "^")
            if negate:
                body = body[1:]
            if not body:
                raise GlobError(f"the character class at position {index} is empty")
            escaped = body.replace("\\", "\\\\").replace("^", "\\^").replace("[", "\\[")
            excluded = "/" if any_char != "." else ""
            if negate:
                parts.append(f"[^{escaped}{excluded}]")
            elif excluded:
                parts.append(f"(?![/])[{escaped}]")
            else:
                parts.append(f"[{escaped}]")
            index = end
        else:
            parts.append(re.escape(char))
            index += 1
    return "".join(parts)


def compile_name_glob(pattern: str) -> re.Pattern[str]:
    """Compile a name glob (``write_*``, ``ci-?``) into a full-match regular expression.

    Raises:
        GlobError: the glob is empty, contains a NUL or control character, or has an
            unclosed or empty character class.
    """
    if not pattern:
        raise GlobError("an empty glob matches nothing; remove it or write '*'")
    if any(ord(char) < 0x20 for char in pattern):
        raise GlobError("a glob may not contain control characters (NUL, newline, ...)")
    return _compile(_translate(pattern, any_char="."))


def compile_path_glob(
    pattern: str, *, ignore_case: bool = False, cover_below: bool = True
) -> re.Pattern[str]:
    """Compile a workspace-relative path glob into a full-match regular expression.

    Args:
        pattern: the glob.
        ignore_case: match regardless of case (for rules that object: macOS and Windows
            treat ``.GIT/hooks`` and ``.git/hooks`` as the same directory).
        cover_below: a match on a directory also matches everything below it, the way
            ``.gitignore`` reads a pattern. Right for rules that object (``vendor``
            covers ``vendor/a.py``); wrong for an allowlist, where it would let
            ``*.md`` allow ``src/x.md/app.py``, so allow rules pass ``False``.

    Raises:
        GlobError: the glob is empty, absolute, starts with ``~``, uses ``\\``, has a
            ``.``/``..``/empty segment, a ``**`` that is not a whole segment, a control
            character, or an unclosed or empty character class.
    """
    if not pattern:
        raise GlobError("an empty path glob matches nothing; remove it or write '**'")
    if any(ord(char) < 0x20 for char in pattern):
        raise GlobError("a path glob may not contain control characters (NUL, newline, ...)")
    if pattern.startswith("/"):
        raise GlobError(
            "path globs are relative to the workspace; targets outside it are already "
            "denied by the default rules"
        )
    if pattern.startswith("~"):
        raise GlobError("path globs are relative to the workspace; '~' is not expanded")
    if "\\" in pattern:
        raise GlobError("separate directories with '/', not '\\'")
    body = pattern[:-1] if pattern.endswith("/") else pattern
    segments = body.split("/")
    for segment in segments:
        if segment in ("", ".", ".."):
            shown = segment or "an empty segment"
            raise GlobError(
                f"{shown!s} is not allowed in a path glob: targets are resolved paths "
                "without '.', '..' or '//'"
            )
        if "**" in segment and segment != "**":
            raise GlobError(f"'**' must be a whole path segment, not part of {segment!r}")
    pieces: list[str] = []
    for position, segment in enumerate(segments):
        last = position == len(segments) - 1
        if segment == "**":
            # zero or more whole directories; at the end, anything below
            pieces.append(".*" if last else "(?:[^/]+/)*")
        else:
            pieces.append(_translate(segment, any_char="[^/]") + ("" if last else "/"))
    regex = "".join(pieces)
    if len(segments) == 1 and segments[0] != "**":
        regex = f"(?:.*/)?{regex}"
    if cover_below:  # a match on a directory covers everything below it
        regex = f"{regex}(?:/.*)?"
    return _compile(regex, re.IGNORECASE if ignore_case else 0)


def _compile(regex: str, flags: int = 0) -> re.Pattern[str]:
    try:
        return re.compile(regex, re.DOTALL | flags)
    except re.error as error:  # e.g. a reversed range such as [z-a]
        raise GlobError(f"invalid character class: {error.msg}") from None
