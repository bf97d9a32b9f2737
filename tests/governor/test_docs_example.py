"""The worked host example in docs/governor.md runs as written."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "governor.md"


def test_the_worked_host_example_runs() -> None:
    text = DOC.read_text(encoding="utf-8")
    found = re.search(r"<!-- example: host -->\n```python\n(.*?)```", text, re.DOTALL)
    assert found, "docs/governor.md lost its worked host example"
    exec(compile(found.group(1), str(DOC), "exec"), {"__name__": "governor_doc_example"})
