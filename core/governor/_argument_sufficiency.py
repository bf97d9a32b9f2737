"""Does the conversation plausibly supply a tool's required arguments?

Forcing a tool whose required argument the user never gave makes the model invent one:
"Show the last lines of one of my files" forced to ``tail(file_name)`` gets a made-up
file name. Before forcing, the governor asks :func:`missing_arguments`; when the tool
clearly fits but an argument is missing, the turn takes ``clarify`` with a question that
names what is missing.

The check reads every message's text (the user's words, and any tool results an agent
loop added) and is deliberately narrow — an argument counts as missing only when the
schema says what its value looks like and nothing of that shape is there:

* an ``enum``: none of its values (of three or more characters) is mentioned;
* a number (``integer``/``number``, not an identifier such as ``tweet_id``, which an agent
  usually looks up itself): no number, in digits or words;
* a date or time (``format`` date/time, or a name saying so): no date-like word;
* an e-mail address: no ``@``;
* a named thing (a string parameter whose name says file, folder, path, name, title,
  word, pattern, user, recipient...): the request refers to it only vaguely ("one of the
  files", "a specific word", "someone") and names nothing concrete (no quoted text, no
  file name, no path).

Anything else — free text, booleans, arrays, objects, optional parameters — is taken as
supplied: the model can write a message body, but it cannot know which file you meant.
The rules were written on the calibration half of the public data in
``bench/routing.py`` and are measured on the held-out half (``docs/benchmarks.md``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from jevqueue.governor._messages import message_text
from jevqueue.governor._tool_schema import ToolSchema

__all__ = ["missing_arguments", "missing_question"]

_NUMBER = re.compile(
    r"\d|\b(?:zero|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|"
    r"fifteen|twenty|thirty|forty|fifty|hundred|thousand|million|dozen|half|double|twice)\b",
    re.IGNORECASE,
)
_DATE = re.compile(
    r"\d|\b(?:today|tonight|tomorrow|yesterday|now|noon|midnight|morning|evening|afternoon|"
    r"week|weekend|month|year|next|last|monday|tuesday|wednesday|thursday|friday|saturday|"
    r"sunday|jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|"
    r"sep(?:tember)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\b",
    re.IGNORECASE,
)
# A concrete name: quoted text, a file name with an extension, or a path.
_CONCRETE = re.compile(
    r"'[^'\s][^']*'|\"[^\"]+\"|`[^`]+`|\b[\w-]+\.[A-Za-z0-9]{1,5}\b|\w/\w|/\w", re.UNICODE
)
# A vague reference to the thing: "one of the files", "a specific word", "someone".
_VAGUE = re.compile(
    r"\b(?:someone|somebody|something|some\s+one|"
    r"(?:one\s+of\s+(?:the|my|those|these)|a\s+(?:specific|certain|particular)|"
    r"specific|certain|particular|some|any|an?)\s+(?:\w+\s+)?"
    r"(?:file|files|document|documents|folder|folders|directory|directories|word|words|"
    r"name|names|person|people|user|users|friend|contact|recipient|keyword|pattern|title|"
    r"item|one))\b",
    re.IGNORECASE,
)
_NAMED_THING = re.compile(
    r"(?:^|_)(?:name|file|filename|folder|dir|directory|path|source|destination|title|"
    r"word|keyword|pattern|user|username|recipient|receiver|person|contact)s?(?:_|$)",
    re.IGNORECASE,
)
_IDENTIFIER = re.compile(r"(?:^|_)ids?$|Id$|ID$")
_DATE_NAME = re.compile(r"(?:^|_)(?:date|time|day|datetime|when|deadline)(?:_|$)", re.I)


def _conversation_text(messages: Sequence[Mapping[str, Any]]) -> str:
    return "\n".join(
        message_text(message) for message in messages if message.get("role") != "system"
    )


def _mentions(text: str, value: str) -> bool:
    spelled = value.replace("_", " ").strip().lower()
    return spelled in text or value.lower() in text


def _missing(name: str, schema: Mapping[str, Any], text: str, lowered: str) -> bool:
    kind = schema.get("type")
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        words = [str(value) for value in enum if len(str(value)) >= 3]
        if len(words) == len(enum):  # short codes ("l", "w") are never mentioned verbatim
            return not any(_mentions(lowered, word) for word in words)
        return False
    if kind in ("integer", "number"):
        return not _IDENTIFIER.search(name) and not _NUMBER.search(text)
    if kind != "string":
        return False
    fmt = str(schema.get("format", ""))
    if fmt in ("date", "date-time", "time") or _DATE_NAME.search(name):
        return not _DATE.search(text)
    if fmt == "email" or "email" in name.lower():
        return "@" not in text
    if _NAMED_THING.search(name):
        return bool(_VAGUE.search(text)) and not _CONCRETE.search(text)
    return False


def missing_arguments(messages: Sequence[Mapping[str, Any]], tool: ToolSchema) -> list[str]:
    """The required parameters of ``tool`` that the conversation plausibly does not supply.

    Args:
        messages: The conversation, oldest first, in OpenAI message form.
        tool: The tool, normalised (see :func:`jevqueue.governor.normalize_tool`).

    Returns:
        Parameter names in schema order; empty when every required argument looks
        supplied (or the tool declares none).
    """
    properties = tool.parameters.get("properties")
    required = tool.parameters.get("required")
    if not isinstance(properties, Mapping) or not isinstance(required, list) or not required:
        return []
    text = _conversation_text(messages)
    lowered = text.lower()
    missing = []
    for name in required:
        schema = properties.get(name)
        if (
            isinstance(name, str)
            and isinstance(schema, Mapping)
            and _missing(name, schema, text, lowered)
        ):
            missing.append(name)
    return missing


def _described(name: str, schema: Any) -> str:
    if isinstance(schema, Mapping):
        description = schema.get("description")
        enum = schema.get("enum")
        if isinstance(enum, list) and enum:
            return f"{name} (one of {', '.join(map(str, enum[:6]))})"
        if isinstance(description, str) and description.strip():
            first = description.strip().split(". ", 1)[0].rstrip(".")
            return f"{name} ({first[:77] + '…' if len(first) > 78 else first})"
    return name


def missing_question(tool: ToolSchema, missing: Sequence[str]) -> str:
    """The clarifying question for a tool that fits but lacks ``missing`` arguments."""
    properties = tool.parameters.get("properties")
    props = properties if isinstance(properties, Mapping) else {}
    named = [_described(name, props.get(name)) for name in missing]
    listed = named[0] if len(named) == 1 else ", ".join(named[:-1]) + f" and {named[-1]}"
    return f"I can do this with `{tool.name}`, but I need to know {listed}. What should I use?"
