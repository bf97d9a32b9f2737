"""Hermes Agent plugin tests: a real ``AIAgent`` loop against a recording server on 127.0.0.1.

Hermes pins a pydantic release that the main test venv's extras exclude, so these tests
run in a venv of their own (``make test`` builds it: core + hermes + pytest) and skip
elsewhere (each module starts with ``pytest.importorskip``). Hermes keeps its state under
``HERMES_HOME``: it points at a temporary directory before Hermes is imported.
"""

from __future__ import annotations

import os
import tempfile

os.environ["HERMES_HOME"] = tempfile.mkdtemp(prefix="jevqueue-hermes-")
