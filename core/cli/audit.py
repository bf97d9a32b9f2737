"""``jevqueue audit``: verify a hash-chained audit log, sign it, or export it as JSONL."""

from __future__ import annotations

import json

import click
from jevqueue.errors import AuditIntegrityError, AuditReadError, JevError

__all__ = ["audit"]


@click.group()
def audit() -> None:
    """Inspect and verify audit logs."""


_SCHEMA = click.option(
    "--schema",
    default="jevqueue",
    show_default=True,
    help="For a postgresql:// URL: the schema holding the log.",
)


@audit.command()
@click.argument("path", type=str)
@click.option(
    "--expect-head",
    default=None,
    help="A head hash printed by an earlier verify: the log must still contain it.",
)
@click.option(
    "--expect-count",
    type=click.IntRange(min=0),
    default=None,
    help="The log must hold at least this many records.",
)
@click.option(
    "--key",
    "key_file",
    default=None,
    type=click.Path(dir_okay=False, path_type=str),
    help="The public key (.pub) of the log's signing key: the signed checkpoint must be "
    "of this log and cover it to its last record.",
)
@click.option(
    "--log-id",
    "log_id",
    default=None,
    help="A log id printed by an earlier verify: the log must be that log, not another "
    "one put in its place.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@_SCHEMA
def verify(
    path: str,
    expect_head: str | None,
    expect_count: int | None,
    key_file: str | None,
    log_id: str | None,
    as_json: bool,
    schema: str,
) -> None:
    """Check the hash chain of the audit log at PATH: an SQLite or JSONL file, or a
    PostgreSQL database given as a postgresql:// URL.

    Prints OK with the record count and head hash, and the log's id, or every record that
    was edited, deleted, reordered or cut off, or is malformed (unreadable, or carrying keys
    outside the record's fields or a key twice), or whose end no anchor vouches for (a
    missing, empty or stale head anchor); with --key, a checkpoint of another log or of the
    old format, and records no signed checkpoint covers. What a writer that stopped
    mid-write leaves (a crash) is reported as such, not as tampering. Exits 0 when the log
    verifies, 1 when it does not, 2 when it cannot be read, 3 when the only problems are
    what a crash leaves, which the next open of the log recovers.
    """
    from jevqueue.audit import verify_audit_log

    public_key = None
    if key_file is not None:
        from jevqueue.approvals import load_public_key

        try:
            public_key = load_public_key(key_file)
        except JevError as error:
            click.echo(f"Error: {error}", err=True)
            raise SystemExit(2) from error
    try:
        report = verify_audit_log(
            path,
            expected_head=expect_head,
            expected_count=expect_count,
            public_key=public_key,
            schema=schema,
            expected_log_id=log_id,
        )
    except (AuditReadError, ImportError) as error:
        click.echo(f"Error: {error}", err=True)
        raise SystemExit(2) from error
    if as_json:
        click.echo(
            json.dumps(
                {
                    "ok": report.ok,
                    "recoverable": report.recoverable,
                    "path": report.path,
                    "format": report.format,
                    "count": report.count,
                    "head_hash": report.head_hash,
                    "log_id": report.log_id,
                    "problems": [
                        {
                            "kind": problem.kind,
                            "index": problem.index,
                            "decision_id": problem.decision_id,
                            "message": problem.message,
                        }
                        for problem in report.problems
                    ],
                    "notes": list(report.notes),
                },
                indent=2,
            )
        )
    else:
        click.echo(report.summary())
        if report.log_id:
            click.echo(f"log id: {report.log_id}")
        for note in report.notes:
            click.echo(f"note: {note}")
    if report.recoverable:
        raise SystemExit(3)
    if not report.ok:
        raise SystemExit(1)


@audit.command()
@click.argument("path", type=str)
@click.option(
    "--key",
    "key_file",
    required=True,
    type=click.Path(dir_okay=False, path_type=str),
    help="The log's signing key (the private half).",
)
def sign(path: str, key_file: str) -> None:
    """Sign the current end of the SQLite or JSONL audit log at PATH.

    For a log written without a key so far (a writer with the key refuses to start on a
    log with records and no checkpoint), or whose checkpoint is of the old format, which
    signed the head alone. PATH must verify first, and a checkpoint beside it must be
    signed by this key and cover the log: a signature never vouches for records cut,
    rewritten or added since. Exits 0 when the checkpoint was written, 1 when PATH does not
    verify or does not match its checkpoint, 2 when it cannot be read or the key is unusable.
    """
    from jevqueue.audit._checkpoint import sign_audit_log

    try:
        checkpoint = sign_audit_log(path, key_file)
    except AuditIntegrityError as error:
        click.echo(f"Error: not signed:\n{error}", err=True)
        raise SystemExit(1) from error
    except (AuditReadError, JevError) as error:
        click.echo(f"Error: {error}", err=True)
        raise SystemExit(2) from error
    click.echo(
        f"signed {checkpoint.count} records of {path}: log id {checkpoint.log_id or '(empty)'}, "
        f"head {checkpoint.head}"
    )


@audit.command(name="export")
@click.argument("source", type=str)
@click.argument("destination", type=click.Path(dir_okay=False, path_type=str))
@_SCHEMA
def export(source: str, destination: str, schema: str) -> None:
    """Copy the audit log SOURCE (a file or a postgresql:// URL) to the new JSONL file
    DESTINATION, with its head anchor, so that `jevqueue audit verify DESTINATION` checks
    the copy as it checks the original.

    SOURCE is verified first and not exported when it has any problem. Exits 0 when the
    copy was written and verifies, 1 when SOURCE does not verify, 2 when it cannot be read
    or DESTINATION cannot be written.
    """
    from jevqueue.audit import export_audit_log

    try:
        report = export_audit_log(source, destination, schema=schema)
    except AuditIntegrityError as error:
        click.echo(f"Error: not exported, the source does not verify:\n{error}", err=True)
        raise SystemExit(1) from error
    except (AuditReadError, ImportError) as error:
        click.echo(f"Error: {error}", err=True)
        raise SystemExit(2) from error
    click.echo(f"exported {report.count} records to {destination}; head {report.head_hash}")
