"""Hermes Agent plugin tests: a real ``AIAgent`` loop against a recording server on 127.0.0.1.

Hermes pins a pydantic release that the main test venv's extras exclude, so these tests
run in a venv of their own (``make test`` builds it: core + hermes + pytest) and skip
elsewhere. Hermes keeps its state under ``HERMES_HOME``: it points at a temporary
directory before Hermes is imported.
"""

from __future__ import annotations

import os
import tempfile

os.environ.setdefault("HERMES_HOME", tempfile.mkdtemp(prefix="jevqueue-hermes-"))

import pytest  # noqa: E402

pytest.importorskip(
    "run_agent",
    reason='Hermes Agent is not installed here: it runs in its own venv (make test builds it; '
    'pip install "jevqueue[hermes]")',
)
