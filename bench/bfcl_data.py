"""Routing items from the Berkeley Function Calling Leaderboard data that ``bfcl-eval`` ships.

Install the data without its (heavy) dependencies::

    .venv/bin/uv pip install --python .venv/bin/python --no-deps "bfcl-eval==2026.3.23"

Every item is one user turn to route: the conversation up to and including that user
message, the tools offered at that moment, and the tool names the ground truth calls on
that turn (empty when no call is expected).

* ``simple_python``, ``multiple``, ``parallel_multiple``: one user message, the item's
  functions, the functions of its ``possible_answer`` entry.
* ``irrelevance``: one user message and one function that cannot answer it; nothing to call.
* ``multi_turn_base``, ``multi_turn_miss_func``, ``multi_turn_miss_param``,
  ``multi_turn_long_context``: each turn with a user message becomes an item; the tools are
  the function docs of the involved classes (as ``bfcl_eval.utils`` assembles them), without
  the ``missed_function`` entries until the turn that adds them back; earlier turns appear
  as user messages each followed by an assistant reply. A turn whose ground truth is empty
  (the needed function is missing, or a parameter is missing and the model should ask)
  expects no call.

The ``live_*`` categories are never read: they are kept for independent evaluation.
"""

from __future__ import annotations

import importlib.util
import json
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "CATEGORIES",
    "MULTI_TURN_CATEGORIES",
    "SINGLE_TURN_CATEGORIES",
    "RoutingItem",
    "data_dir",
    "load",
]

SINGLE_TURN_CATEGORIES = ("simple_python", "multiple", "parallel_multiple", "irrelevance")
MULTI_TURN_CATEGORIES = (
    "multi_turn_base",
    "multi_turn_miss_func",
    "multi_turn_miss_param",
    "multi_turn_long_context",
)
CATEGORIES = SINGLE_TURN_CATEGORIES + MULTI_TURN_CATEGORIES

# bfcl_eval.constants.executable_backend_config.MULTI_TURN_FUNC_DOC_FILE_MAPPING, restated so
# that reading the data does not import bfcl-eval's own dependencies.
_FUNC_DOC_FILES = {
    "GorillaFileSystem": "gorilla_file_system.json",
    "MathAPI": "math_api.json",
    "MessageAPI": "message_api.json",
    "TwitterAPI": "posting_api.json",
    "TicketAPI": "ticket_api.json",
    "TradingBot": "trading_bot.json",
    "TravelAPI": "travel_booking.json",
    "VehicleControlAPI": "vehicle_control.json",
}

_INSTALL = (
    "install the data with: .venv/bin/uv pip install --python .venv/bin/python --no-deps "
    '"bfcl-eval==2026.3.23"'
)


@dataclass(frozen=True)
class RoutingItem:
    """One user turn to route.

    Attributes:
        id: ``<bfcl id>`` for single-turn items, ``<bfcl id>/turn<k>`` for multi-turn ones.
        category: The bfcl category.
        messages: The conversation up to and including the user message, oldest first.
        tools: The tools offered, in the flat OpenAI shape.
        expected: Tool names the ground truth calls on this turn (empty: no call expected).
        first_expected: The first call of the ground truth, or None.
        group: Items sharing a group (the same multi-turn scenario across the multi-turn
            categories) always land in the same split.
    """

    id: str
    category: str
    messages: tuple[dict[str, Any], ...]
    tools: tuple[dict[str, Any], ...]
    expected: frozenset[str]
    first_expected: str | None
    group: str

    @property
    def relevant(self) -> bool:
        """True when the ground truth calls at least one tool."""
        return bool(self.expected)

    @property
    def split(self) -> str:
        """``"calibrate"`` or ``"heldout"``: a stable half of the groups each."""
        return "calibrate" if zlib.crc32(self.group.encode()) % 2 == 0 else "heldout"


def data_dir() -> Path:
    """The ``data`` folder of the installed ``bfcl_eval`` package.

    Raises:
        SystemExit: ``bfcl-eval`` is not installed.
    """
    spec = importlib.util.find_spec("bfcl_eval")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"bfcl-eval is not installed: {_INSTALL}")
    folder = Path(next(iter(spec.submodule_search_locations))) / "data"
    if not folder.is_dir():
        raise SystemExit(f"bfcl-eval has no data folder at {folder}: {_INSTALL}")
    return folder


def _jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def _tool(doc: dict[str, Any]) -> dict[str, Any]:
    tool = {key: doc[key] for key in ("name", "description", "parameters") if key in doc}
    parameters = tool.get("parameters")
    if isinstance(parameters, dict) and parameters.get("type") == "dict":
        # bfcl spells JSON Schema's "object" as Python's "dict".
        tool["parameters"] = {**parameters, "type": "object"}
    return tool


def _call_name(call: str) -> str:
    return call.split("(", 1)[0].strip()


def _single_turn(folder: Path, category: str) -> Iterator[RoutingItem]:
    entries = _jsonl(folder / f"BFCL_v4_{category}.json")
    answers: dict[str, list[str]] = {}
    answer_file = folder / "possible_answer" / f"BFCL_v4_{category}.json"
    if category != "irrelevance":
        for row in _jsonl(answer_file):
            answers[row["id"]] = [name for call in row["ground_truth"] for name in call]
    for entry in entries:
        messages = tuple(message for turn in entry["question"] for message in turn)
        called = answers.get(entry["id"], [])
        yield RoutingItem(
            id=entry["id"],
            category=category,
            messages=messages,
            tools=tuple(_tool(doc) for doc in entry["function"]),
            expected=frozenset(called),
            first_expected=called[0] if called else None,
            group=entry["id"],
        )


def _multi_turn(folder: Path, category: str) -> Iterator[RoutingItem]:
    docs_cache: dict[str, list[dict[str, Any]]] = {}

    def docs(cls: str) -> list[dict[str, Any]]:
        if cls not in docs_cache:
            docs_cache[cls] = _jsonl(folder / "multi_turn_func_doc" / _FUNC_DOC_FILES[cls])
        return docs_cache[cls]

    answers = {
        row["id"]: row["ground_truth"]
        for row in _jsonl(folder / "possible_answer" / f"BFCL_v4_{category}.json")
    }
    for entry in _jsonl(folder / f"BFCL_v4_{category}.json"):
        functions = [doc for cls in entry["involved_classes"] for doc in docs(cls)]
        held_out: dict[int, set[str]] = {
            int(turn): set(names) for turn, names in entry.get("missed_function", {}).items()
        }
        missing = set().union(*held_out.values()) if held_out else set()
        truth: list[list[str]] = answers[entry["id"]]
        scenario = entry["id"].rsplit("_", 1)[1]
        history: list[dict[str, Any]] = []
        for turn, messages in enumerate(entry["question"]):
            missing -= held_out.get(turn, set())
            users = [message for message in messages if message.get("role") == "user"]
            if not users:
                continue
            history.extend(messages)
            called = [_call_name(call) for call in truth[turn]]
            yield RoutingItem(
                id=f"{entry['id']}/turn{turn}",
                category=category,
                messages=tuple(history),
                tools=tuple(_tool(doc) for doc in functions if doc["name"] not in missing),
                expected=frozenset(called),
                first_expected=called[0] if called else None,
                group=f"multi_turn_{scenario}",
            )
            history.append({"role": "assistant", "content": "Done."})


def load(categories: Sequence[str] = CATEGORIES) -> list[RoutingItem]:
    """Every routing item of ``categories``, in file order.

    Raises:
        ValueError: A category is unknown, or is one of the ``live_*`` categories.
        SystemExit: ``bfcl-eval`` is not installed.
    """
    for category in categories:
        if category.startswith("live"):
            raise ValueError(
                f"category {category!r} is held back for independent evaluation: "
                "never read the live_* categories"
            )
        if category not in CATEGORIES:
            raise ValueError(f"unknown category {category!r}: choose from {', '.join(CATEGORIES)}")
    folder = data_dir()
    items: list[RoutingItem] = []
    for category in categories:
        if category in MULTI_TURN_CATEGORIES:
            items.extend(_multi_turn(folder, category))
        else:
            items.extend(_single_turn(folder, category))
    return items
