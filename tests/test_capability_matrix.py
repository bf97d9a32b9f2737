"""Every test the capability matrix (docs/plugins/README.md) cites exists where it says.

A cell of the matrix is a claim; the test it names is what backs it. A renamed or removed
test would leave the claim unbacked, so the citations are checked against the test files.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MATRIX = ROOT / "docs" / "plugins" / "README.md"
CONFORMANCE = ROOT / "core" / "testing" / "conformance.py"
CITATION = re.compile(r"`((?:[\w]+/test_\w+\.py)?)::([\w:]+)`")


def citations() -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    for line in MATRIX.read_text(encoding="utf-8").splitlines():
        current = ""
        for path, name in CITATION.findall(line):
            current = path or current
            assert current, f"a citation without a file: ::{name} in {line[:80]!r}"
            found.append((current, name))
    return found


def test_the_matrix_cites_tests() -> None:
    assert len(citations()) >= 20


def test_every_cited_test_exists() -> None:
    missing = []
    for path, name in citations():
        file = ROOT / "tests" / "plugins" / path
        if not file.exists():
            missing.append(f"{path} (no such file)")
            continue
        text = file.read_text(encoding="utf-8")
        *classes, function = name.split("::")
        for cls in classes:
            if f"class {cls}(" not in text:
                missing.append(f"{path}::{cls} (no such class)")
        inherited = classes and f"def {function}(" in CONFORMANCE.read_text(encoding="utf-8")
        if f"def {function}(" not in text and not inherited:
            missing.append(f"{path}::{name}")
    assert not missing, f"the capability matrix cites tests that do not exist: {missing}"


def test_no_cell_is_left_as_a_placeholder() -> None:
    text = MATRIX.read_text(encoding="utf-8").lower()
    left = [phrase for phrase in ("built in parallel", "to be filled") if phrase in text]
    assert not left, f"the capability matrix still has placeholder cells: {left}"
