"""The demo agent's tools: a repository assistant's toolset, and what each tool returns.

The descriptions are the ballot: each says what the tool is for in the words a user
would use, and the tools that overlap (email and chat) overlap on purpose. The tools run
locally and return fixed results, so the session is the same on every machine.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["IRREVERSIBLE_TOOLS", "STATIC_TOOLS", "TOOLS", "run_tool"]


def _tool(name: str, description: str, **parameters: tuple[str, str]) -> dict[str, Any]:
    properties = {
        pname: {"type": ptype, "description": pdescription}
        for pname, (ptype, pdescription) in parameters.items()
    }
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": list(properties),
                "additionalProperties": False,
            },
        },
    }


TOOLS: list[dict[str, Any]] = [
    _tool(
        "read_file",
        "Read a repository file, such as the README, and return its text.",
        path=("string", "File path relative to the repository root, e.g. README.md."),
    ),
    _tool(
        "search_issues",
        "Search the issue tracker for bug reports and feature requests that match keywords.",
        query=("string", "Keywords to look for in issue titles and bodies."),
    ),
    _tool(
        "run_tests",
        "Run the project's test suite, or one test file, and report which tests failed.",
        target=("string", "A test file or directory; use tests/ for the whole suite."),
    ),
    _tool(
        "ci_build_status",
        "Report the CI build status of a branch.",
        branch=("string", "Branch name, e.g. main."),
    ),
    _tool(
        "send_email",
        "Send a message to the team by email.",
        subject=("string", "Subject line."),
        body=("string", "Message text."),
    ),
    _tool(
        "send_chat_message",
        "Send a message to the team chat.",
        channel=("string", "Channel name, e.g. #dev."),
        text=("string", "Message text."),
    ),
    _tool(
        "drop_database_table",
        "Drop a table from a database, deleting every row in it. Cannot be undone.",
        database=("string", "Database name, e.g. production or staging."),
        table=("string", "Table name."),
    ),
    _tool(
        "deploy_release",
        "Deploy a tagged release of the service to an environment (staging or production).",
        tag=("string", "Release tag, e.g. v2.4.0."),
        environment=("string", "staging or production."),
    ),
]
"""The toolset, in the nested OpenAI shape."""

IRREVERSIBLE_TOOLS: tuple[str, ...] = ("drop_database_table",)
"""Tools whose effect cannot be undone (for the destructive-intent risk rule)."""

STATIC_TOOLS: dict[str, dict[str, Any]] = {"ci_build_status": {"branch": "main"}}
"""Tools whose arguments never vary in this session: called locally, no model needed."""

_RESULTS: dict[str, str] = {
    "read_file": (
        "# jevqueue\n\njevqueue governs the tool calls of LLM agents: on every turn it picks "
        "the one tool the model must call, makes the provider enforce that choice and "
        "checks that it obeyed; a policy layer judges every call before it runs."
    ),
    "search_issues": "#41 open: flaky test in test_audit.py\n#38 closed: README typo",
    "run_tests": "212 passed, 0 failed in 41.2s",
    "ci_build_status": "{branch}: passing (build 1187, 6 minutes ago)",
    "send_email": "sent",
    "send_chat_message": "posted",
    "drop_database_table": "dropped",
    "deploy_release": "{tag} is live on {environment} (3 of 3 instances healthy)",
}


def run_tool(name: str, arguments: Mapping[str, Any]) -> str:
    """Run a demo tool: a fixed result per tool, so the session is reproducible.

    Args:
        name: The tool called.
        arguments: Its arguments (echoed for unknown tools).

    Returns:
        The tool's result, as the text a ``tool`` message carries.
    """
    result = _RESULTS.get(name)
    if result is None:
        return f"error: no tool named {name!r} (arguments {json.dumps(dict(arguments))})"
    return result.format_map(_Arguments(arguments))


class _Arguments(dict[str, Any]):
    """Arguments for a result template; a missing one reads as ``?``."""

    def __init__(self, arguments: Mapping[str, Any]) -> None:
        super().__init__({key: str(value) for key, value in arguments.items()})

    def __missing__(self, key: str) -> str:
        return "?"
