"""What a file-writing call would change, as a unified diff a reviewer can read.

It applies to a request whose digest covers the ``file_write`` side effect, exactly one
resolved target, and exactly one string argument that holds the new content (``content``,
``text``, ``CodeContent``, ...). The diff runs from the target's current content on this
server's disk — read now, so a reading aid, never what the approval covers: that is the
digest — to the content in the arguments; a target that does not exist is a new file.

Reading the target never follows a symbolic link: a target that is a link, or lies under
one, is not read and the page says so. Only regular files are read, at most
:data:`MAX_FILE_BYTES` of each side, and the diff is cut at :data:`MAX_DIFF_LINES` lines.
"""

from __future__ import annotations

import difflib
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["MAX_DIFF_LINES", "MAX_FILE_BYTES", "ActionDiff", "action_diff"]

MAX_FILE_BYTES = 256 * 1024
MAX_DIFF_LINES = 2000
_CONTENT_NAMES = frozenset(
    {
        "content",
        "contents",
        "text",
        "codecontent",
        "filecontent",
        "filetext",
        "newcontent",
        "newtext",
        "body",
        "data",
        "code",
    }
)


@dataclass(frozen=True)
class ActionDiff:
    """The readable change to one file.

    Attributes:
        target: The resolved path the call writes.
        argument: The argument holding the new content.
        kind: ``"new file"``, ``"change"``, ``"no change"``, or ``"not shown"``.
        lines: The unified diff, one line each (empty when not shown or unchanged).
        note: Why it is not shown, or that it was cut short; empty otherwise.
    """

    target: str
    argument: str
    kind: str
    lines: tuple[str, ...] = ()
    note: str = ""


def _content_argument(arguments: Mapping[str, Any]) -> tuple[str, str] | None:
    found = [
        (name, value)
        for name, value in arguments.items()
        if isinstance(value, str)
        and name.replace("_", "").replace("-", "").lower() in _CONTENT_NAMES
    ]
    return found[0] if len(found) == 1 else None


def action_diff(document: Mapping[str, Any]) -> ActionDiff | None:
    """The diff of the request whose stored document is ``document``, or None.

    ``document`` is :attr:`InboxRequest.request`: the judged arguments, and under
    ``digest_document`` the side effects and resolved targets the digest covers.
    """
    covered = document.get("digest_document")
    arguments = document.get("arguments")
    if not isinstance(covered, Mapping) or not isinstance(arguments, Mapping):
        return None
    effects = covered.get("side_effects") or []
    targets = covered.get("targets") or []
    if "file_write" not in effects or len(targets) != 1 or not isinstance(targets[0], str):
        return None
    content = _content_argument(arguments)
    if content is None:
        return None
    argument, new_text = content
    target = targets[0]

    def not_shown(why: str) -> ActionDiff:
        return ActionDiff(target, argument, "not shown", note=why)

    if not os.path.isabs(target):
        return not_shown("the target is not an absolute path, so there is no file to compare")
    if len(new_text.encode("utf-8", "replace")) > MAX_FILE_BYTES:
        return not_shown(f"the new content is larger than {MAX_FILE_BYTES // 1024} KiB")
    current = _read_current(Path(target))
    if isinstance(current, _Unreadable):
        return not_shown(current.why)
    if current is None:
        lines = list(
            difflib.unified_diff(
                [], new_text.splitlines(keepends=True), "/dev/null", target, lineterm=""
            )
        )
        return _bounded(ActionDiff(target, argument, "new file"), lines)
    if current == new_text:
        return ActionDiff(target, argument, "no change")
    lines = list(
        difflib.unified_diff(
            current.splitlines(keepends=True),
            new_text.splitlines(keepends=True),
            f"{target} (now)",
            f"{target} (after the call)",
            lineterm="",
        )
    )
    return _bounded(ActionDiff(target, argument, "change"), lines)


def _bounded(diff: ActionDiff, lines: list[str]) -> ActionDiff:
    text = tuple(line.rstrip("\r\n") for line in lines)
    if len(text) <= MAX_DIFF_LINES:
        return ActionDiff(diff.target, diff.argument, diff.kind, text)
    return ActionDiff(
        diff.target,
        diff.argument,
        diff.kind,
        text[:MAX_DIFF_LINES],
        f"the diff is cut after {MAX_DIFF_LINES} of {len(text)} lines",
    )


@dataclass(frozen=True)
class _Unreadable:
    why: str


def _read_current(target: Path) -> str | _Unreadable | None:
    """The target's text now; None if it does not exist; why not, if it cannot be shown."""
    normal = os.path.normpath(target)
    real = os.path.realpath(normal)
    if real != normal:
        return _Unreadable(
            f"the target is, or lies under, a symbolic link (to {real}); it is not followed"
        )
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        descriptor = os.open(normal, flags)
    except FileNotFoundError:
        return None
    except OSError as error:
        return _Unreadable(f"the target cannot be read ({type(error).__name__}: {error})")
    try:
        facts = os.fstat(descriptor)
        if not stat.S_ISREG(facts.st_mode):
            return _Unreadable("the target is not a regular file")
        if facts.st_size > MAX_FILE_BYTES:
            return _Unreadable(f"the current file is larger than {MAX_FILE_BYTES // 1024} KiB")
        again = os.stat(normal, follow_symlinks=False)
        if (again.st_dev, again.st_ino) != (facts.st_dev, facts.st_ino):
            return _Unreadable("the target changed while it was read")
        with os.fdopen(descriptor, "rb", closefd=False) as handle:
            raw = handle.read(MAX_FILE_BYTES + 1)
    except OSError as error:
        return _Unreadable(f"the target cannot be read ({type(error).__name__}: {error})")
    finally:
        os.close(descriptor)
    if len(raw) > MAX_FILE_BYTES:
        return _Unreadable(f"the current file is larger than {MAX_FILE_BYTES // 1024} KiB")
    if b"\0" in raw:
        return _Unreadable("the current file is binary")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return _Unreadable("the current file is not UTF-8 text")
