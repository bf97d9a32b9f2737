"""``jevqueue db``: create and upgrade the PostgreSQL schema a fleet shares."""

from __future__ import annotations

import click
from jevqueue.errors import ConfigurationError

__all__ = ["db"]


@click.group()
def db() -> None:
    """Manage the PostgreSQL database of a fleet (audit chain, consumed approvals, inbox)."""


@db.command()
@click.option(
    "--url",
    envvar="JEVQUEUE_DATABASE_URL",
    default=None,
    help="A libpq connection string; default $JEVQUEUE_DATABASE_URL.",
)
@click.option("--schema", default="jevqueue", show_default=True, help="The schema to migrate.")
def migrate(url: str | None, schema: str) -> None:
    """Create jevqueue's tables, or bring them to this release's version.

    Idempotent and versioned: a schema already up to date is left alone, pending migrations
    run in one transaction under a lock, so several hosts may run this at once. Exits 0 on
    success, 2 when the database cannot be reached or migrated.
    """
    from jevqueue.db import migrate as run_migrations

    try:
        report = run_migrations(url, schema=schema)
    except (ConfigurationError, ImportError) as error:
        click.echo(f"Error: {error}", err=True)
        raise SystemExit(2) from error
    click.echo(report.summary())
