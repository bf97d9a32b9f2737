"""``jevqueue mcp-proxy``: an MCP server that judges every tool call of the server behind it.

The MCP plugin is imported only when the command runs, so the rest of the CLI works
without the ``mcp`` extra; without it this command says which extra to install.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

import click

__all__ = ["mcp_proxy"]

_ELICITATION_APPROVER = "mcp-proxy-user"


def _plugin() -> Any:
    try:
        import jevqueue.plugins.mcp as plugin
    except ImportError as error:
        raise click.ClickException(
            f'{error}. The MCP proxy needs the mcp extra: pip install "jevqueue[mcp]"'
        ) from None
    return plugin


def _default_audit_path() -> Path:
    from jevqueue.approvals import default_consumed_approvals_path

    return default_consumed_approvals_path().parent / "mcp-audit.sqlite3"


def _context(context_file: str | None, fields: dict[str, str | None]) -> Any:
    from jevqueue.policy._context import ExecutionContext

    given = {key: value for key, value in fields.items() if value is not None}
    if context_file is not None and given:
        raise click.UsageError(
            "pass the context either as --context-file or as --task-id/--actor-id/"
            "--workspace/--git-sha/--environment, not both"
        )
    if context_file is not None:
        try:
            data = json.loads(Path(context_file).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
            raise click.BadParameter(
                f"cannot read it as a JSON object ({type(error).__name__}: {error})",
                param_hint="--context-file",
            ) from None
        if not isinstance(data, dict):
            raise click.BadParameter("must hold a JSON object", param_hint="--context-file")
    else:
        missing = [
            f"--{key.replace('_', '-')}"
            for key in ("task_id", "actor_id", "workspace", "git_sha")
            if key not in given
        ]
        if missing:
            raise click.UsageError(
                f"no execution context: pass {', '.join(missing)} (or --context-file FILE "
                'with {"task_id": ..., "actor_id": ..., "workspace": ..., "git_sha": ...})'
            )
        data = given
    from jevqueue.errors import JevError

    try:
        return ExecutionContext.coerce(data)
    except JevError as error:
        raise click.UsageError(f"the execution context is invalid: {error}") from None


def _trusted_keys(entries: tuple[str, ...]) -> dict[str, Any]:
    from jevqueue.approvals import load_public_key
    from jevqueue.errors import JevError

    trusted: dict[str, Any] = {}
    for entry in entries:
        approver, separator, path = entry.partition("=")
        if not separator or not approver or not path:
            raise click.BadParameter(
                f"{entry!r} must look like APPROVER_ID=PUBLIC_KEY_FILE",
                param_hint="--approver-key",
            )
        if approver == _ELICITATION_APPROVER:
            raise click.BadParameter(
                f"{approver!r} is the proxy's own approver for interactive answers; "
                "pick another id",
                param_hint="--approver-key",
            )
        try:
            trusted[approver] = load_public_key(path)
        except JevError as error:
            raise click.BadParameter(str(error), param_hint="--approver-key") from None
    return trusted


@click.command(
    "mcp-proxy",
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
)
@click.option(
    "--policy",
    "policies",
    multiple=True,
    type=click.Path(dir_okay=False),
    help="A policy file whose rules add to the defaults (repeatable).",
)
@click.option(
    "--audit",
    "audit_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="The audit log (SQLite; .jsonl for JSON lines). "
    "Default: $JEVQUEUE_STATE_DIR/mcp-audit.sqlite3.",
)
@click.option(
    "--tools",
    "tools_file",
    type=click.Path(dir_okay=False),
    default=None,
    help="The tools file: each upstream tool's side effects and path fields.",
)
@click.option(
    "--context-file",
    type=click.Path(dir_okay=False),
    default=None,
    help="The execution context as a JSON object.",
)
@click.option("--task-id", default=None, help="Execution context: the task.")
@click.option("--actor-id", default=None, help="Execution context: the acting agent.")
@click.option("--workspace", default=None, help="Execution context: the absolute workspace.")
@click.option("--git-sha", default=None, help="Execution context: the revision (7-64 hex).")
@click.option("--environment", default=None, help="Execution context: e.g. local, ci.")
@click.option(
    "--approver-key",
    "approver_keys",
    multiple=True,
    help="APPROVER_ID=PUBLIC_KEY_FILE: trust `jevqueue approve` records of this "
    "approver (repeatable).",
)
@click.option(
    "--approvals-dir",
    type=click.Path(file_okay=False),
    default=None,
    help="A directory of signed approval records (JSON from `jevqueue approve`).",
)
@click.option(
    "--inbox",
    "inbox",
    default=None,
    help="File each call that needs an approval in this approval inbox (a SQLite path or a "
    "postgresql:// URL) and wait for reviewers (`jevqueue approvals`, `jevqueue serve`) "
    "instead of asking the client's user.",
)
@click.option(
    "--inbox-wait",
    type=click.FloatRange(min=1, max=7 * 24 * 3600),
    default=None,
    help="With --inbox: seconds reviewers have before the request expires (default 240; "
    "at most the approval freshness less a minute).",
)
@click.option(
    "--upstream-url",
    default=None,
    help="Reach the upstream over streamable HTTP instead of starting COMMAND.",
)
@click.option(
    "--upstream-name",
    default=None,
    help="What you call the upstream (letters, digits, '._-'); with a hash of its command "
    "or URL, it is the origin every approval is bound to. Default: the program's or host's "
    "name.",
)
@click.option(
    "--relay-unjudged",
    "relay_unjudged",
    multiple=True,
    type=click.Choice(["resources", "prompts", "completions"]),
    help="Relay the upstream's prompts or completions although no policy judges them "
    "(repeatable; default: left out). Resources are relayed, each read judged, when the "
    "tools file declares resources/read.",
)
@click.option(
    "--describe",
    is_flag=True,
    help="Print a starting tools file for the upstream's tools, then exit.",
)
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def mcp_proxy(
    policies: tuple[str, ...],
    audit_path: str | None,
    tools_file: str | None,
    context_file: str | None,
    task_id: str | None,
    actor_id: str | None,
    workspace: str | None,
    git_sha: str | None,
    environment: str | None,
    approver_keys: tuple[str, ...],
    approvals_dir: str | None,
    inbox: str | None,
    inbox_wait: float | None,
    upstream_url: str | None,
    upstream_name: str | None,
    relay_unjudged: tuple[str, ...],
    describe: bool,
    command: tuple[str, ...],
) -> None:
    """Serve MCP over stdio in front of an upstream server: `-- COMMAND [ARGS...]`.

    Every tools/call is judged by the policy before it reaches the upstream; tools the
    tools file does not declare, or that the upstream lists otherwise than the tools file
    pins, are hidden and refused. Start with
    `jevqueue mcp-proxy --describe -- COMMAND > tools.toml` and review the file.
    """
    plugin = _plugin()
    from jevqueue.errors import JevError

    if bool(command) == bool(upstream_url):
        raise click.UsageError(
            "name the upstream server: `-- COMMAND [ARGS...]` to start it over stdio, or "
            "--upstream-url URL for a streamable HTTP server (one of the two)"
        )
    try:
        upstream = (
            plugin.Upstream.http(upstream_url, name=upstream_name)
            if upstream_url
            # The upstream gets the proxy's environment: clients pass a server's tokens and
            # settings in the environment of the command they start, which is the proxy.
            else plugin.Upstream.stdio(*command, env=dict(os.environ), name=upstream_name)
        )
    except JevError as error:
        raise click.UsageError(str(error)) from None
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="jevqueue: %(message)s")
    if inbox_wait is not None and inbox is None:
        raise click.UsageError("--inbox-wait needs --inbox: the approval inbox to wait on")
    if describe:
        try:
            text = plugin.describe_upstream(upstream)
        except JevError as error:
            raise click.ClickException(str(error)) from None
        click.echo(text, nl=False)
        return
    if tools_file is None:
        raise click.UsageError(
            "no --tools FILE: the proxy refuses every tool it does not know. Write one "
            "with `jevqueue mcp-proxy --describe -- COMMAND > tools.toml` and review it"
        )
    context = _context(
        context_file,
        {
            "task_id": task_id,
            "actor_id": actor_id,
            "workspace": workspace,
            "git_sha": git_sha,
            "environment": environment,
        },
    )
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from jevqueue.approvals import ApprovalAuthority, SignedApprovalVerifier
    from jevqueue.policy._pdp import create_default_policy_decision_point
    from jevqueue.policy._pep import PolicyEnforcementPoint
    from jevqueue.policy._tools_file import load_tools_file

    try:
        specs = load_tools_file(tools_file)
        pdp = create_default_policy_decision_point(policy_files=list(policies))
        # A fresh key per proxy process: the user's "yes" to an elicited question is signed
        # with it, and nothing outside this process can sign as that approver.
        authority = ApprovalAuthority(Ed25519PrivateKey.generate(), _ELICITATION_APPROVER)
        trusted = {_ELICITATION_APPROVER: authority.public_key, **_trusted_keys(approver_keys)}
        log_path = Path(audit_path) if audit_path is not None else _default_audit_path()
        log_path.parent.mkdir(parents=True, exist_ok=True)
        if log_path.suffix == ".jsonl":
            from jevqueue.audit import JsonlAuditLog

            audit_log: Any = JsonlAuditLog(log_path)
        else:
            from jevqueue.audit import SQLiteAuditLog

            audit_log = SQLiteAuditLog(log_path)
        pep = PolicyEnforcementPoint(
            pdp, audit_logger=audit_log, approval_verifier=SignedApprovalVerifier(trusted)
        )
        proxy = plugin.PolicyProxyServer(
            upstream,
            pep=pep,
            specs=specs,
            context=context,
            authority=authority,
            approvals_dir=approvals_dir,
            approver=_inbox_approver(inbox, inbox_wait, upstream_name),
            relay_unjudged=relay_unjudged,
        )
    except JevError as error:
        raise click.ClickException(str(error)) from None
    except OSError as error:
        raise click.ClickException(f"cannot prepare the proxy: {error}") from None
    raise SystemExit(proxy.run_stdio())


def _inbox_approver(inbox: str | None, wait: float | None, upstream_name: str | None) -> Any:
    """The approver filing in ``inbox``, or ``None`` (the client's user is asked)."""
    if inbox is None:
        return None
    from jevqueue.approvals import InboxApprover

    settings: dict[str, Any] = {"framework": "mcp", "session_id": upstream_name}
    if wait is not None:
        settings["expires_in"] = wait
    return InboxApprover(inbox, **settings)
