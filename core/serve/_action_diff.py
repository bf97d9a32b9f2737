"""What a file-writing call would change, as a unified diff a reviewer can read.

It applies to a request whose digest covers the ``file_write`` side effect, exactly one
resolved target, and exactly one string argument that holds the new content (``content``,
``text``, ``CodeContent``, ...).

The target path comes from the request, so from the agent: it is never trusted to say
what may be read. The current content is read only when the operator named diff roots
(``jevqueue serve --diff-root DIR``) and the target lies under one of them — never the
request's own ``workspace``, which the agent supplies too. Even under a root, nothing is
read inside a folder or file of :class:`DiffScope`'s ``never`` (the reviewers file's
folder, every reviewer's key, the inbox's file). Every component of the path is opened
from the root without following a symbolic link (``O_NOFOLLOW`` on each folder and on the
file, each opened relative to the one before), so neither a link nor a folder swapped
while it is read leads outside the root; only a regular file is read.

Without a root the page shows the content the call writes, and says the current file is
not read. Either way each side is cut to :data:`MAX_SIDE_LINES` lines and
:data:`MAX_SIDE_BYTES` before it is compared, so a diff costs a bounded amount of work.
The result is a reading aid; what an approval covers is the digest.
"""

from __future__ import annotations

import difflib
import errno
import os
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "MAX_SIDE_BYTES",
    "MAX_SIDE_LINES",
    "NOT_READ",
    "ActionDiff",
    "DiffScope",
    "action_diff",
]

MAX_SIDE_BYTES = 64 * 1024
MAX_SIDE_LINES = 2000
NOT_READ = (
    "the content it writes; the current file is not read: start jevqueue serve with "
    "--diff-root to compare"
)
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
class DiffScope:
    """Where current file content may be read from.

    Attributes:
        roots: Folders, resolved, under which a target may be read. Empty: read nothing.
        never: Files and folders, resolved, never read even under a root.
    """

    roots: tuple[Path, ...] = ()
    never: tuple[Path, ...] = field(default=())

    @classmethod
    def of(cls, roots: Iterable[str | os.PathLike[str]], never: Iterable[Path]) -> DiffScope:
        """The scope of ``roots`` (resolved now) with ``never`` resolved too."""
        return cls(
            tuple(Path(os.path.realpath(root)) for root in roots),
            tuple(Path(os.path.realpath(path)) for path in never),
        )


@dataclass(frozen=True)
class ActionDiff:
    """The readable change to one file.

    Attributes:
        target: The resolved path the call writes.
        argument: The argument holding the new content.
        kind: ``"new file"``, ``"change"``, ``"no change"``, ``"content"`` (what the
            call writes, the current file not read) or ``"not shown"``.
        lines: The unified diff (or, for ``"content"``, the content), one line each.
        note: Why it is not shown, or that a side was cut short; empty otherwise.
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


def _cut(text: str) -> tuple[list[str], bool]:
    """``text``'s lines, at most :data:`MAX_SIDE_LINES` and :data:`MAX_SIDE_BYTES`."""
    raw = text.encode("utf-8", "replace")
    cut = len(raw) > MAX_SIDE_BYTES
    if cut:
        text = raw[:MAX_SIDE_BYTES].decode("utf-8", "ignore")
    lines = text.splitlines(keepends=True)
    if len(lines) > MAX_SIDE_LINES:
        return lines[:MAX_SIDE_LINES], True
    return lines, cut


def _cut_note(which: str) -> str:
    return (
        f"{which} is cut to its first {MAX_SIDE_LINES} lines and {MAX_SIDE_BYTES // 1024} "
        "KiB before it is compared; read the arguments above for the rest"
    )


def action_diff(document: Mapping[str, Any], scope: DiffScope | None = None) -> ActionDiff | None:
    """The diff of the request whose stored document is ``document``, or None.

    ``document`` is :attr:`InboxRequest.request`: the judged arguments, and under
    ``digest_document`` the side effects and resolved targets the digest covers. The
    current file is read only as ``scope`` allows (nothing without one).
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
    new_lines, new_cut = _cut(new_text)
    notes = [_cut_note("the new content")] if new_cut else []

    def content_only(why: str) -> ActionDiff:
        lines = tuple(line.rstrip("\r\n") for line in new_lines)
        return ActionDiff(target, argument, "content", lines, "; ".join([why, *notes]))

    if scope is None or not scope.roots:
        return content_only(NOT_READ)
    current = _read_current(target, scope)
    if isinstance(current, _Unreadable):
        return content_only(f"the content it writes; the current file is not read: {current.why}")
    if current is None:
        lines = difflib.unified_diff([], new_lines, "/dev/null", target, lineterm="")
        return _finished(ActionDiff(target, argument, "new file"), lines, notes)
    if current.whole and current.text == new_text:
        return ActionDiff(target, argument, "no change")
    old_lines, old_cut = _cut(current.text)
    if old_cut or not current.whole:
        notes.insert(0, _cut_note("the current file"))
    lines = difflib.unified_diff(
        old_lines,
        new_lines,
        f"{target} (now)",
        f"{target} (after the call)",
        lineterm="",
    )
    return _finished(ActionDiff(target, argument, "change"), lines, notes)


def _finished(diff: ActionDiff, lines: Iterable[str], notes: list[str]) -> ActionDiff:
    text = tuple(line.rstrip("\r\n") for line in lines)
    return ActionDiff(diff.target, diff.argument, diff.kind, text, "; ".join(notes))


@dataclass(frozen=True)
class _Unreadable:
    why: str


@dataclass(frozen=True)
class _Current:
    text: str
    whole: bool  # False: only the first MAX_SIDE_BYTES were read


def _under(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def _read_current(target: str, scope: DiffScope) -> _Current | _Unreadable | None:
    """The target's text now; None if it does not exist; why not, if it is not read."""
    if not os.path.isabs(target):
        return _Unreadable("the target is not an absolute path")
    parts = Path(target).parts
    if ".." in parts or "\0" in target:
        return _Unreadable("the target's path climbs out of a folder ('..')")
    path = Path(os.path.normpath(target))
    root = next((r for r in scope.roots if _under(path, r) and path != r), None)
    if root is None:
        return _Unreadable("the target lies under none of the --diff-root folders")
    if any(_under(path, never) or _under(never, path) for never in scope.never):
        return _Unreadable(
            "the target is, or lies in the folder of, the reviewers file, a reviewer's key "
            "or the inbox, which are never shown"
        )
    forbidden = _identities(scope.never)
    names = path.relative_to(root).parts
    directory = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
    try:
        descriptor = os.open(root, directory)
    except OSError as error:
        return _Unreadable(f"the diff root {str(root)!r} cannot be opened ({error.strerror})")
    try:
        for name in names[:-1]:
            try:
                inner = os.open(name, directory, dir_fd=descriptor)
            except FileNotFoundError:
                return None
            except OSError as error:
                if error.errno in (errno.ELOOP, errno.ENOTDIR):
                    return _Unreadable(
                        f"{name!r} on the target's path is a symbolic link or not a folder; "
                        "links are not followed"
                    )
                return _Unreadable(f"the target cannot be read ({error.strerror})")
            os.close(descriptor)
            descriptor = inner
            if _identity(os.fstat(descriptor)) in forbidden:
                return _Unreadable("the target lies in a folder that is never shown")
        return _read_file(descriptor, names[-1], forbidden)
    finally:
        os.close(descriptor)


def _identity(facts: os.stat_result) -> tuple[int, int]:
    return facts.st_dev, facts.st_ino


def _identities(paths: Iterable[Path]) -> frozenset[tuple[int, int]]:
    found = set()
    for path in paths:
        try:
            found.add(_identity(os.stat(path)))
        except OSError:
            continue
    return frozenset(found)


def _read_file(
    folder: int, name: str, forbidden: frozenset[tuple[int, int]]
) -> _Current | _Unreadable | None:
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK
    try:
        descriptor = os.open(name, flags, dir_fd=folder)
    except FileNotFoundError:
        return None
    except OSError as error:
        if error.errno == errno.ELOOP:
            return _Unreadable("the target is a symbolic link; links are not followed")
        return _Unreadable(f"the target cannot be read ({error.strerror})")
    try:
        facts = os.fstat(descriptor)
        if not stat.S_ISREG(facts.st_mode):
            return _Unreadable("the target is not a regular file")
        if _identity(facts) in forbidden:
            return _Unreadable("the target is a file that is never shown")
        with os.fdopen(descriptor, "rb", closefd=False) as handle:
            raw = handle.read(MAX_SIDE_BYTES + 1)
    except OSError as error:
        return _Unreadable(f"the target cannot be read ({error.strerror})")
    finally:
        os.close(descriptor)
    if b"\0" in raw:
        return _Unreadable("the current file is binary")
    whole = len(raw) <= MAX_SIDE_BYTES
    try:
        # a prefix may end inside a character: drop at most that character's bytes
        text = raw.decode("utf-8") if whole else raw[:MAX_SIDE_BYTES].decode("utf-8", "ignore")
    except UnicodeDecodeError:
        return _Unreadable("the current file is not UTF-8 text")
    if not whole and len(text.encode("utf-8")) < MAX_SIDE_BYTES - 3:
        return _Unreadable("the current file is not UTF-8 text")
    return _Current(text, whole)
