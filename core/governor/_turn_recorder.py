"""Records every governed turn to a local JSON Lines file, for calibration on own traffic.

On a delegated turn the model chooses a tool by itself: that choice is a free label for
"which tool did this turn need". Run the governor in shadow mode with a recorder (decide,
record, always delegate), then fit thresholds to the records with ``jevqueue calibrate``::

    governor = Governor(HybridBallot(), shadow=True, recorder=TurnRecorder("turns.jsonl"))
    ...                                  # serve traffic; every turn is delegated
    $ jevqueue calibrate turns.jsonl --target-precision 0.99 --out thresholds.json
    governor = Governor(HybridBallot(), thresholds=Thresholds.load("thresholds.json"))

A record keeps the ballot's verdict (top tool, its score and lead, the next candidates),
the path taken and proposed, and the tools the model called — never the conversation's
text or any argument.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import datetime, timezone
from os import PathLike
from pathlib import Path
from typing import Any

from jevqueue.errors import ConfigurationError, UsageError
from jevqueue.governor._calibration import Observation
from jevqueue.governor._decision import Decision

__all__ = ["TurnRecorder", "observations", "read_records"]

_KEEP = 5  # candidates kept per record, highest first


def _record(decision: Decision) -> dict[str, Any]:
    ranked = list(decision.scores.items())
    top_tool, top = ranked[0] if ranked else (None, 0.0)
    second = ranked[1][1] if len(ranked) > 1 else 0.0
    return {
        "time": datetime.now(timezone.utc).isoformat(timespec="milliseconds"),
        "path": decision.path.value,
        "proposed": decision.proposed.value if decision.proposed is not None else None,
        "routable": decision.routable,
        "top_tool": top_tool,
        "top": top,
        "lead": top - second,
        # The governor's question for a missing argument (see missing_question), kept in
        # the reason in shadow mode too.
        "sufficient": not (
            decision.reason is not None and "I can do this with `" in decision.reason
        ),
        "candidates": [[name, score] for name, score in ranked[:_KEEP]],
        "called": list(decision.called) if decision.called is not None else None,
    }


class TurnRecorder:
    """Appends one JSON line per governed turn; pass it as ``Governor(recorder=...)``.

    Args:
        path: The JSON Lines file (created if missing, appended to otherwise).

    Raises:
        ConfigurationError: The file's folder does not exist.
    """

    def __init__(self, path: str | PathLike[str]) -> None:
        self._path = Path(path)
        if not self._path.parent.is_dir():
            raise ConfigurationError(
                f"cannot record turns to {self._path}: the folder {self._path.parent} does not "
                "exist; create it or choose another path"
            )
        self._lock = threading.Lock()

    @property
    def path(self) -> Path:
        """The records file."""
        return self._path

    def __call__(self, decision: Decision) -> None:
        """Append the record of one turn."""
        line = json.dumps(_record(decision), separators=(",", ":")) + "\n"
        with self._lock, self._path.open("a", encoding="utf-8") as handle:
            handle.write(line)


def read_records(path: str | PathLike[str]) -> Iterator[dict[str, Any]]:
    """The records of a file a :class:`TurnRecorder` wrote.

    Raises:
        UsageError: The file cannot be read, or a line is not a record (with its number).
    """
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read turn records from {path}: {exc}") from exc
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as exc:
            raise UsageError(f"{path}:{number} is not JSON ({exc})") from exc
        if not isinstance(record, dict) or "top" not in record or "called" not in record:
            raise UsageError(
                f"{path}:{number} is not a turn record (written by jevqueue.TurnRecorder)"
            )
        yield record


def observations(records: Iterator[dict[str, Any]]) -> list[Observation]:
    """The labelled turns among ``records``.

    A record is a label when the turn was routable, was delegated (in shadow mode, or by
    the thresholds), and the model's calls were read back: the tools it called are what
    the turn needed (none: it needed none).
    """
    out = []
    for record in records:
        if not record.get("routable") or record.get("path") != "delegate":
            continue
        called = record.get("called")
        if not isinstance(called, list):
            continue
        out.append(
            Observation(
                top_tool=record.get("top_tool"),
                top=float(record["top"]),
                lead=float(record.get("lead", 0.0)),
                needed=frozenset(str(name) for name in called),
                sufficient=bool(record.get("sufficient", True)),
            )
        )
    return out
