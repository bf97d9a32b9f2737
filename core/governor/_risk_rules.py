"""Risk rules: checks that stop a turn before it has any effect.

A risk rule is a callable ``(messages, tools, scores) -> str | None``. It reads the
conversation (oldest first), the tools offered this turn (either OpenAI shape) and the
ballot's scores (tool name to a score in ``[0, 1]``, highest first). Returning ``None``
lets the turn go on; returning a sentence stops it: the governor takes the ``risk_stop``
path and says that sentence to the user, with no provider call. The sentence should say
what was stopped and what the user can do.

Rules run on every turn, before routing, in the order given; the first reason wins. A rule
that raises fails the decision (``on_error`` decides what happens next). ``Governor``
runs no rule unless given some: ``Governor(risk_rules=default_risk_rules(irreversible=...))``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from jevqueue.errors import ConfigurationError
from jevqueue.governor._messages import (
    follows_tool_result,
    newest_tool_result_text,
    newest_user_text,
)

__all__ = [
    "DESTRUCTIVE_WORDS",
    "INJECTION_PATTERNS",
    "RiskRule",
    "default_risk_rules",
    "destructive_intent",
    "injected_instructions",
]

RiskRule = Callable[
    [Sequence[Mapping[str, Any]], Sequence[Mapping[str, Any]], Mapping[str, float]],
    str | None,
]
"""``(messages, tools, scores) -> reason | None``; see the module docstring."""

DESTRUCTIVE_WORDS: tuple[str, ...] = (
    "delete",
    "deleting",
    "drop",
    "dropping",
    "remove",
    "removing",
    "erase",
    "wipe",
    "destroy",
    "truncate",
    "purge",
    "overwrite",
    "reset",
    "format",
    "shred",
    "nuke",
    "rm -rf",
    "uninstall",
    "revoke",
    "terminate",
    "kill",
    "clear out",
    "get rid of",
)
"""Wording that asks for something to be destroyed (matched as whole words, any case)."""

INJECTION_PATTERNS: tuple[str, ...] = (
    r"\b(ignore|disregard|forget|override)\b.{0,30}\b(previous|prior|above|earlier|all|your)\b"
    r".{0,20}\b(instructions?|prompts?|rules|messages|directions)\b",
    r"\byou are now\b",
    r"\bnew (system )?instructions?\s*:",
    r"\bsystem prompt\s*:",
    r"<\|?(system|im_start|im_end)\|?>",
    r"\bdo not (tell|inform|alert) the user\b",
)
"""Regular expressions (any case) for text that tries to instruct the agent from data."""


def _tool_name(tool: Mapping[str, Any]) -> str | None:
    inner = tool.get("function")
    spec = inner if isinstance(inner, Mapping) else tool
    name = spec.get("name")
    return name if isinstance(name, str) else None


def _names(value: Iterable[str] | str, what: str) -> frozenset[str]:
    if isinstance(value, str):
        raise ConfigurationError(
            f"{what} must be a collection of tool names, got the string {value!r}: "
            f"write {what}=({value!r},)"
        )
    names = frozenset(value)
    if not names or not all(isinstance(name, str) and name for name in names):
        raise ConfigurationError(
            f"{what} must hold at least one non-empty string; got {sorted(map(repr, names))}"
        )
    return names


def destructive_intent(
    irreversible: Iterable[str],
    *,
    words: Iterable[str] = DESTRUCTIVE_WORDS,
    confirm_word: str = "confirm",
) -> RiskRule:
    """Stop destructive wording aimed at a tool the user marked irreversible.

    The rule fires when the newest user message uses destructive wording (``words``) and an
    irreversible tool is offered and aimed at: the ballot gives it a score above zero, or
    the message names it. The user goes ahead by writing ``"<confirm_word> <tool>"`` (for
    example ``"confirm drop_table"``) in a new message; the rule then lets that tool pass.

    Args:
        irreversible: Names of tools whose effect cannot be undone (``("drop_table",)``).
        words: Destructive wording, matched as whole words in any case.
        confirm_word: The word that, followed by the tool's name, confirms the request.

    Returns:
        A risk rule for ``Governor(risk_rules=...)``.

    Raises:
        ConfigurationError: ``irreversible`` or ``words`` is empty or not a collection of
            strings.

    Example:
        >>> rule = destructive_intent(irreversible=("drop_table",))
        >>> tools = [{"name": "drop_table", "description": "Drop a database table."}]
        >>> rule([{"role": "user", "content": "drop the users table"}], tools,
        ...      {"drop_table": 0.9}) is not None
        True
    """
    marked = _names(irreversible, "irreversible")
    wording = _names(words, "words")
    if not isinstance(confirm_word, str) or not confirm_word.strip():
        raise ConfigurationError("confirm_word must be a non-empty word such as 'confirm'")
    pattern = re.compile(
        r"(?<![\w-])("
        + "|".join(re.escape(w) for w in sorted(wording, key=len, reverse=True))
        + r")(?![\w-])",
        re.IGNORECASE,
    )
    confirm = confirm_word.strip().lower()

    def rule(
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]],
        scores: Mapping[str, float],
    ) -> str | None:
        text = newest_user_text(messages)
        found = pattern.search(text)
        if found is None:
            return None
        lowered = text.lower()
        aimed = []
        for tool in tools:
            name = _tool_name(tool)
            if name is None or name not in marked:
                continue
            plausible = scores.get(name, 0.0) > 0.0 or name.lower() in lowered
            if plausible and f"{confirm} {name.lower()}" not in lowered:
                aimed.append(name)
        if not aimed:
            return None
        listed = ", ".join(f"`{name}`" for name in aimed)
        return (
            f"This asks to {found.group(0).lower()} something with {listed}, which cannot be "
            f'undone, so nothing was run. To go ahead, reply with "{confirm} {aimed[0]}" and '
            "say exactly what it should act on."
        )

    rule.__name__ = "destructive_intent"
    rule.__qualname__ = "destructive_intent"
    return rule


def injected_instructions(*, patterns: Iterable[str] = INJECTION_PATTERNS) -> RiskRule:
    """Stop the agent loop when a tool result tries to give the agent instructions.

    Data an agent reads (a web page, a file, an email) can carry text aimed at the model:
    "ignore your previous instructions and ...". The rule reads the tool results of the
    current step (the consecutive ``tool`` messages at the end of the conversation) and
    fires when one matches ``patterns``, before the model sees them.

    Args:
        patterns: Regular expressions, matched in any case.

    Returns:
        A risk rule for ``Governor(risk_rules=...)``.

    Raises:
        ConfigurationError: ``patterns`` is empty or holds an invalid regular expression.
    """
    sources = _names(patterns, "patterns")
    try:
        compiled = re.compile("|".join(f"(?:{p})" for p in sorted(sources)), re.IGNORECASE)
    except re.error as exc:
        raise ConfigurationError(f"patterns hold an invalid regular expression: {exc}") from exc

    def rule(
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]],
        scores: Mapping[str, float],
    ) -> str | None:
        if not follows_tool_result(messages):
            return None
        found = compiled.search(newest_tool_result_text(messages))
        if found is None:
            return None
        quoted = found.group(0)[:80]
        return (
            f'A tool result contains text that tries to instruct the assistant ("{quoted}"), '
            "so the task stopped before acting on it. Check where that data came from, then "
            "ask again if it is safe."
        )

    rule.__name__ = "injected_instructions"
    rule.__qualname__ = "injected_instructions"
    return rule


def default_risk_rules(*, irreversible: Iterable[str] = ()) -> tuple[RiskRule, ...]:
    """The recommended set: prompt injection in tool results, plus destructive intent.

    Args:
        irreversible: Tools whose effect cannot be undone; when empty, the
            destructive-intent rule is left out (it has nothing to protect).

    Returns:
        Rules for ``Governor(risk_rules=...)``.
    """
    marked = irreversible if isinstance(irreversible, str) else tuple(irreversible)
    rules: list[RiskRule] = [injected_instructions()]
    if marked:
        rules.append(destructive_intent(marked))
    return tuple(rules)
