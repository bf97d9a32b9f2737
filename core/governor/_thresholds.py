"""The three numbers that turn ballot scores into a path.

With ``top`` the highest score and ``lead`` its distance to the runner-up (the whole of
``top`` when there is a single tool):

* ``top >= confident`` and ``lead >= margin``: route to the top tool (``tool`` or
  ``static_tool``);
* ``top >= confident`` without that lead: ``clarify`` between the tools that tie;
* ``top < floor``: no tool fits, answer in ``prose``;
* anything in between: ``delegate`` (a true passthrough).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import Any

from jevqueue.errors import ConfigurationError

__all__ = ["Thresholds"]

# Calibrated for LexicalBallot on the Berkeley Function Calling Leaderboard data that ships in
# bfcl-eval 2026.3.23 (simple_python, multiple, parallel_multiple, irrelevance and the four
# multi_turn_* categories; never live_*) by jevqueue.governor.fit_thresholds on one half
# of the scenarios, with argument sufficiency on (as the governor runs it):
#
#     .venv/bin/python bench/routing.py
#
# the highest coverage whose precision among relevant turns is at least 0.99 with at most
# 2 % of no-call turns forced, then the highest floor that sends at most 2 % of relevant
# turns to prose at the upper end of the 95 % Wilson interval. Held-out figures, with their
# intervals, are in docs/benchmarks.md. EmbeddingBallot and HybridBallot carry their own
# thresholds (their `thresholds` attribute), calibrated the same way.
_DEFAULT_CONFIDENT = 0.58
_DEFAULT_MARGIN = 0.14
_DEFAULT_FLOOR = 0.01


@dataclass(frozen=True)
class Thresholds:
    """When the top score is confident enough to force a tool, to ask, or to answer in prose.

    Args:
        confident: The top score at or above which a tool may be forced (with ``margin``)
            or a clarification asked (without it).
        margin: The lead over the runner-up a forced route needs.
        floor: The top score below which no tool fits and the turn answers in prose.

    Raises:
        ConfigurationError: Unless ``0 <= floor <= confident <= 1`` and ``0 <= margin <= 1``.
    """

    confident: float = _DEFAULT_CONFIDENT
    margin: float = _DEFAULT_MARGIN
    floor: float = _DEFAULT_FLOOR

    def __post_init__(self) -> None:
        for name in ("confident", "margin", "floor"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ConfigurationError(
                    f"Thresholds.{name} must be a number in [0, 1], got {value!r}: "
                    "pass a float such as 0.5"
                )
            if not math.isfinite(value) or not 0.0 <= value <= 1.0:
                raise ConfigurationError(
                    f"Thresholds.{name} must lie in [0, 1], got {value!r}: "
                    "ballot scores are in [0, 1], so choose a value in that range"
                )
        if self.floor > self.confident:
            raise ConfigurationError(
                f"Thresholds.floor ({self.floor!r}) is above Thresholds.confident "
                f"({self.confident!r}): lower floor or raise confident so that "
                "0 <= floor <= confident <= 1"
            )

    def to_dict(self) -> dict[str, float]:
        """``{"confident": ..., "margin": ..., "floor": ...}``."""
        return {"confident": self.confident, "margin": self.margin, "floor": self.floor}

    def save(self, path: str | PathLike[str], **about: Any) -> None:
        """Write the thresholds as a JSON file that :meth:`load` reads.

        Args:
            path: The file to write (replaced if it exists).
            about: Extra JSON-serialisable facts kept under ``"calibration"`` (how the
                thresholds were fitted); :meth:`load` ignores them.
        """
        document: dict[str, Any] = {"jevqueue_thresholds": 1, **self.to_dict()}
        if about:
            document["calibration"] = about
        Path(path).write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: str | PathLike[str]) -> Thresholds:
        """Read a thresholds file written by :meth:`save` or ``jevqueue calibrate``.

        Raises:
            ConfigurationError: The file cannot be read, is not a thresholds file, lacks
                a value, has an unknown key, or a value is out of range.
        """
        try:
            document = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ConfigurationError(
                f"cannot read thresholds from {path}: {exc}; write one with "
                "`jevqueue calibrate RECORDS --out FILE`"
            ) from exc
        if not isinstance(document, dict) or document.get("jevqueue_thresholds") != 1:
            raise ConfigurationError(
                f'{path} is not a jevqueue thresholds file (no "jevqueue_thresholds": 1): '
                "write one with `jevqueue calibrate RECORDS --out FILE`"
            )
        known = {"jevqueue_thresholds", "confident", "margin", "floor", "calibration"}
        unknown = sorted(set(document) - known)
        if unknown:
            raise ConfigurationError(
                f"{path} has unknown keys {unknown}: a thresholds file holds confident, "
                "margin and floor (a typo would silently keep a default)"
            )
        missing = [key for key in ("confident", "margin", "floor") if key not in document]
        if missing:
            raise ConfigurationError(f"{path} lacks {', '.join(missing)}: give all three")
        return cls(
            confident=document["confident"], margin=document["margin"], floor=document["floor"]
        )
