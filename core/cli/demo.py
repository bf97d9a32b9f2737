"""``jevqueue demo``: play a governed agent session and show what each turn did.

On embedded defaults the session runs against a scripted model behind the real
OpenAI-compatible host, over an in-process transport: no API key, no server, no network.
``--base-url``/``--model``/``--api-key-env`` run the same session against a real endpoint.
"""

from __future__ import annotations

import json
import os
import textwrap
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import click
from jevqueue.governor._path import Path

if TYPE_CHECKING:  # pragma: no cover - imported when the command runs, not for --help
    from jevqueue.demo import DemoSession, Endpoint, StepReport

__all__ = ["demo"]

_STYLE: dict[Path, dict[str, Any]] = {
    Path.TOOL: {"fg": "green"},
    Path.STATIC_TOOL: {"fg": "green"},
    Path.PROSE: {"fg": "cyan"},
    Path.DELEGATE: {"fg": "cyan"},
    Path.CLARIFY: {"fg": "yellow"},
    Path.RISK_STOP: {"fg": "yellow"},
    Path.ERROR_DELEGATE: {"fg": "red"},
    Path.ERROR_RAISE: {"fg": "red"},
    Path.INTERRUPTED: {"fg": "magenta"},
}
_WIDTH = 96
_LABEL = 10  # width of the label column under a step
_TOP_SCORES = 3


def _line(label: str, text: str) -> None:
    indent = " " * (6 + _LABEL)
    body = textwrap.fill(
        text, width=_WIDTH, initial_indent=indent, subsequent_indent=indent
    ).lstrip()
    click.echo("      " + click.style(label.ljust(_LABEL), dim=True) + body)


def _short(text: str, limit: int = 150) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _wire(request: Mapping[str, Any] | None, calls: int, path: Path | None) -> str:
    if calls == 0 or request is None:
        local = {
            Path.STATIC_TOOL: "the tool call was built locally (say_tool_call)",
            Path.CLARIFY: "the question was built locally (say)",
            Path.RISK_STOP: "the reason was built locally (say)",
        }
        if path is None:
            return "0 calls"
        return f"{calls} calls: " + local.get(path, "nothing was sent")
    choice = request.get("tool_choice")
    if isinstance(choice, Mapping):
        name = choice.get("function", {}).get("name")
        parallel = json.dumps(request.get("parallel_tool_calls"))
        shape = f'tool_choice -> "{name}", parallel_tool_calls: {parallel}, directive appended'
    elif choice == "none":
        shape = 'tool_choice: "none" (tools visible, not callable), directive appended'
    else:
        shape = "passthrough: the request as built, no tool_choice, no directive"
    return f"{calls} call{'s' if calls != 1 else ''}: {shape}"


def _tool(report: StepReport) -> str:
    decision = report.decision
    tool = decision.tool if decision is not None else None
    path = report.path
    if path is Path.TOOL:
        return f"forced: {tool}"
    if path is Path.STATIC_TOOL:
        return f"called locally: {tool}"
    if path is Path.RISK_STOP:
        return f"stopped: {tool}" if tool else "stopped"
    if path is Path.CLARIFY:
        return "asks which tool"
    if path is Path.INTERRUPTED and tool:
        return f"not run: {tool}"
    return "no tool forced"


def _scores(scores: Mapping[str, float]) -> str:
    if not scores:
        return "(not scored)"
    top = list(scores.items())[:_TOP_SCORES]
    return ", ".join(f"{name} {score:.2f}" for name, score in top)


def _arguments(arguments: Mapping[str, Any]) -> str:
    return ", ".join(f"{key}={json.dumps(value)}" for key, value in arguments.items())


def _render(report: StepReport) -> None:
    if report.user is not None:
        click.echo()
        click.echo(
            click.style(f"Turn {report.turn}", bold=True)
            + "  user: "
            + click.style(f'"{report.user}"', bold=True)
        )
        if report.shows:
            click.echo(
                click.style(
                    textwrap.fill(
                        report.shows,
                        width=_WIDTH,
                        initial_indent="        ",
                        subsequent_indent="        ",
                    ),
                    dim=True,
                )
            )
        if report.induced is not None:
            what = {
                "calendar_outage": "the change-freeze calendar is unreachable",
                "interrupt": "Ctrl-C is pressed while the turn is decided",
            }[report.induced.value]
            click.echo(click.style(f"        induced locally: {what}", fg="magenta"))
    decision = report.decision
    path = report.path
    label = path.value if path is not None else "?"
    style = _STYLE.get(path, {}) if path is not None else {}
    mark = ""
    if not report.as_expected and report.expected is not None:
        mark = click.style(f"  (script expected {report.expected.value})", fg="red", bold=True)
    after = "" if report.user is not None else click.style("  after the tool result", dim=True)
    click.echo(
        "  > " + click.style(label.ljust(15), bold=True, **style) + _tool(report) + after + mark
    )
    if decision is not None:
        _line("scores", _scores(decision.scores))
    _line("provider", _wire(report.request, report.provider_calls, path))
    if (
        decision is not None
        and decision.error
        and path is not None
        and path.value.startswith("error")
    ):
        _line("failed", decision.error)
    if report.error is not None:
        blocked = report.error.startswith("ProviderDisobeyedError")
        _line("blocked" if blocked else "raised", _short(report.error, 200))
    for run in report.tool_runs:
        _line("ran", f"{run.name}({_arguments(run.arguments)}) -> {_short(run.result, 90)!r}")
    if report.reply is not None:
        said_locally = path in (Path.CLARIFY, Path.RISK_STOP)
        _line("says", report.reply if said_locally else _short(report.reply))


@click.command()
@click.option(
    "--base-url",
    metavar="URL",
    help="An OpenAI-compatible /v1 endpoint to run the session against, "
    "e.g. http://127.0.0.1:8080/v1. Omit it to use the embedded scripted model.",
)
@click.option("--model", metavar="ID", help="The model id to request (with --base-url).")
@click.option(
    "--api-key-env",
    metavar="NAME",
    help="The environment variable that holds the API key (with --base-url), "
    "e.g. OPENAI_API_KEY. Omit it for servers without authentication.",
)
def demo(base_url: str | None, model: str | None, api_key_env: str | None) -> None:
    """Play a governed agent session through all nine paths.

    Each turn shows the user's message, the path the governor chose, the tool, the top
    ballot scores and the provider calls that were actually sent. With no options it
    needs no API key, no server and no network.
    """
    from jevqueue.demo import Endpoint

    if os.environ.get("NO_COLOR"):  # https://no-color.org
        click.get_current_context().color = False
    endpoint: Endpoint | None = None
    if base_url is None:
        if model is not None or api_key_env is not None:
            raise click.UsageError("--model and --api-key-env go with --base-url")
    else:
        if not model:
            raise click.UsageError("--base-url needs --model: the model id to request")
        api_key: str | None = None
        if api_key_env:
            api_key = os.environ.get(api_key_env)
            if not api_key:
                raise click.UsageError(
                    f"the environment variable {api_key_env} is not set: export the API key "
                    "in it, or omit --api-key-env for a server without authentication"
                )
        endpoint = Endpoint(base_url=base_url, model=model, api_key=api_key)
    raise SystemExit(_play(endpoint))


def _play(endpoint: Endpoint | None) -> int:
    from jevqueue.demo import DemoSession
    from jevqueue.demo.scripted_model import ScriptMismatchError
    from jevqueue.errors import ProviderHTTPError

    try:
        session = DemoSession(endpoint)
    except ImportError as exc:
        click.echo(click.style(f"error: {exc}", fg="red"), err=True)
        return 1
    _header(session)
    seen: list[Path] = []
    off_script = 0
    steps = calls = 0
    try:
        for report in session.play():
            _render(report)
            steps += 1
            calls += report.provider_calls
            if report.path is not None and report.path not in seen:
                seen.append(report.path)
            off_script += not report.as_expected
    except ProviderHTTPError as exc:
        click.echo()
        click.echo(click.style(f"error: {exc}", fg="red"), err=True)
        return 1
    except ScriptMismatchError as exc:
        click.echo()
        click.echo(click.style(f"error: the session left its script: {exc}", fg="red"), err=True)
        return 1
    finally:
        session.close()
    _summary(seen, steps, calls, off_script, session.scripted)
    if session.scripted and (off_script or len(seen) != len(Path)):
        return 1
    return 0


def _header(session: DemoSession) -> None:
    click.echo(click.style("jevqueue demo", bold=True) + ": a governed repository assistant")
    if session.endpoint is None:
        model = (
            "a scripted model behind the OpenAI-compatible host, over an in-process "
            "httpx.MockTransport: no API key, no server, no network"
        )
    else:
        model = (
            f"{session.endpoint.model} at {session.host.url}. The tools run locally with fixed "
            "results; the calendar outage and the Ctrl-C cannot come from a model, so they "
            "are induced locally. A real model may take other paths than the script expects."
        )
    t = session.thresholds
    _line("model", model)
    _line(
        "governor",
        f"LexicalBallot, Thresholds(confident={t.confident:g}, margin={t.margin:g}, "
        f"floor={t.floor:g}), {len(session.tools)} tools, risk rules: destructive intent, "
        "prompt injection, change freeze",
    )
    if session.thresholds_note:
        _line("note", session.thresholds_note)


def _summary(seen: list[Path], steps: int, calls: int, off_script: int, scripted: bool) -> None:
    click.echo()
    marks = []
    for path in Path:
        taken = path in seen
        marks.append(
            click.style(path.value, **(_STYLE[path] if taken else {"dim": True}))
            + ("" if taken else " (not taken)")
        )
    click.echo(
        click.style("Paths taken", bold=True)
        + f" ({len(seen)} of {len(Path)}): "
        + ", ".join(marks)
    )
    click.echo(
        f"{steps} governed steps, {calls} provider calls; "
        f"{steps - calls} steps needed no provider call."
    )
    if off_script:
        colour = "red" if scripted else "yellow"
        click.echo(click.style(f"{off_script} step(s) took another path than scripted.", fg=colour))
