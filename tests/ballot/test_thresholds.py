"""Thresholds: the calibrated defaults are usable, and impossible settings say what to fix."""

from __future__ import annotations

import dataclasses
import math

import pytest
from jevqueue import Thresholds
from jevqueue.errors import ConfigurationError


def test_the_defaults_satisfy_their_own_invariants() -> None:
    thresholds = Thresholds()

    assert 0.0 <= thresholds.floor <= thresholds.confident <= 1.0
    assert 0.0 < thresholds.margin <= 1.0  # a zero margin would force one of two tied tools


def test_thresholds_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        Thresholds().confident = 0.1  # type: ignore[misc]


def test_explicit_values_are_kept() -> None:
    assert Thresholds(confident=0.8, margin=0.2, floor=0.1) == Thresholds(0.8, 0.2, 0.1)


@pytest.mark.parametrize(
    ("kwargs", "fix"),
    [
        ({"confident": 1.5}, "confident must lie in \\[0, 1\\]"),
        ({"confident": -0.1, "floor": -0.2}, "confident must lie in \\[0, 1\\]"),
        ({"margin": 2.0}, "margin must lie in \\[0, 1\\]"),
        ({"floor": math.nan}, "floor must lie in \\[0, 1\\]"),
        ({"margin": math.inf}, "margin must lie in \\[0, 1\\]"),
        ({"confident": "0.5"}, "confident must be a number"),
        ({"floor": True}, "floor must be a number"),
        ({"confident": 0.3, "floor": 0.5}, "lower floor or raise confident"),
    ],
)
def test_impossible_thresholds_say_what_to_fix(kwargs: dict[str, object], fix: str) -> None:
    with pytest.raises(ConfigurationError, match=fix):
        Thresholds(**kwargs)  # type: ignore[arg-type]


def test_the_edges_of_the_ranges_are_allowed() -> None:
    Thresholds(confident=1.0, margin=1.0, floor=1.0)
    Thresholds(confident=0.0, margin=0.0, floor=0.0)
