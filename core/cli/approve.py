"""``jevqueue approve``: issue a signed approval for one action digest, or make a key pair."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import TYPE_CHECKING

import click
from jevqueue.errors import JevError

if TYPE_CHECKING:  # pragma: no cover
    from jevqueue.approvals import ApprovalAuthority

__all__ = ["approve", "signing_authority"]


class _IssueByDefault(click.Group):
    """``jevqueue approve DIGEST ...`` means ``jevqueue approve issue DIGEST ...``."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ctx.help_option_names:
            args = ["issue", *args]
        return super().parse_args(ctx, args)


@click.group(cls=_IssueByDefault)
def approve() -> None:
    """Issue Ed25519-signed approvals (`jevqueue approve DIGEST --key ... --approver ...`).

    The approval flow: the PEP raises UnfulfilledObligationError; its
    .verdict.action_digest is the DIGEST to approve; the record printed here is passed
    back as approval_records=[ApprovalRecord.from_dict(json.loads(output))].
    """


@approve.command()
@click.argument("digest")
@click.option(
    "--key",
    "key_file",
    required=True,
    type=click.Path(dir_okay=False, path_type=str),
    help="The approver's Ed25519 private key file (PEM, from `jevqueue approve keygen`).",
)
@click.option("--approver", required=True, help="The approver id verifiers trust this key as.")
@click.option(
    "--ttl",
    type=click.IntRange(min=1),
    default=600,
    show_default=True,
    help="Seconds until the approval expires (verifiers also refuse it 10 min after issue).",
)
def issue(digest: str, key_file: str, approver: str, ttl: int) -> None:
    """Print a signed approval record (JSON) for exactly the action with DIGEST."""
    try:
        record = signing_authority(key_file, approver, ttl).issue(digest.strip())
    except JevError as error:
        raise click.ClickException(str(error)) from error
    click.echo(json.dumps(record.to_dict(), indent=2))


def signing_authority(key_file: str, approver: str, ttl: int) -> ApprovalAuthority:
    """The approval authority of ``approver``'s key file, issuing for ``ttl`` seconds.

    Raises:
        ConfigurationError: the key file is missing, unreadable or not an Ed25519 private
            key, or the approver id is malformed.
    """
    from jevqueue.approvals import ApprovalAuthority, load_private_key

    return ApprovalAuthority(load_private_key(key_file), approver, ttl=timedelta(seconds=ttl))


@approve.command()
@click.argument("private_key", type=click.Path(dir_okay=False, path_type=str))
@click.option(
    "--public",
    "public_key",
    type=click.Path(dir_okay=False, path_type=str),
    default=None,
    help="Where to write the public key (default: PRIVATE_KEY.pub).",
)
@click.option("--force", is_flag=True, help="Overwrite existing key files.")
def keygen(private_key: str, public_key: str | None, force: bool) -> None:
    """Create an Ed25519 key pair: PRIVATE_KEY (mode 0600) and its .pub file."""
    from jevqueue.approvals import generate_key_pair

    try:
        private_path, public_path = generate_key_pair(private_key, public_key, overwrite=force)
    except JevError as error:
        raise click.ClickException(str(error)) from error
    click.echo(f"private key: {private_path}  (keep it with the approver only)")
    click.echo(f"public key:  {public_path}  (give it to SignedApprovalVerifier)")
