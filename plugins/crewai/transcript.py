"""What a CrewAI agent read, recorded in its guard's transcript (provenance).

The guard labels every argument of a call by where its value occurs in what the agent read
(:class:`jevqueue.policy.Transcript`): in the user's words, in an untrusted tool output, or
nowhere. This module reads a CrewAI run into that transcript, and nothing else:

* **The user's words** are each crew task's ``description`` and ``expected_output``, as
  CrewAI interpolated the kickoff inputs into them. Read from the task CrewAI runs, never
  from the messages: a task's prompt also carries the output of the tasks it takes as
  ``context`` (another agent's output), and in ReAct text mode the tool results. Not the
  user's words either: a task one agent delegates to another (its description is the
  delegating model's text, so only the crew's own tasks count) and the conversation
  history CrewAI appends to a description for ``crew_chat_messages``.
* **Tool outputs.** ``guard.run`` records each call a :class:`~.governed_tool.GovernedTool`
  runs, the hooks each call CrewAI runs after they allowed it, and the governed LLM every
  tool result in the conversation CrewAI hands it (a tool no guard runs — one named in
  ``ungoverned=``, CrewAI's reader of deferred results — and results replayed into a
  resumed conversation). Recording a call id twice keeps one copy.
* **Call ids.** CrewAI hands a tool its arguments, never the id of the call. The governed
  LLM reads the ids of the calls each reply makes (:class:`CallIds`), and the wrapper or
  hook that judges a call claims the id of the call with that name and those arguments,
  so an output is recorded under the id the model gave the call, as the conversation
  holds it. An id a provider repeats in a later reply (some local servers number the
  calls of each message ``call_0``, ``call_1``) is scoped as ``<id>#<n>``, the n-th time
  it is seen, so one call is never taken for another.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from typing import Any

from crewai.utilities.agent_utils import extract_tool_call_info, is_tool_call_list
from crewai.utilities.i18n import I18N_DEFAULT
from crewai.utilities.string_utils import sanitize_tool_name

__all__ = ["CallIds", "task_words", "tool_results"]

_SEEN_LIMIT = 4096  # call ids remembered, to scope one a provider repeats
_REPLIES_KEPT = 32  # replies whose unclaimed call ids still wait


def task_words(task: Any, crew: Any) -> list[str]:
    """What the user wrote in ``task``: its description and expected output, when it is one
    of ``crew``'s own tasks (``[]`` for a delegated task, or no task)."""
    if task is None or not any(own is task for own in getattr(crew, "tasks", None) or ()):
        return []
    words = []
    description = getattr(task, "description", None)
    if isinstance(description, str):
        words.append(_without_chat_history(description))
    expected = getattr(task, "expected_output", None)
    if isinstance(expected, str):
        words.append(expected)
    return [text for text in words if text.strip()]


def _without_chat_history(description: str) -> str:
    """The description without the conversation history CrewAI appends for a crew chat:
    its assistant turns are the model's words, not the user's."""
    marker = "\n\n" + I18N_DEFAULT.slice("conversation_history_instruction")
    cut = description.find(marker)
    return description if cut < 0 else description[:cut]


def tool_results(messages: Any) -> Iterator[tuple[str, Any, str]]:
    """``(tool, content, call id)`` of each tool result in CrewAI's conversation, oldest
    first; a repeated id scoped as :class:`CallIds` scopes it."""
    if isinstance(messages, str) or not isinstance(messages, (list, tuple)):
        return
    seen: dict[str, int] = {}
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping) or message.get("role") != "tool":
            continue
        name = message.get("name")
        if not isinstance(name, str) or not name:
            continue
        raw = message.get("tool_call_id")
        if raw:
            count = seen[str(raw)] = seen.get(str(raw), 0) + 1
            call_id = _scoped(str(raw), count)
        else:  # not from CrewAI's native executor, which always names the call
            call_id = f"{name}@{index}"
        yield name, message.get("content"), call_id


class CallIds:
    """The ids of the calls recent replies made, each waiting to be claimed by the wrapper
    or hook that runs the call with that name and those arguments.

    One per guard. A claim takes the id from the newest reply that made such a call (the
    first such call of it): CrewAI runs a reply's calls before it asks the model again, and
    a call of an agent whose batch was interrupted by another agent's turn (a delegation
    made in the same reply) still finds its own. Ids of the last
    :data:`_REPLIES_KEPT` replies wait; older ones are dropped unclaimed.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting: dict[tuple[str, str], list[tuple[int, str]]] = {}
        self._seen: OrderedDict[str, int] = OrderedDict()
        self._reply = 0

    def expect(self, response: Any) -> None:
        """Read the ids of the calls ``response`` makes (any reply, tool calls or not)."""
        calls = response if isinstance(response, list) and response else []
        if calls and not is_tool_call_list(calls):
            calls = []
        with self._lock:
            self._reply += 1
            for call in calls:
                info = extract_tool_call_info(call)
                if info is None:
                    continue
                raw, name, arguments = info
                key = _key(name, arguments)
                if key is None or not raw:
                    continue
                count = self._seen.pop(str(raw), 0) + 1
                self._seen[str(raw)] = count
                while len(self._seen) > _SEEN_LIMIT:
                    self._seen.popitem(last=False)
                self._waiting.setdefault(key, []).append((self._reply, _scoped(str(raw), count)))
            oldest = self._reply - _REPLIES_KEPT
            for key in list(self._waiting):
                kept = [entry for entry in self._waiting[key] if entry[0] > oldest]
                if kept:
                    self._waiting[key] = kept
                else:
                    del self._waiting[key]

    def claim(self, tool: str, arguments: Any) -> str | None:
        """The id of the waiting call of ``tool`` with ``arguments`` (``None`` when none
        waits: a call CrewAI runs in ReAct text mode, or without a governed LLM)."""
        key = _key(sanitize_tool_name(str(tool)), arguments)
        if key is None:
            return None
        with self._lock:
            entries = self._waiting.get(key)
            if not entries:
                return None
            newest = max(reply for reply, _ in entries)
            index = next(i for i, (reply, _) in enumerate(entries) if reply == newest)
            _, call_id = entries.pop(index)
            if not entries:
                del self._waiting[key]
            return call_id


def _scoped(call_id: str, count: int) -> str:
    return call_id if count == 1 else f"{call_id}#{count}"


def _key(name: str, arguments: Any) -> tuple[str, str] | None:
    """A call's name and arguments, canonical (``None`` when the arguments are not JSON)."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            return None
    if not isinstance(arguments, Mapping):
        return None
    try:
        canonical = json.dumps(arguments, sort_keys=True, separators=(",", ":"), default=str)
    except (TypeError, ValueError):
        return None
    return name, canonical
