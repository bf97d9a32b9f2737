"""Running one fuzz harness: atheris, coverage of jevqueue's own code, and no network.

Each ``fuzz_*.py`` beside this file is a script::

    python tests/fuzz/fuzz_canonical_json.py [libFuzzer flags] [corpus directories]

It imports what it exercises inside :func:`instrumented` (so atheris records which
branches of jevqueue an input reached), defines ``test_one_input(data)``, and hands it to
:func:`fuzz_main`. An input that makes the target raise anything but the typed error its
contract names escapes ``test_one_input``; atheris then prints the traceback, writes the
input as ``crash-<sha1>`` and exits non-zero.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from contextlib import AbstractContextManager

import atheris

__all__ = ["fuzz_main", "instrumented"]


def instrumented() -> AbstractContextManager[None]:
    """Imports inside this block are instrumented for coverage (jevqueue only)."""
    context: AbstractContextManager[None] = atheris.instrument_imports(include=["jevqueue"])
    return context


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
