"""Shared pieces for the governor tests: a fixed-score ballot, tools and conversations."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from jevqueue.governor import Thresholds

# Round numbers, so every test can see which side of a threshold a score falls.
THRESHOLDS = Thresholds(confident=0.6, margin=0.2, floor=0.2)


class FixedBallot:
    """Returns the same scores every turn and counts how often it was asked."""

    def __init__(self, scores: Mapping[str, float]) -> None:
        self.scores = dict(scores)
        self.calls = 0

    def score(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]
    ) -> Mapping[str, float]:
        self.calls += 1
        return dict(self.scores)


def tools_nested() -> list[dict[str, Any]]:
    """Three tools in the nested OpenAI shape."""
    return [
        {
            "type": "function",
            "function": {
                "name": "read_file",
                "description": "Read a text file from the workspace. Returns its content.",
                "parameters": {
                    "type": "object",
                    "properties": {"path": {"type": "string", "description": "File path"}},
                    "required": ["path"],
                    "additionalProperties": False,
                },
            },
        },
        {
            "type": "function",
            "function": {
                "name": "search_files",
                "description": "Search the workspace for files whose text matches a query.",
                "parameters": {
                    "type": "object",
                    "properties": {"query": {"type": "string"}},
                    "required": ["query"],
                },
            },
        },
        {
            "type": "function",
            "function": {
                "name": "list_tasks",
                "description": "List the open tasks of the project.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "status": {"type": "string", "enum": ["open", "done"]},
                        "limit": {"type": "integer", "minimum": 1},
                    },
                    "required": ["status"],
                    "additionalProperties": False,
                },
            },
        },
    ]


def user_turn(text: str = "read the file notes.txt") -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": "You are a careful assistant."},
        {"role": "user", "content": text},
    ]


def after_tool_result() -> list[dict[str, Any]]:
    return [
        *user_turn(),
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_0",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": "notes.txt"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_0", "content": "buy milk"},
    ]


CONFIDENT = {"read_file": 0.9, "search_files": 0.3, "list_tasks": 0.1}
TIED = {"read_file": 0.8, "search_files": 0.75, "list_tasks": 0.1}
LOW = {"read_file": 0.1, "search_files": 0.05, "list_tasks": 0.0}
MIDDLE = {"read_file": 0.4, "search_files": 0.1, "list_tasks": 0.0}


@pytest.fixture
def tools() -> list[dict[str, Any]]:
    return tools_nested()
