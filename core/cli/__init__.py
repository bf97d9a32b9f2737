"""The ``jevqueue`` command.

Each subcommand lives in its own module here and is imported only when it runs, so
``jevqueue --help`` stays fast and a missing optional dependency affects one command only.
"""

from __future__ import annotations

import importlib
from typing import Any

import click

# subcommand name -> "module:attribute" of a click command
_COMMANDS: dict[str, str] = {
    "demo": "jevqueue.cli.demo:demo",
    "policy": "jevqueue.cli.policy:policy",
    "approve": "jevqueue.cli.approve:approve",
    "approvals": "jevqueue.cli.approvals:approvals",
    "audit": "jevqueue.cli.audit:audit",
    "mcp-proxy": "jevqueue.cli.mcp_proxy:mcp_proxy",
    "db": "jevqueue.cli.db:db",
    "calibrate": "jevqueue.cli.calibrate:calibrate",
    "serve": "jevqueue.cli.serve:serve",
    "reviewers": "jevqueue.cli.reviewers:reviewers",
}


class _LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(_COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = _COMMANDS.get(cmd_name)
        if target is None:
            return None
        module_name, attribute = target.split(":")
        command: Any = getattr(importlib.import_module(module_name), attribute)
        assert isinstance(command, click.Command)
        return command


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="jevqueue")
def main() -> None:
    """Govern the tool calls of LLM agents."""
