"""Shadow mode, the turn recorder, `jevqueue calibrate` and Thresholds.load: the loop."""

from __future__ import annotations

import json
from pathlib import Path as FilePath
from typing import Any

import pytest
from click.testing import CliRunner
from jevqueue import Governor, Path, Thresholds, TurnRecorder
from jevqueue.cli import main
from jevqueue.errors import ConfigurationError, UsageError
from jevqueue.governor import Observation, fit_thresholds, observations, read_records, wilson
from jevqueue.testing import ScriptedHost, text_response, tool_call_response

THRESHOLDS = Thresholds(confident=0.6, margin=0.2, floor=0.2)
TOOLS = [
    {"name": "read_file", "description": "Read a file."},
    {"name": "list_tasks", "description": "List the tasks."},
]


class FixedBallot:
    def __init__(self, scores: dict[str, float]) -> None:
        self.scores = scores

    def score(self, messages: Any, tools: Any) -> dict[str, float]:
        return dict(self.scores)


def said(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def test_shadow_mode_delegates_a_turn_it_would_force_and_records_the_models_choice(
    tmp_path: FilePath,
) -> None:
    records = tmp_path / "turns.jsonl"
    reply = tool_call_response(("list_tasks", {}))
    host = ScriptedHost(TOOLS, said("read notes.txt"), [reply])
    governor = Governor(
        FixedBallot({"read_file": 0.9, "list_tasks": 0.1}),
        thresholds=THRESHOLDS,
        shadow=True,
        recorder=TurnRecorder(records),
    )

    assert governor.step(host) == reply

    (call,) = host.calls
    assert call.kind == "generate" and call.force_tool is None and call.directive == ""
    last = governor.last
    assert last is not None
    assert last.path is Path.DELEGATE and last.proposed is Path.TOOL
    assert last.called == ("list_tasks",)  # the model's own choice, read back
    (record,) = read_records(records)
    assert record["path"] == "delegate" and record["proposed"] == "tool"
    assert record["top_tool"] == "read_file" and record["called"] == ["list_tasks"]
    assert record["routable"] is True
    assert record["lead"] == pytest.approx(0.8)
    assert "read notes" not in records.read_text()  # no conversation text is kept


def test_without_a_recorder_a_delegated_turn_reads_nothing_back() -> None:
    host = ScriptedHost(TOOLS, said("hm"), [text_response("ok")])
    governor = Governor(FixedBallot({"read_file": 0.3, "list_tasks": 0.1}), thresholds=THRESHOLDS)
    governor.step(host)
    assert governor.last is not None and governor.last.path is Path.DELEGATE
    assert governor.last.called is None and governor.last.proposed is None


def test_a_turn_after_a_tool_result_is_not_a_label(tmp_path: FilePath) -> None:
    records = tmp_path / "turns.jsonl"
    conversation = [
        *said("read notes.txt"),
        {
            "role": "assistant",
            "tool_calls": [
                {
                    "id": "1",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": "{}"},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "1", "content": "buy milk"},
    ]
    host = ScriptedHost(TOOLS, conversation, [text_response("It says buy milk.")])
    Governor(
        FixedBallot({"read_file": 0.9, "list_tasks": 0.1}),
        thresholds=THRESHOLDS,
        shadow=True,
        recorder=TurnRecorder(records),
    ).step(host)
    (record,) = read_records(records)
    assert record["routable"] is False
    assert observations(read_records(records)) == []


def test_a_failing_recorder_does_not_withhold_the_response() -> None:
    def broken(decision: Any) -> None:
        raise OSError("disk full")

    reply = text_response("ok")
    host = ScriptedHost(TOOLS, said("hm"), [reply])
    governor = Governor(FixedBallot({"read_file": 0.3}), thresholds=THRESHOLDS, recorder=broken)
    assert governor.step(host) == reply


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"recorder": "turns.jsonl"}, "recorder must be a callable"),
        ({"shadow": 1}, "shadow must be True or False"),
    ],
)
def test_bad_recording_settings_are_refused(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        Governor(**kwargs)


def test_a_recorder_in_a_missing_folder_is_refused(tmp_path: FilePath) -> None:
    with pytest.raises(ConfigurationError, match="does not exist"):
        TurnRecorder(tmp_path / "nope" / "turns.jsonl")


def test_wilson_matches_the_textbook_values() -> None:
    low, high = wilson(8, 10)
    assert low == pytest.approx(0.4902, abs=1e-4) and high == pytest.approx(0.9433, abs=1e-4)
    assert wilson(0, 0) == (0.0, 1.0)


def turns() -> list[Observation]:
    """Confident turns are right, middling ones half wrong, low ones need no tool."""
    out = []
    for _ in range(200):
        out.append(Observation("a", 0.9, 0.5, frozenset({"a"})))
    for i in range(100):
        out.append(Observation("a", 0.5, 0.3, frozenset({"a" if i % 2 else "b"})))
    for _ in range(100):
        out.append(Observation("a", 0.05, 0.05, frozenset()))
    for _ in range(10):
        out.append(Observation("a", 0.3, 0.2, frozenset({"a"})))
    return out


def test_the_fit_stops_where_precision_would_fall_below_the_target() -> None:
    fit = fit_thresholds(turns(), precision=0.99, no_call_cap=0.02, prose_budget=0.02)
    assert 0.5 < fit.thresholds.confident <= 0.9
    assert fit.precision == 1.0 and fit.forced_relevant == 200
    assert fit.forced_no_call == 0
    # Ten relevant turns at 0.3 (3% of them) keep the floor from rising past them.
    assert fit.thresholds.floor == 0.3
    loose = fit_thresholds(turns(), precision=0.8, no_call_cap=0.02, prose_budget=0.02)
    assert loose.thresholds.confident <= 0.5 and loose.coverage > fit.coverage


def test_the_fit_refuses_what_it_cannot_measure() -> None:
    with pytest.raises(UsageError, match="no observation needed a tool"):
        fit_thresholds([Observation("a", 0.9, 0.9, frozenset())])
    wrong = [Observation("a", 0.9, 0.9, frozenset({"b"}))] * 10
    with pytest.raises(UsageError, match="no thresholds reach"):
        fit_thresholds(wrong)


def write_records(path: FilePath) -> None:
    lines = []
    for o in turns():
        lines.append(
            {
                "path": "delegate",
                "routable": True,
                "top_tool": o.top_tool,
                "top": o.top,
                "lead": o.lead,
                "called": sorted(o.needed),
            }
        )
    lines.append(
        {
            "path": "tool",
            "routable": True,
            "top_tool": "a",
            "top": 0.9,
            "lead": 0.9,
            "called": ["b"],
        }
    )  # a forced turn is no label: the model had no choice
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def test_calibrate_fits_prints_intervals_and_writes_a_loadable_file(tmp_path: FilePath) -> None:
    pytest.importorskip("matplotlib", reason='--plot needs pip install "jevqueue[plot]"')
    records = tmp_path / "turns.jsonl"
    write_records(records)
    out, plot = tmp_path / "thresholds.json", tmp_path / "pc.png"

    result = CliRunner().invoke(
        main,
        [
            "calibrate",
            str(records),
            "--target-precision",
            "0.99",
            "--out",
            str(out),
            "--plot",
            str(plot),
        ],
    )

    assert result.exit_code == 0, result.output
    assert "410 labelled turns" in result.output
    assert "precision (relevant turns)   1.000  [0.981, 1.000]  (200/200)" in result.output
    loaded = Thresholds.load(out)
    expected = fit_thresholds(observations(read_records(records))).thresholds
    assert loaded == expected
    assert plot.read_bytes().startswith(b"\x89PNG")


def test_calibrate_says_why_it_cannot_fit(tmp_path: FilePath) -> None:
    records = tmp_path / "turns.jsonl"
    records.write_text("not json\n")
    result = CliRunner().invoke(main, ["calibrate", str(records)])
    assert result.exit_code == 2 and "turns.jsonl:1 is not JSON" in result.output


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "cannot read thresholds"),
        ('{"confident": 0.5}', "not a jevqueue thresholds file"),
        ('{"jevqueue_thresholds": 1, "confident": 0.5, "margin": 0.1}', "lacks floor"),
        ('{"jevqueue_thresholds": 1, "confident": 0.5, "margin": 0.1, "flor": 0}', "unknown keys"),
        ('{"jevqueue_thresholds": 1, "confident": 2, "margin": 0.1, "floor": 0}', "must lie in"),
    ],
)
def test_a_bad_thresholds_file_is_refused(tmp_path: FilePath, text: str, message: str) -> None:
    path = tmp_path / "t.json"
    path.write_text(text)
    with pytest.raises(ConfigurationError, match=message):
        Thresholds.load(path)


def test_saved_thresholds_round_trip(tmp_path: FilePath) -> None:
    path = tmp_path / "t.json"
    Thresholds(0.7, 0.1, 0.05).save(path, note="by hand")
    assert Thresholds.load(path) == Thresholds(0.7, 0.1, 0.05)
    assert json.loads(path.read_text())["calibration"] == {"note": "by hand"}


def test_an_async_host_is_recorded_the_same_way(tmp_path: FilePath) -> None:
    import asyncio

    from jevqueue.testing import AsyncScriptedHost

    records = tmp_path / "turns.jsonl"
    reply = tool_call_response(("read_file", {}))
    host = AsyncScriptedHost(TOOLS, said("read notes.txt"), [reply])
    governor = Governor(
        FixedBallot({"read_file": 0.9, "list_tasks": 0.1}),
        thresholds=THRESHOLDS,
        shadow=True,
        recorder=TurnRecorder(records),
    )
    asyncio.run(governor.astep(host))
    (record,) = read_records(records)
    assert record["proposed"] == "tool" and record["called"] == ["read_file"]


def test_a_forced_turn_records_what_the_provider_called() -> None:
    reply = tool_call_response(("read_file", {}))
    host = ScriptedHost(TOOLS, said("read notes.txt"), [reply])
    governor = Governor(FixedBallot({"read_file": 0.9, "list_tasks": 0.1}), thresholds=THRESHOLDS)
    governor.step(host)
    assert governor.last is not None
    assert governor.last.path is Path.TOOL and governor.last.called == ("read_file",)
    assert governor.last.routable is True and governor.last.proposed is None


def test_a_missing_argument_in_shadow_mode_is_recorded_as_insufficient(tmp_path: FilePath) -> None:
    records = tmp_path / "turns.jsonl"
    tools = [
        {
            "name": "tail",
            "description": "Show the end of a file.",
            "parameters": {
                "type": "object",
                "properties": {"file_name": {"type": "string"}},
                "required": ["file_name"],
            },
        },
        {"name": "ls", "description": "List files."},
    ]
    host = ScriptedHost(tools, said("show the end of one of my files"), [text_response("Which?")])
    Governor(
        FixedBallot({"tail": 0.9, "ls": 0.1}),
        thresholds=THRESHOLDS,
        shadow=True,
        recorder=TurnRecorder(records),
    ).step(host)
    (record,) = read_records(records)
    assert record["proposed"] == "clarify" and record["sufficient"] is False
    assert record["called"] == []
    (label,) = observations(read_records(records))
    assert label.needed == frozenset() and label.sufficient is False


def test_a_host_that_cannot_read_back_a_delegated_turn_leaves_it_unlabelled() -> None:
    class Mute(ScriptedHost):
        def called_tools(self, response: Any) -> list[str]:
            raise RuntimeError("no idea")

    reply = text_response("ok")
    seen: list[Any] = []
    host = Mute(TOOLS, said("hm"), [reply])
    governor = Governor(
        FixedBallot({"read_file": 0.3}), thresholds=THRESHOLDS, recorder=seen.append
    )
    assert governor.step(host) == reply
    assert [d.called for d in seen] == [None]
