"""``jevqueue policy``: check policy files, and explain what the policy says about a call."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

__all__ = ["policy"]


@click.group()
def policy() -> None:
    """Check policy files and explain verdicts."""


@policy.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=str))
@click.option("--quiet", "-q", is_flag=True, help="Print mistakes only, no summary or warnings.")
def check(files: tuple[str, ...], quiet: bool) -> None:
    """Report every mistake in FILES with its file and line.

    Exits 0 when every file is usable, 1 when any has a mistake.
    """
    from jevqueue.policy_files._loader import check_policy_file

    mistakes = 0
    for file in files:
        report = check_policy_file(file)
        for error in report.errors:
            click.echo(str(error))
        if not quiet:
            for warning in report.warnings:
                click.echo(str(warning))
        mistakes += len(report.errors)
        if report.ok and not quiet:
            click.echo(report.summary())
    if mistakes:
        plural = "" if mistakes == 1 else "s"
        click.echo(f"{mistakes} mistake{plural} found", err=True)
        raise SystemExit(1)


@policy.command(name="list")
def list_policies() -> None:
    """List the policy files jevqueue ships, with their paths and what each does."""
    from jevqueue.policy_files._loader import check_policy_file
    from jevqueue.policy_files._shipped import shipped_policy_names, shipped_policy_path

    for name in shipped_policy_names():
        path = shipped_policy_path(name)
        report = check_policy_file(path)
        click.echo(f"{name}: {report.summary()}")
        click.echo(f"  {path}")


def _json_object(value: str, option: str) -> dict[str, Any]:
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError as error:
        raise click.BadParameter(f"not valid JSON: {error.msg}", param_hint=option) from None
    if not isinstance(parsed, dict):
        raise click.BadParameter("must be a JSON object", param_hint=option)
    return parsed


def _provenance(
    tools: Any, arguments: dict[str, Any], user_said: tuple[str, ...], read: tuple[str, ...]
) -> Any:
    """The provenance of ``arguments`` given what the user wrote and what the agent read."""
    if not user_said and not read:
        return None
    from jevqueue.policy._provenance import Transcript
    from jevqueue.policy._registry import UNTRUSTED

    transcript = Transcript()
    for text in user_said:
        transcript.user(text)
    for index, entry in enumerate(read, 1):
        tool, separator, file = entry.partition("=")
        if not separator or not tool or not file:
            raise click.BadParameter(
                f"{entry!r} is not TOOL=FILE (e.g. read_inbox=inbox.json)", param_hint="--read"
            )
        try:
            output = Path(file).read_text("utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise click.BadParameter(
                f"cannot read {file!r} as UTF-8 text: {error}", param_hint="--read"
            ) from None
        try:
            trust = tools.get(tool).output_trust
        except Exception:  # undeclared: trusted no further
            trust = UNTRUSTED
        transcript.output(tool, f"read-{index}", output, trust)
    return transcript.provenance(arguments) or None


@policy.command()
@click.argument("files", nargs=-1, type=click.Path(dir_okay=False, path_type=str))
@click.option("--tool", "tool_name", required=True, help="The tool name, e.g. write_to_file.")
@click.option("--args", "arguments", default="{}", help="The tool arguments as a JSON object.")
@click.option(
    "--context",
    "context",
    required=True,
    help='The execution context as a JSON object: {"task_id": ..., "actor_id": ..., '
    '"workspace": ..., "git_sha": ..., "environment": ...}.',
)
@click.option(
    "--registry",
    type=click.Choice(["generic", "antigravity"]),
    default="antigravity",
    show_default=True,
    help="Which built-in tool registry to judge the call against (without --tools).",
)
@click.option(
    "--tools",
    "tools_file",
    default=None,
    type=click.Path(dir_okay=False, path_type=str),
    help="A tools file (TOML [[tool]] tables) declaring your own tools: judge the call "
    "against those declarations instead of a built-in registry.",
)
@click.option(
    "--user-said",
    "user_said",
    multiple=True,
    help="What the user wrote in this task (repeatable): a value found here is the user's.",
)
@click.option(
    "--read",
    "read",
    multiple=True,
    metavar="TOOL=FILE",
    help="A tool output the agent read (repeatable), as TOOL=FILE (the file holds the "
    "output, text or JSON); trusted as TOOL's declaration says, untrusted when undeclared. "
    "With --user-said or --read, the call's provenance is judged and shown.",
)
def explain(
    files: tuple[str, ...],
    tool_name: str,
    arguments: str,
    context: str,
    registry: str,
    tools_file: str | None,
    user_said: tuple[str, ...],
    read: tuple[str, ...],
) -> None:
    """Show the verdict the default policy plus FILES gives one tool call.

    The tool is looked up in --tools FILE (your own declarations) when given, else in a
    built-in registry (--registry).

    Nothing runs and nothing is audited. Exits 0 whatever the verdict; 1 when a policy
    file has a mistake or the call is refused before evaluation (unregistered tool, bad
    context or arguments); 2 on usage mistakes.
    """
    from jevqueue.errors import JevError, PolicyFileError
    from jevqueue.policy._action import Action
    from jevqueue.policy._pdp import create_default_policy_decision_point
    from jevqueue.policy._registry import antigravity_registry, generic_registry

    parsed_arguments = _json_object(arguments, "--args")
    parsed_context = _json_object(context, "--context")
    if tools_file is not None:
        from jevqueue.policy._registry import ToolRegistry
        from jevqueue.policy._tools_file import load_tools_file

        try:
            tools = ToolRegistry(load_tools_file(tools_file))
        except JevError as error:
            click.echo(str(error))
            raise SystemExit(1) from None
    else:
        tools = antigravity_registry() if registry == "antigravity" else generic_registry()
    try:
        pdp = create_default_policy_decision_point(policy_files=list(files), registry=tools)
    except PolicyFileError as error:
        click.echo(str(error))
        raise SystemExit(1) from None
    try:
        from jevqueue.policy._context import ExecutionContext

        provenance = _provenance(tools, parsed_arguments, user_said, read)
        action = Action.build(
            tools,
            tool_name,
            parsed_arguments,
            ExecutionContext.coerce(parsed_context),
            provenance=provenance,
        )
    except JevError as error:
        click.echo(f"REFUSED before evaluation: {type(error).__name__}: {error}")
        raise SystemExit(1) from None
    verdict = pdp.evaluate(action)
    click.echo(f"verdict:   {verdict.kind.value}")
    click.echo(f"digest:    {verdict.action_digest or action.digest}")
    if verdict.policy_revision:
        click.echo(f"revision:  {verdict.policy_revision}")
    if action.targets:
        click.echo(f"targets:   {', '.join(action.targets)}")
    if action.cwd is not None:
        click.echo(f"cwd:       {action.cwd}")
    click.echo(f"effects:   {', '.join(sorted(action.side_effects)) or '-'}")
    if verdict.rule_ids:
        click.echo(f"rules:     {', '.join(verdict.rule_ids)}")
    if verdict.obligations:
        click.echo(f"requires:  {', '.join(verdict.obligations)}")
    for reason in verdict.reasons:
        click.echo(f"reason:    {reason}")
    if action.provenance is not None:
        for origin in action.provenance.origins:
            click.echo(f"origin:    {origin.describe()}")
    if verdict.repaired is not None:
        click.echo(f"repaired:  {json.dumps(dict(verdict.repaired), sort_keys=True)}")
