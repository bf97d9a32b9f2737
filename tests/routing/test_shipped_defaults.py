"""The demo and the ballots run on their shipped, calibrated thresholds."""

from __future__ import annotations

from jevqueue import Governor, LexicalBallot, Thresholds


def test_the_lexical_defaults_reach_the_prose_path() -> None:
    thresholds = Thresholds()
    assert thresholds.floor > 0.0  # a calibrated floor: off-topic turns can take prose
    assert Governor(LexicalBallot()).thresholds == thresholds
    decision = Governor().decide(
        [{"role": "user", "content": "Tabs or spaces, which do you prefer?"}],
        [{"name": "read_file", "description": "Read a text file from the repository."}],
    )
    assert decision.path.value == "prose"


def test_the_demo_runs_on_the_shipped_defaults() -> None:
    from jevqueue.demo.runner import demo_thresholds

    assert demo_thresholds() == (Thresholds(), None)
