"""Behaviour of the default ballot: which tool wins, what scores low, what the cache sees."""

from __future__ import annotations

import copy
import threading
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jevqueue import Governor, LexicalBallot, Path, Thresholds
from jevqueue.errors import InvalidToolSchemaError


def _tool(name: str, description: str, **params: str) -> dict[str, Any]:
    return {
        "name": name,
        "description": description,
        "parameters": {
            "type": "object",
            "properties": {
                pname: {"type": "string", "description": pdesc} for pname, pdesc in params.items()
            },
        },
    }


def _nested(tool: dict[str, Any]) -> dict[str, Any]:
    return {"type": "function", "function": copy.deepcopy(tool)}


TOOLS = [
    _tool("get_weather", "Current weather and forecast for a city.", city="City name"),
    _tool("send_email", "Send an email message to a recipient.", to="Recipient address"),
    _tool("read_file", "Read a text file from the workspace.", path="Path of the file"),
]


def _user(text: Any) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


@pytest.mark.parametrize(
    ("request_text", "expected"),
    [
        ("What is the weather forecast for Paris?", "get_weather"),
        ("Send an email to Bob saying I am late", "send_email"),
        ("Please read the file notes.txt", "read_file"),
    ],
)
def test_the_relevant_tool_scores_highest_with_a_clear_lead(
    request_text: str, expected: str
) -> None:
    scores = LexicalBallot().score(_user(request_text), TOOLS)

    ranked = list(scores.items())
    assert ranked[0][0] == expected
    assert ranked[0][1] - ranked[1][1] >= 0.5


def test_a_request_no_tool_speaks_to_scores_zero_for_every_tool() -> None:
    scores = LexicalBallot().score(_user("Tell me a joke about cats"), TOOLS)

    assert scores == {"get_weather": 0.0, "send_email": 0.0, "read_file": 0.0}


def test_a_lone_tool_scores_by_relevance_not_by_being_alone() -> None:
    request = _user("Find the area of a triangle with a base of 10 units and height of 5 units.")
    fits = [_tool("calculate_triangle_area", "Calculate the area of a triangle given its base.")]
    does_not_fit = [_tool("body_mass_index", "Calculate body mass index from weight and height.")]
    ballot = LexicalBallot()

    fitting = ballot.score(request, fits)["calculate_triangle_area"]
    unfitting = ballot.score(request, does_not_fit)["body_mass_index"]

    assert fitting >= Thresholds().confident
    assert unfitting < 0.2
    assert unfitting < fitting


def test_two_tools_that_both_fit_score_alike_so_the_governor_asks() -> None:
    tools = [
        _tool("search_flights", "Search flights between airports."),
        _tool("find_flights", "Search flights between airports."),
        _tool("read_file", "Read a text file from the workspace."),
    ]
    request = _user("search flights between airports")
    scores = LexicalBallot().score(request, tools)

    assert scores["read_file"] == 0.0
    assert min(scores["search_flights"], scores["find_flights"]) > 0.8
    assert abs(scores["search_flights"] - scores["find_flights"]) < Thresholds().margin
    assert Governor(LexicalBallot()).decide(request, tools).path is Path.CLARIFY


def test_a_word_only_one_tool_has_decides_between_similar_tools() -> None:
    tools = [
        _tool("search_flights", "Search flights between two airports."),
        _tool("search_flights_cheap", "Search cheap flights between two airports."),
    ]
    ballot = LexicalBallot()
    plain = ballot.score(_user("search flights between two airports"), tools)
    cheap = ballot.score(_user("search cheap flights between two airports"), tools)

    assert next(iter(plain)) == "search_flights"
    assert plain["search_flights"] - plain["search_flights_cheap"] > 0.2
    assert next(iter(cheap)) == "search_flights_cheap"


def test_both_openai_tool_shapes_score_identically() -> None:
    request = _user("What is the weather forecast for Paris?")

    flat = LexicalBallot().score(request, TOOLS)
    nested = LexicalBallot().score(request, [_nested(tool) for tool in TOOLS])
    mixed = LexicalBallot().score(request, [_nested(TOOLS[0]), TOOLS[1], _nested(TOOLS[2])])

    assert flat == nested == mixed
    assert flat["get_weather"] > 0.5


def test_list_content_parts_read_like_the_same_string() -> None:
    parts = [
        {"type": "text", "text": "What is the weather"},
        {"type": "image_url", "image_url": {"url": "https://example.invalid/a.png"}},
        {"type": "text", "text": "forecast for Paris?"},
    ]
    ballot = LexicalBallot()

    assert ballot.score(_user(parts), TOOLS) == ballot.score(
        _user("What is the weather forecast for Paris?"), TOOLS
    )


def test_only_the_newest_user_message_is_the_request() -> None:
    messages = [
        {"role": "user", "content": "Send an email to Bob"},
        {"role": "assistant", "content": "Sent."},
        {"role": "user", "content": "Now read the file notes.txt"},
        {"role": "assistant", "content": "One moment."},
    ]
    scores = LexicalBallot().score(messages, TOOLS)

    assert next(iter(scores)) == "read_file"
    assert scores["send_email"] == 0.0


def test_a_follow_up_that_takes_up_an_earlier_request_is_not_taken_for_prose() -> None:
    history = [
        {"role": "user", "content": "Please read the file notes.txt"},
        {"role": "assistant", "content": "It says: buy milk."},
    ]
    follow_up = [*history, {"role": "user", "content": "Now the one in notes.txt, please"}]
    off_topic = [*history, {"role": "user", "content": "Thanks! Tabs or spaces, which is best?"}]
    governor = Governor(LexicalBallot(), thresholds=Thresholds(0.74, 0.01, floor=0.001))

    lifted = LexicalBallot().score(follow_up, TOOLS)

    assert next(iter(lifted)) == "read_file"
    assert 0.001 <= lifted["read_file"] <= 0.05
    assert governor.decide(follow_up, TOOLS).path is Path.DELEGATE
    # A message that shares no word with the earlier requests opens a new topic.
    assert set(LexicalBallot().score(off_topic, TOOLS).values()) == {0.0}
    assert governor.decide(off_topic, TOOLS).path is Path.PROSE


@pytest.mark.parametrize(("fillers", "lifted"), [(2, True), (3, False)])
def test_only_the_three_latest_earlier_requests_are_context(fillers: int, lifted: bool) -> None:
    messages = [
        {"role": "user", "content": "Read the file notes.txt"},
        *[{"role": "user", "content": "Thanks, the notes look good."}] * fillers,
        {"role": "user", "content": "Now the one in notes.txt"},
    ]

    score = LexicalBallot().score(messages, TOOLS)["read_file"]

    assert (score > 0.0) is lifted


def test_without_a_user_message_every_tool_scores_zero() -> None:
    messages = [{"role": "system", "content": "read the file and send an email"}]

    assert set(LexicalBallot().score(messages, TOOLS).values()) == {0.0}


def test_an_empty_toolset_scores_nothing() -> None:
    assert LexicalBallot().score(_user("read the file"), []) == {}


def test_scores_come_highest_first() -> None:
    scores = LexicalBallot().score(_user("read the weather forecast file"), TOOLS)
    values = list(scores.values())

    assert values == sorted(values, reverse=True)
    assert set(scores) == {"get_weather", "send_email", "read_file"}


@pytest.mark.parametrize("mutate", ["in_place", "rebuilt"])
def test_the_cached_index_follows_a_changed_description(mutate: str) -> None:
    ballot = LexicalBallot()
    tools = [*copy.deepcopy(TOOLS), _tool("translate", "Read a text file.")]
    request = _user("Translate this sentence into German")
    before = ballot.score(request, tools)["translate"]  # builds and caches the index

    if mutate == "in_place":
        tools[3]["description"] = "Translate a sentence into German."
    else:
        tools = [*tools[:3], _tool("translate", "Translate a sentence into German.")]
    after = ballot.score(request, tools)["translate"]

    assert after > before + 0.3
    assert after >= Thresholds().confident


def test_the_cached_index_follows_a_changed_parameter_description() -> None:
    ballot = LexicalBallot()
    tools = [_tool("lookup", "Look a thing up.", key="The key")]
    request = _user("lookup the invoice number")
    before = ballot.score(request, tools)["lookup"]

    tools[0]["parameters"]["properties"]["key"]["description"] = "The invoice number"

    assert ballot.score(request, tools)["lookup"] > before


def test_an_equal_toolset_rebuilt_every_turn_scores_the_same() -> None:
    ballot = LexicalBallot()
    request = _user("What is the weather forecast for Paris?")
    first = ballot.score(request, copy.deepcopy(TOOLS))

    for _ in range(3):
        assert ballot.score(request, copy.deepcopy(TOOLS)) == first


def test_a_tool_in_neither_shape_is_rejected() -> None:
    with pytest.raises(InvalidToolSchemaError, match="name"):
        LexicalBallot().score(_user("read"), [{"description": "no name"}])
    with pytest.raises(InvalidToolSchemaError, match="tools\\[1\\]"):
        LexicalBallot().score(_user("read"), [TOOLS[0], "read_file"])  # type: ignore[list-item]


def test_two_tools_with_one_name_are_rejected() -> None:
    with pytest.raises(InvalidToolSchemaError, match="read_file"):
        LexicalBallot().score(_user("read"), [TOOLS[2], copy.deepcopy(TOOLS[2])])


def test_odd_parameter_schemas_are_read_as_far_as_they_make_sense() -> None:
    tool = _tool("read_file", "Read a text file.")
    tool["parameters"]["properties"] = {
        "path": {"type": "string", "description": ["not", "a", "string"]},
        "mode": "r",
        "encoding": {"type": "string", "description": None},
    }

    scores = LexicalBallot().score(_user("read the file"), [tool, TOOLS[0]])

    assert next(iter(scores)) == "read_file"


def test_tools_without_description_or_parameters_still_score() -> None:
    tools = [{"name": "restart_server"}, {"name": "list_users"}]

    scores = LexicalBallot().score(_user("please restart the server"), tools)

    assert next(iter(scores)) == "restart_server"
    assert scores["list_users"] == 0.0


_words = st.text(alphabet="abcdefghij _.-ABC", min_size=0, max_size=30)


@settings(max_examples=150, deadline=None)
@given(
    request=_words,
    specs=st.lists(st.tuples(_words, _words, _words), min_size=1, max_size=6),
)
def test_every_score_is_in_the_unit_interval(
    request: str, specs: list[tuple[str, str, str]]
) -> None:
    tools = [
        _tool(f"tool_{position}_{name}", description, p=pdesc)
        for position, (name, description, pdesc) in enumerate(specs)
    ]
    scores = LexicalBallot().score(_user(request), tools)

    assert set(scores) == {tool["name"] for tool in tools}
    assert all(0.0 <= value <= 1.0 for value in scores.values())
    assert list(scores.values()) == sorted(scores.values(), reverse=True)


def test_with_the_default_thresholds_a_clear_request_is_forced_and_a_foreign_one_is_not() -> None:
    governor = Governor(LexicalBallot())

    clear = governor.decide(_user("Read the text file notes.txt from the workspace"), TOOLS)
    foreign = governor.decide(_user("Tell me a joke about cats"), TOOLS)

    assert (clear.path, clear.tool) == (Path.TOOL, "read_file")
    assert foreign.path is not Path.TOOL


def test_one_ballot_serves_concurrent_turns_over_changing_toolsets() -> None:
    toolsets = [
        [*copy.deepcopy(TOOLS), _tool(f"extra_{i}", f"Extra tool number {i} for reports.")]
        for i in range(24)  # more toolsets than the ballot caches, so entries are evicted
    ]
    request = _user("Please read the file with the reports")
    expected = [LexicalBallot().score(request, tools) for tools in toolsets]
    shared = LexicalBallot()
    failures: list[BaseException] = []

    def work(offset: int) -> None:
        try:
            for step in range(120):
                position = (offset + step) % len(toolsets)
                assert shared.score(request, toolsets[position]) == expected[position]
        except BaseException as exc:  # reported by the main thread
            failures.append(exc)

    threads = [threading.Thread(target=work, args=(offset,)) for offset in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert failures == []


def test_changing_a_returned_result_does_not_change_the_next_one() -> None:
    ballot = LexicalBallot()
    request = _user("What is the weather forecast for Paris?")
    first = ballot.score(request, TOOLS)
    expected = dict(first)

    first["get_weather"] = 0.0  # type: ignore[index]

    assert ballot.score(request, TOOLS) == expected


class _CheckedLexicalBallot(LexicalBallot):
    """The same scores, but a subclass: the governor checks its toolset and scores itself."""


@pytest.mark.parametrize(
    "tools",
    [
        TOOLS,
        [_nested(tool) for tool in TOOLS],
        [],
        [{"description": "no name"}],
        [TOOLS[2], copy.deepcopy(TOOLS[2])],
        [TOOLS[0], "read_file"],
        [{"type": "retrieval", "function": {"name": "x"}}],
        [{"name": "x", "description": 3}],
    ],
)
@pytest.mark.parametrize("on_error", ["delegate", "raise"])
def test_the_default_ballot_decides_exactly_as_the_checked_path(
    tools: list[Any], on_error: Any
) -> None:
    request = [
        {"role": "user", "content": "Send an email to Bob"},
        {"role": "assistant", "content": "Sent."},
        {"role": "user", "content": "Now read the email file notes.txt"},
    ]

    def outcome(ballot: LexicalBallot) -> tuple[Any, ...]:
        governor = Governor(ballot, on_error=on_error)
        try:
            decision = governor.decide(request, tools)
        except Exception as exc:  # the same error, with the same message
            return (type(exc), str(exc))
        return (
            decision.path,
            decision.tool,
            list(decision.scores.items()),
            decision.directive,
            decision.reason,
            decision.error,
        )

    assert outcome(LexicalBallot()) == outcome(_CheckedLexicalBallot())
