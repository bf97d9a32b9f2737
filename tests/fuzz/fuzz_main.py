"""Running one fuzz harness: atheris, coverage of jevqueue's own code, and no network.

Each ``fuzz_*.py`` beside this file is a script::

    python tests/fuzz/fuzz_canonical_json.py [libFuzzer flags] [corpus directories]

It imports what it exercises inside :func:`instrumented` (so atheris records which
branches of jevqueue an input reached), defines ``test_one_input(data)``, and hands it to
:func:`fuzz_main`. An input that makes the target raise anything but the typed error its
contract names escapes ``test_one_input``; atheris then prints the traceback, writes the
input as ``crash-<sha1>`` and exits non-zero.

A harness lists the failures it already knows as :class:`KnownFailure` entries; each is
also in ``test_known_failures.py`` with its reproducer, as a test that fails as soon as the
bug is fixed, so that the entry is removed then.
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass

import atheris

__all__ = ["KnownFailure", "fuzz_main", "instrumented", "raise_unless_known"]


def instrumented() -> AbstractContextManager[None]:
    """Imports inside this block are instrumented for coverage (jevqueue only)."""
    context: AbstractContextManager[None] = atheris.instrument_imports(include=["jevqueue"])
    return context


@dataclass(frozen=True)
class KnownFailure:
    """A failure already reported: this exception type, let out of jevqueue by this function.

    Matched on the innermost jevqueue frame of the traceback, so the same exception let
    out anywhere else is still a finding.
    """

    error: type[BaseException]
    module: str  # the file inside the package, e.g. "audit/_jsonl_log.py"
    function: str

    def matches(self, error: BaseException) -> bool:
        if type(error) is not self.error:
            return False
        frame = _innermost_jevqueue_frame(error)
        return frame is not None and frame == (self.module, self.function)


def _innermost_jevqueue_frame(error: BaseException) -> tuple[str, str] | None:
    """(file inside the package, function) of the deepest frame in jevqueue's own code."""
    import jevqueue
    import jevqueue.plugins

    roots = (
        (os.path.dirname(os.path.abspath(jevqueue.plugins.__file__)) + os.sep, "plugins/"),
        (os.path.dirname(os.path.abspath(jevqueue.__file__)) + os.sep, ""),
    )
    for frame in reversed(traceback.extract_tb(error.__traceback__)):
        filename = os.path.abspath(frame.filename)
        for root, prefix in roots:
            if filename.startswith(root):
                inside = prefix + filename[len(root) :].replace(os.sep, "/")
                return inside, frame.name
    return None


_SEEN: set[KnownFailure] = set()


def raise_unless_known(error: BaseException, known: tuple[KnownFailure, ...]) -> None:
    """Re-raise ``error`` unless it is one of the ``known`` (already reported) failures.

    The first time each known failure comes up, a line on stderr says so: the fuzzer's log
    then shows which of them a run still reaches.
    """
    for failure in known:
        if failure.matches(error):
            if failure not in _SEEN:
                _SEEN.add(failure)
                print(f"known failure reached: {failure}", file=sys.stderr, flush=True)
            return
    raise error


def fuzz_main(test_one_input: Callable[[bytes], None]) -> None:
    """Fuzz ``test_one_input`` with libFuzzer's command line, the network forbidden.

    Code under test that reaches for the network is a finding: the guard's error is a
    typed one, so the attempts it records are checked after every input as well.
    """
    from jevqueue.testing.network import NetworkGuard

    guard = NetworkGuard().install()

    def checked(data: bytes) -> None:
        test_one_input(data)
        blocked = guard.take_blocked()
        if blocked:
            raise AssertionError(f"the code under test reached for the network: {blocked}")

    atheris.Setup(sys.argv, checked)
    atheris.Fuzz()
