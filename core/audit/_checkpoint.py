"""Signed checkpoints of an audit log's head: a rewrite of the chain needs the key.

A hash chain alone proves nothing against someone who can rewrite the whole file: they
recompute every hash. With a signing key (an Ed25519 key such as ``jevqueue approve
keygen`` makes), the chain writes ``<log>.checkpoint`` after every record: the newest
``record_hash`` and the number of records this writer appended, signed. ``jevqueue audit
verify --key PUBLIC`` then refuses a log whose last record is not the one the newest
checkpoint signs — a record forged onto the end, a rewritten record, records cut off
the end — unless the forger holds the private key.

Where this ends: a checkpoint file replaced by an *older* genuine one, together with the
log cut back to exactly that point, still verifies. Export the head (``verify`` prints it)
to storage the agent's host cannot write, and check with ``--expect-head``.
"""

from __future__ import annotations

import base64
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jevqueue.errors import AuditReadError, ConfigurationError

__all__ = ["Checkpoint", "checkpoint_path", "read_checkpoint", "sign_checkpoint"]

_DOMAIN = "jevqueue.audit.checkpoint.v1"


def checkpoint_path(log_path: str | os.PathLike[str]) -> Path:
    """Return where the checkpoint of the log at ``log_path`` is kept (``<log>.checkpoint``)."""
    return Path(f"{os.fspath(log_path)}.checkpoint")


@dataclass(frozen=True)
class Checkpoint:
    """One signed statement: "the log's newest record is ``head``"."""

    head: str
    signature: str

    def signed_bytes(self) -> bytes:
        """The exact bytes the signature covers."""
        return _signed_bytes(self.head)

    def verify(self, public_key: Any) -> bool:
        """Whether ``public_key`` (an Ed25519 public key) signed this checkpoint."""
        from cryptography.exceptions import InvalidSignature

        try:
            public_key.verify(base64.b64decode(self.signature, validate=True), self.signed_bytes())
        except (InvalidSignature, ValueError, TypeError):
            return False
        return True


def _signed_bytes(head: str) -> bytes:
    return json.dumps({"domain": _DOMAIN, "head": head}, sort_keys=True).encode("ascii")


def sign_checkpoint(private_key: Any, head: str) -> Checkpoint:
    """Sign ``head`` with ``private_key`` (an Ed25519 private key)."""
    signature = private_key.sign(_signed_bytes(head))
    return Checkpoint(head, base64.b64encode(signature).decode("ascii"))


def write_checkpoint(path: Path, checkpoint: Checkpoint) -> None:
    """Replace the checkpoint file atomically (write beside it, then rename)."""
    text = json.dumps({"head": checkpoint.head, "signature": checkpoint.signature})
    partial = path.with_name(path.name + ".partial")
    with open(partial, "w", encoding="ascii") as handle:
        handle.write(text + "\n")
    os.replace(partial, path)


def read_checkpoint(path: Path) -> Checkpoint | None:
    """The checkpoint stored at ``path``, or ``None`` when there is none.

    Raises:
        AuditReadError: the file exists but is unreadable or malformed.
    """
    try:
        data = json.loads(path.read_text("ascii"))
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise AuditReadError(f"the checkpoint {str(path)!r} cannot be read ({error})") from error
    if (
        not isinstance(data, dict)
        or not isinstance(data.get("head"), str)
        or not isinstance(data.get("signature"), str)
    ):
        raise AuditReadError(f"the checkpoint {str(path)!r} is not a jevqueue checkpoint")
    return Checkpoint(data["head"], data["signature"])


def checked_signing_key(key: Any) -> Any:
    """An Ed25519 private key from a key object, PEM/raw bytes or a key file path.

    Raises:
        ConfigurationError: anything else.
    """
    from jevqueue.approvals._keys import coerce_private_key, load_private_key

    if isinstance(key, (str, os.PathLike)):
        return load_private_key(key)
    try:
        return coerce_private_key(key, "the audit signing key")
    except ConfigurationError:
        raise
    except Exception as error:  # pragma: no cover - coerce raises ConfigurationError
        raise ConfigurationError(f"the audit signing key is not usable ({error})") from error
