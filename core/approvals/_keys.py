"""Ed25519 key files for approval authorities and verifiers."""

from __future__ import annotations

import os
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from jevqueue.errors import ConfigurationError

__all__ = [
    "coerce_private_key",
    "coerce_public_key",
    "generate_key_pair",
    "load_private_key",
    "load_public_key",
]

_KEYGEN_HINT = "create a key pair with `jevqueue approve keygen PATH`"


def generate_key_pair(
    private_path: str | os.PathLike[str],
    public_path: str | os.PathLike[str] | None = None,
    *,
    overwrite: bool = False,
) -> tuple[Path, Path]:
    """Create an Ed25519 key pair and write it as PEM files.

    The private key is PKCS#8 PEM, readable by its owner only (mode 0600); the public key
    is SubjectPublicKeyInfo PEM, by default beside it with a ``.pub`` suffix.

    Returns:
        The paths of the private and the public key file.

    Raises:
        ConfigurationError: a file exists and ``overwrite`` is false, or cannot be written.
    """
    private_file = Path(private_path)
    public_file = Path(public_path) if public_path is not None else Path(f"{private_file}.pub")
    for target in (private_file, public_file):
        if target.exists() and not overwrite:
            raise ConfigurationError(
                f"key file {str(target)!r} already exists: choose another path, or overwrite "
                "it on purpose (an overwritten key invalidates every approval it signed)"
            )
    key = Ed25519PrivateKey.generate()
    private_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    public_pem = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    try:
        private_file.parent.mkdir(parents=True, exist_ok=True)
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
        descriptor = os.open(private_file, flags, 0o600)
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(private_pem)
        os.chmod(private_file, 0o600)
        public_file.parent.mkdir(parents=True, exist_ok=True)
        public_file.write_bytes(public_pem)
    except OSError as error:
        raise ConfigurationError(
            f"cannot write the key pair ({type(error).__name__}: {error}): choose a writable path"
        ) from error
    return private_file, public_file


def _read(path: str | os.PathLike[str], what: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except FileNotFoundError:
        raise ConfigurationError(
            f"{what} file {str(path)!r} does not exist: check the path, or {_KEYGEN_HINT}"
        ) from None
    except OSError as error:
        raise ConfigurationError(
            f"cannot read {what} file {str(path)!r} ({type(error).__name__}): check its permissions"
        ) from error


def coerce_private_key(
    value: Ed25519PrivateKey | bytes, source: str = "private key"
) -> Ed25519PrivateKey:
    """Return an Ed25519 private key from a key object, PEM bytes or 32 raw bytes.

    Raises:
        ConfigurationError: the value is not an Ed25519 private key.
    """
    if isinstance(value, Ed25519PrivateKey):
        return value
    if not isinstance(value, bytes):
        raise ConfigurationError(
            f"{source} must be an Ed25519PrivateKey, PEM bytes or 32 raw bytes, "
            f"not {type(value).__name__}"
        )
    if len(value) == 32:
        return Ed25519PrivateKey.from_private_bytes(value)
    try:
        key = serialization.load_pem_private_key(value, password=None)
    except TypeError:
        raise ConfigurationError(
            f"{source} is encrypted: store it unencrypted with file permissions 0600, "
            f"or {_KEYGEN_HINT}"
        ) from None
    except ValueError:
        if b"PUBLIC KEY" in value:
            raise ConfigurationError(
                f"{source} holds a public key: signing needs the private key (the file "
                "without .pub)"
            ) from None
        raise ConfigurationError(
            f"{source} is neither a PEM private key nor 32 raw bytes: {_KEYGEN_HINT}"
        ) from None
    if not isinstance(key, Ed25519PrivateKey):
        raise ConfigurationError(
            f"{source} is a {type(key).__name__.lstrip('_')}, not an Ed25519 key: "
            f"approvals are signed with Ed25519; {_KEYGEN_HINT}"
        )
    return key


def coerce_public_key(
    value: Ed25519PublicKey | bytes, source: str = "public key"
) -> Ed25519PublicKey:
    """Return an Ed25519 public key from a key object, PEM bytes or 32 raw bytes.

    Raises:
        ConfigurationError: the value is not an Ed25519 public key.
    """
    if isinstance(value, Ed25519PublicKey):
        return value
    if not isinstance(value, bytes):
        raise ConfigurationError(
            f"{source} must be an Ed25519PublicKey, PEM bytes or 32 raw bytes, "
            f"not {type(value).__name__}"
        )
    if len(value) == 32:
        return Ed25519PublicKey.from_public_bytes(value)
    try:
        key = serialization.load_pem_public_key(value)
    except ValueError:
        if b"PRIVATE KEY" in value:
            raise ConfigurationError(
                f"{source} holds a private key: give the verifier the public key "
                "(the .pub file) and keep the private key with the approver"
            ) from None
        raise ConfigurationError(
            f"{source} is neither a PEM public key nor 32 raw bytes: {_KEYGEN_HINT}"
        ) from None
    if not isinstance(key, Ed25519PublicKey):
        raise ConfigurationError(
            f"{source} is a {type(key).__name__.lstrip('_')}, not an Ed25519 key: "
            f"approvals are signed with Ed25519; {_KEYGEN_HINT}"
        )
    return key


def load_private_key(path: str | os.PathLike[str]) -> Ed25519PrivateKey:
    """Read an Ed25519 private key from a PEM (PKCS#8) file or a 32-byte raw file.

    Raises:
        ConfigurationError: the file is missing, unreadable, or holds another kind of key.
    """
    return coerce_private_key(_read(path, "private key"), f"private key file {str(path)!r}")


def load_public_key(path: str | os.PathLike[str]) -> Ed25519PublicKey:
    """Read an Ed25519 public key from a PEM file or a 32-byte raw file.

    Raises:
        ConfigurationError: the file is missing, unreadable, or holds another kind of key.
    """
    return coerce_public_key(_read(path, "public key"), f"public key file {str(path)!r}")
