"""HybridBallot: lexical and embedding scores fused, with its own calibrated thresholds."""

from __future__ import annotations

import pytest
from jevqueue import Governor, HybridBallot, LexicalBallot, Path
from jevqueue.errors import ConfigurationError
from jevqueue.governor import fuse


def test_fusion_is_the_weighted_mean_highest_first() -> None:
    fused = fuse({"a": 1.0, "b": 0.0}, {"a": 0.2, "b": 0.6}, 0.25)
    assert list(fused) == ["b", "a"]
    assert fused == pytest.approx({"a": 0.4, "b": 0.45})


@pytest.mark.parametrize("weight", [-0.1, 1.5, "0.5", True, float("nan")])
def test_a_weight_outside_the_unit_interval_is_refused(weight: object) -> None:
    with pytest.raises(ConfigurationError, match="weight"):
        HybridBallot(weight=weight)  # type: ignore[arg-type]


class Fixed:
    def __init__(self, scores: dict[str, float]) -> None:
        self.scores = scores

    def score(self, messages, tools):  # type: ignore[no-untyped-def]
        return dict(self.scores)


def test_the_hybrid_scores_from_both_ballots() -> None:
    ballot = HybridBallot(
        Fixed({"a": 0.8, "b": 0.1}),  # type: ignore[arg-type]
        Fixed({"a": 0.4, "b": 0.3}),  # type: ignore[arg-type]
        weight=0.5,
    )
    assert ballot.score([], []) == pytest.approx({"a": 0.6, "b": 0.2})


def test_a_governor_with_the_hybrid_uses_its_calibrated_thresholds() -> None:
    assert Governor(HybridBallot()).thresholds == HybridBallot.thresholds
    assert Governor(LexicalBallot()).thresholds != HybridBallot.thresholds


def test_the_hybrid_forces_an_everyday_request_out_of_the_box() -> None:
    pytest.importorskip("onnxruntime", reason='needs pip install "jevqueue[embed]"')
    tools = [
        {
            "name": "get_weather_forecast",
            "description": "Get the weather forecast (rain, temperature, wind) for a city.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
        {"name": "send_email", "description": "Send an email message to a recipient."},
    ]
    decision = Governor(HybridBallot()).decide(
        [{"role": "user", "content": "What's the weather forecast for Oslo tomorrow?"}], tools
    )
    assert decision.path is Path.TOOL and decision.tool == "get_weather_forecast"
