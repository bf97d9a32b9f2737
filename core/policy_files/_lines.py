"""Where each key of a TOML document sits: line numbers for policy-file mistakes.

``tomllib`` returns plain dicts without positions. A policy-file mistake is only useful
with its line, so this module scans the (already valid) TOML text once and maps every key
path to the line it was written on::

    ("rule", 0)                      the ``[[rule]]`` header of the first rule
    ("rule", 0, "paths")             its ``paths = [...]`` line
    ("rule", 0, "paths", 2)          the line of the third element of that array
    ("rule", 1, "arguments", "Cwd")  a key of an inline table or a ``[rule.arguments]`` table

The scanner only has to understand valid TOML (the text was parsed by ``tomllib`` first),
so it tracks just enough: headers, dotted and quoted keys, strings of the four kinds,
arrays and inline tables, comments. Scalars are skipped as opaque text.
"""

from __future__ import annotations

from typing import TypeAlias

KeyPath: TypeAlias = tuple[str | int, ...]

__all__ = ["KeyPath", "TomlLineIndex"]

_BARE_KEY_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


class TomlLineIndex:
    """Line numbers (1-based) of every table, key and array element of a TOML text.

    Args:
        text: the TOML document; it must already have parsed without error.
    """

    def __init__(self, text: str) -> None:
        self._text = text
        self._pos = 0
        self._line = 1
        self.lines: dict[KeyPath, int] = {}
        self._aot_counts: dict[KeyPath, int] = {}
        self._scan()

    def line_of(self, path: KeyPath) -> int | None:
        """The line of ``path``, or of its closest ancestor that has one."""
        probe = tuple(path)
        while probe:
            line = self.lines.get(probe)
            if line is not None:
                return line
            probe = probe[:-1]
        return None

    # --- scanning -------------------------------------------------------------------

    def _peek(self, offset: int = 0) -> str:
        index = self._pos + offset
        return self._text[index] if index < len(self._text) else ""

    def _advance(self, count: int = 1) -> None:
        for _ in range(count):
            if self._pos < len(self._text):
                if self._text[self._pos] == "\n":
                    self._line += 1
                self._pos += 1

    def _skip_blank(self, *, newlines: bool) -> None:
        while self._pos < len(self._text):
            char = self._text[self._pos]
            if char in " \t\r" or (newlines and char == "\n"):
                self._advance()
            elif char == "#":
                while self._pos < len(self._text) and self._text[self._pos] != "\n":
                    self._advance()
            else:
                return

    def _scan(self) -> None:
        current: KeyPath = ()
        while True:
            self._skip_blank(newlines=True)
            if self._pos >= len(self._text):
                return
            line = self._line
            if self._text.startswith("[[", self._pos):
                self._advance(2)
                keys = self._read_key()
                self._skip_blank(newlines=False)
                self._advance(2)  # "]]"
                prefix = self._resolve(keys[:-1])
                table = (*prefix, keys[-1])
                count = self._aot_counts.get(table, 0)
                self._aot_counts[table] = count + 1
                current = (*table, count)
                self.lines.setdefault(table, line)
                self.lines[current] = line
            elif self._peek() == "[":
                self._advance()
                keys = self._read_key()
                self._skip_blank(newlines=False)
                self._advance()  # "]"
                current = self._resolve(keys)
                self.lines.setdefault(current, line)
            else:
                keys = self._read_key()
                self._skip_blank(newlines=False)
                self._advance()  # "="
                path = (*current, *keys)
                for depth in range(len(current) + 1, len(path) + 1):
                    self.lines.setdefault(path[:depth], line)
                self._skip_blank(newlines=False)
                self._read_value(path)

    def _resolve(self, keys: list[str]) -> KeyPath:
        """Map header keys to a path, entering the latest element of arrays of tables."""
        resolved: KeyPath = ()
        for key in keys:
            resolved = (*resolved, key)
            count = self._aot_counts.get(resolved)
            if count:
                resolved = (*resolved, count - 1)
        return resolved

    def _read_key(self) -> list[str]:
        keys: list[str] = []
        while True:
            self._skip_blank(newlines=False)
            char = self._peek()
            if char == '"':
                keys.append(self._read_basic_string())
            elif char == "'":
                keys.append(self._read_literal_string())
            else:
                start = self._pos
                while self._peek() and self._peek() in _BARE_KEY_CHARS:
                    self._advance()
                keys.append(self._text[start : self._pos])
            self._skip_blank(newlines=False)
            if self._peek() == ".":
                self._advance()
                continue
            return keys

    def _read_value(self, path: KeyPath) -> None:
        char = self._peek()
        if char == "[":
            self._read_array(path)
        elif char == "{":
            self._read_inline_table(path)
        elif self._text.startswith('"""', self._pos):
            self._read_multiline('"""')
        elif self._text.startswith("'''", self._pos):
            self._read_multiline("'''")
        elif char == '"':
            self._read_basic_string()
        elif char == "'":
            self._read_literal_string()
        else:
            while self._peek() and self._peek() not in ",]}\n#":
                self._advance()

    def _read_array(self, path: KeyPath) -> None:
        self._advance()  # "["
        index = 0
        while True:
            self._skip_blank(newlines=True)
            if self._peek() in ("]", ""):
                self._advance()
                return
            if self._peek() == ",":
                self._advance()
                continue
            self.lines.setdefault((*path, index), self._line)
            self._read_value((*path, index))
            index += 1

    def _read_inline_table(self, path: KeyPath) -> None:
        self._advance()  # "{"
        while True:
            self._skip_blank(newlines=True)
            if self._peek() in ("}", ""):
                self._advance()
                return
            if self._peek() == ",":
                self._advance()
                continue
            line = self._line
            keys = self._read_key()
            self._skip_blank(newlines=False)
            self._advance()  # "="
            key_path = (*path, *keys)
            for depth in range(len(path) + 1, len(key_path) + 1):
                self.lines.setdefault(key_path[:depth], line)
            self._skip_blank(newlines=False)
            self._read_value(key_path)

    def _read_basic_string(self) -> str:
        self._advance()  # opening quote
        chars: list[str] = []
        while self._peek() not in ('"', ""):
            if self._peek() == "\\":
                # Keys with escapes are rare; keep the escaped character verbatim.
                self._advance()
            chars.append(self._peek())
            self._advance()
        self._advance()  # closing quote
        return "".join(chars)

    def _read_literal_string(self) -> str:
        self._advance()
        start = self._pos
        while self._peek() not in ("'", ""):
            self._advance()
        value = self._text[start : self._pos]
        self._advance()
        return value

    def _read_multiline(self, delimiter: str) -> None:
        self._advance(3)
        while self._pos < len(self._text):
            if delimiter == '"""' and self._peek() == "\\":
                self._advance(2)
                continue
            if self._text.startswith(delimiter, self._pos):
                self._advance(3)
                # A multi-line string may end with up to two extra quotes.
                while self._peek() == delimiter[0]:
                    self._advance()
                return
            self._advance()
