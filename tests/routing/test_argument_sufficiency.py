"""Argument sufficiency: a tool that fits but lacks a required argument is asked about."""

from __future__ import annotations

from typing import Any

import pytest
from jevqueue import Governor, Path
from jevqueue.governor import Thresholds, missing_arguments, missing_question, normalize_tool
from jevqueue.testing import ScriptedHost, tool_call_response

THRESHOLDS = Thresholds(confident=0.6, margin=0.2, floor=0.2)


class FixedBallot:
    def __init__(self, scores: dict[str, float]) -> None:
        self.scores = scores

    def score(self, messages: Any, tools: Any) -> dict[str, float]:
        return dict(self.scores)


TAIL = normalize_tool(
    {
        "name": "tail",
        "description": "Show the last lines of a file.",
        "parameters": {
            "type": "object",
            "properties": {
                "file_name": {"type": "string", "description": "The name of the file. No path."},
                "lines": {"type": "integer"},
            },
            "required": ["file_name"],
        },
    }
)
BOOK = normalize_tool(
    {
        "name": "book_flight",
        "description": "Book a flight.",
        "parameters": {
            "type": "object",
            "properties": {
                "travel_class": {"type": "string", "enum": ["economy", "business", "first"]},
                "seats": {"type": "integer"},
                "travel_date": {"type": "string", "format": "date"},
                "contact_email": {"type": "string"},
                "booking_id": {"type": "integer"},
                "notes": {"type": "string"},
            },
            "required": ["travel_class", "seats", "travel_date", "contact_email", "booking_id"],
        },
    }
)


def said(*texts: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text} for text in texts]


@pytest.mark.parametrize(
    "text",
    ["Show the last lines of one of my files", "tail a specific file", "show someone's file"],
)
def test_a_vague_reference_to_a_named_thing_is_missing(text: str) -> None:
    assert missing_arguments(said(text), TAIL) == ["file_name"]


@pytest.mark.parametrize(
    "text",
    [
        "Show the last lines of 'notes'",
        "tail one of the files: report.txt",
        "Show the end of logs/app.log",
        "Show the last lines of the file",  # no vague reference: the model may know which
    ],
)
def test_a_concrete_or_unqualified_name_counts_as_supplied(text: str) -> None:
    assert missing_arguments(said(text), TAIL) == []


def test_each_kind_of_value_is_looked_for_in_the_whole_conversation() -> None:
    assert missing_arguments(said("book a flight"), BOOK) == [
        "travel_class",
        "seats",
        "travel_date",
        "contact_email",
    ]  # an identifier is the agent's to look up; free text is never judged
    complete = said("book two business seats", "on 3 May, mail ann@example.org")
    assert missing_arguments(complete, BOOK) == []


def test_a_tool_without_required_arguments_misses_nothing() -> None:
    free = normalize_tool({"name": "now", "description": "The time."})
    assert missing_arguments(said("what time is it?"), free) == []


def test_the_question_names_what_is_missing() -> None:
    question = missing_question(BOOK, ["travel_class", "travel_date"])
    assert "`book_flight`" in question
    assert "travel_class (one of economy, business, first)" in question
    assert "travel_date" in question and question.endswith("What should I use?")


TOOLS = [
    {
        "name": "tail",
        "description": "Show the last lines of a file.",
        "parameters": {
            "type": "object",
            "properties": {"file_name": {"type": "string", "description": "The file's name."}},
            "required": ["file_name"],
        },
    },
    {"name": "ls", "description": "List files."},
]


def test_the_governor_asks_instead_of_forcing_a_tool_that_lacks_an_argument() -> None:
    host = ScriptedHost(TOOLS, said("Show the end of one of my files"), [])
    governor = Governor(FixedBallot({"tail": 0.9, "ls": 0.1}), thresholds=THRESHOLDS)

    governor.step(host)

    assert governor.last is not None and governor.last.path is Path.CLARIFY
    assert governor.last.tool == "tail"
    assert "file_name (The file's name)" in (governor.last.reason or "")
    assert host.provider_calls == 0
    assert [call.kind for call in host.calls] == ["say"]


def test_with_the_check_off_the_tool_is_forced() -> None:
    reply = tool_call_response(("tail", {"file_name": "x"}))
    host = ScriptedHost(TOOLS, said("Show the end of one of my files"), [reply])
    governor = Governor(
        FixedBallot({"tail": 0.9, "ls": 0.1}), thresholds=THRESHOLDS, check_arguments=False
    )
    governor.step(host)
    assert governor.last is not None and governor.last.path is Path.TOOL


def test_check_arguments_must_be_a_bool() -> None:
    from jevqueue.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="check_arguments must be True or False"):
        Governor(check_arguments="yes")  # type: ignore[arg-type]
