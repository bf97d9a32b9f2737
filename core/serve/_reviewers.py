"""The reviewers file: who may log in to ``jevqueue serve``, and the key each signs with.

A TOML file with one ``[[reviewer]]`` table per reviewer::

    [[reviewer]]
    id = "alice"             # the approver id the agents' verifier trusts the key as
    token_sha256 = "9f86..." # SHA-256 (64 hex digits) of alice's login token
    key = "keys/alice.key"   # her Ed25519 private key; relative to this file

``jevqueue reviewers add NAME --key KEY`` writes an entry and prints the new login token
once. Tokens are 256 random bits, so one SHA-256 is enough to store them: a password hash
slows down guessing a low-entropy secret, and there is none to guess here.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import secrets
import sys
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from jevqueue.approvals import ApprovalAuthority, load_private_key
from jevqueue.approvals._record import IDENTIFIER_PATTERN
from jevqueue.errors import ConfigurationError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

__all__ = [
    "TOKEN_PREFIX",
    "Reviewer",
    "Reviewers",
    "ReviewersFile",
    "entries_of_file",
    "hash_token",
    "new_login_token",
    "render_reviewers_file",
    "write_reviewers_file",
]

TOKEN_PREFIX = "jevq_"
"""Login tokens start with it, so that a secret scanner recognises a leaked one."""

_HASH = re.compile(r"[0-9a-f]{64}")
_FIELDS = frozenset({"id", "token_sha256", "key"})
_ORDER = ("id", "token_sha256", "key")
_ADD_HINT = "add one with `jevqueue reviewers add NAME --key KEY --file FILE`"
# compared against when the reviewer is unknown, so that a wrong name costs what a wrong
# token costs
_NOBODY = hashlib.sha256(b"jevqueue: no such reviewer").hexdigest()


def new_login_token() -> str:
    """A fresh login token: ``jevq_`` and 256 random bits, URL-safe."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    """The SHA-256 of ``token`` as 64 lowercase hex digits (what the reviewers file stores)."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Reviewer:
    """One reviewer: the id they decide as, their token's hash, and their signing key.

    Attributes:
        reviewer_id: The approver id the agents' verifier trusts ``key``'s public half as.
        token_sha256: SHA-256 of the login token, 64 lowercase hex digits.
        key_file: The key path as the reviewers file writes it.
        key_path: The key path resolved against the reviewers file's folder.
        key: The Ed25519 private key, read when the file was loaded.
    """

    reviewer_id: str
    token_sha256: str
    key_file: str
    key_path: Path
    key: Ed25519PrivateKey = field(repr=False, compare=False)

    def token_matches(self, token: str) -> bool:
        """Whether ``token`` is this reviewer's login token (a constant-time comparison)."""
        return hmac.compare_digest(hash_token(token), self.token_sha256)

    def authority(self, ttl: timedelta) -> ApprovalAuthority:
        """The authority that signs approvals as this reviewer, valid for ``ttl``."""
        return ApprovalAuthority(self.key, self.reviewer_id, ttl=ttl)


class Reviewers(Mapping[str, Reviewer]):
    """The reviewers of one server, by id; read from a reviewers file with :meth:`load`.

    Args:
        reviewers: The reviewers; at least one, each id once.
        source: Where they were read from, for messages.

    Raises:
        ConfigurationError: no reviewer, or an id twice.
    """

    def __init__(self, reviewers: list[Reviewer] | tuple[Reviewer, ...], source: str = "") -> None:
        self.source = source
        self.path: Path | None = None  # the file :meth:`load` read, to read again
        where = f" in {source}" if source else ""
        if not reviewers:
            raise ConfigurationError(f"no reviewer{where}: nobody could log in; {_ADD_HINT}")
        by_id: dict[str, Reviewer] = {}
        for reviewer in reviewers:
            if not isinstance(reviewer, Reviewer):
                raise ConfigurationError("Reviewers holds Reviewer entries only")
            if reviewer.reviewer_id in by_id:
                raise ConfigurationError(
                    f"reviewer {reviewer.reviewer_id!r} is listed twice{where}: keep one entry"
                )
            by_id[reviewer.reviewer_id] = reviewer
        self._by_id = by_id

    def __getitem__(self, reviewer_id: str) -> Reviewer:
        return self._by_id[reviewer_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_id)

    def __len__(self) -> int:
        return len(self._by_id)

    def __repr__(self) -> str:
        return f"Reviewers({sorted(self._by_id)!r})"

    def authenticate(self, reviewer_id: str, token: str) -> Reviewer | None:
        """The reviewer whose id and token these are, or None (the same for either mistake).

        The token is hashed and compared in constant time whether or not the id is known.
        """
        reviewer = self._by_id.get(reviewer_id) if isinstance(reviewer_id, str) else None
        presented = hash_token(token) if isinstance(token, str) else ""
        expected = reviewer.token_sha256 if reviewer is not None else _NOBODY
        matches = hmac.compare_digest(presented.encode(), expected.encode())
        return reviewer if matches and reviewer is not None else None

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Reviewers:
        """Read a reviewers file and every key it names.

        Raises:
            ConfigurationError: the file is missing, not TOML, or holds a wrong entry; or
                a key file is missing or not an Ed25519 private key. The message names the
                file and the entry and says what to fix.
        """
        file = Path(path)
        loaded = cls(
            [_entry(file, n, raw) for n, raw in enumerate(_tables(file), start=1)], str(file)
        )
        loaded.path = file
        return loaded

    def changed_since(self, before: Reviewers) -> list[str]:
        """The ids of ``before`` that are gone here, or whose token or key changed."""
        changed = []
        for reviewer_id, old in before.items():
            new = self._by_id.get(reviewer_id)
            if (
                new is None
                or new.token_sha256 != old.token_sha256
                or new.key_path != old.key_path
                or _public(new.key) != _public(old.key)
            ):
                changed.append(reviewer_id)
        return changed

    def to_toml(self) -> str:
        """The reviewers file that :meth:`load` reads back into these reviewers."""
        return render_reviewers_file(
            (r.reviewer_id, r.token_sha256, r.key_file) for r in self.values()
        )


def _public(key: Ed25519PrivateKey) -> bytes:
    return key.public_key().public_bytes_raw()


def _signature(path: Path) -> tuple[int, int, int, int] | None:
    try:
        facts = os.stat(path)
    except OSError:
        return None
    return facts.st_dev, facts.st_ino, facts.st_mtime_ns, facts.st_size


class ReviewersFile:
    """The reviewers of a running server, read again when their file changes.

    :meth:`current` looks at the file's identity, modification time and size at most once
    every ``interval`` seconds; when they changed it reads the file again and calls
    ``on_change`` with the ids of the reviewers who are gone or whose token or key changed
    (their sessions end). A file that no longer loads makes :meth:`current` raise until it
    is fixed: nobody logs in or decides meanwhile.

    Args:
        reviewers: The reviewers as loaded at start (:meth:`Reviewers.load`).
        on_change: Called with the ids whose sessions must end.
        interval: Seconds between two looks at the file.
        clock: Seconds that never go back.
    """

    def __init__(
        self,
        reviewers: Reviewers,
        on_change: Any = None,
        *,
        interval: float = 1.0,
        clock: Any = None,
    ) -> None:
        import logging
        import threading
        import time

        self._reviewers = reviewers
        self._on_change = on_change
        self._interval = interval
        self._clock = clock if clock is not None else time.monotonic
        self._lock = threading.Lock()
        self._log = logging.getLogger("jevqueue.serve")
        self._seen = _signature(reviewers.path) if reviewers.path is not None else None
        self._checked = self._clock()
        self._broken: ConfigurationError | None = None

    @property
    def path(self) -> Path | None:
        """The file, or None for reviewers given in code (never read again)."""
        return self._reviewers.path

    @property
    def last_loaded(self) -> Reviewers:
        """The reviewers as last read successfully (for what must never be shown)."""
        return self._reviewers

    def current(self) -> Reviewers:
        """The reviewers now.

        Raises:
            ConfigurationError: the file changed and no longer loads; the message says
                what is wrong with it and that logins and decisions wait for the fix.
        """
        path = self._reviewers.path
        if path is None:
            return self._reviewers
        with self._lock:
            now = self._clock()
            if now - self._checked >= self._interval or now < self._checked:
                self._checked = now
                seen = _signature(path)
                if seen != self._seen:
                    self._reload(path, seen)
            if self._broken is not None:
                raise self._broken
            return self._reviewers

    def _reload(self, path: Path, seen: tuple[int, int, int, int] | None) -> None:
        try:
            fresh = Reviewers.load(path)
        except ConfigurationError as error:
            if self._broken is None or str(self._broken) != str(error):
                self._log.error(
                    "the reviewers file changed and no longer loads; logins and decisions "
                    "are refused until it is fixed: %s",
                    error,
                )
            self._broken = ConfigurationError(
                f"{error}. Until the reviewers file is fixed nobody can log in or decide; "
                "fix it (`jevqueue reviewers list --file FILE` checks it) and reload the page"
            )
            self._seen = seen
            return
        ended = fresh.changed_since(self._reviewers)
        if self._broken is not None:
            self._log.warning("the reviewers file %s loads again", path)
        self._broken = None
        self._seen = seen
        self._reviewers = fresh
        self._log.info(
            "the reviewers file %s changed: %d reviewer(s); sessions ended for %s",
            path,
            len(fresh),
            ", ".join(ended) or "nobody",
        )
        if ended and self._on_change is not None:
            self._on_change(ended)


def entries_of_file(path: str | os.PathLike[str]) -> list[tuple[str, str, str]]:
    """The ``(id, token_sha256, key)`` entries of a reviewers file, without reading keys.

    For removing a reviewer whose key file is gone.

    Raises:
        ConfigurationError: the file is missing, not TOML, or an entry lacks a field.
    """
    file = Path(path)
    entries = []
    for number, raw in enumerate(_tables(file), start=1):
        fields = [raw.get(name) if isinstance(raw, dict) else None for name in _ORDER]
        if not all(isinstance(value, str) for value in fields):
            raise ConfigurationError(
                f"the reviewers file {str(file)!r}, reviewer #{number}: needs id, "
                "token_sha256 and key as strings; fix the entry by hand"
            )
        entries.append((str(fields[0]), str(fields[1]), str(fields[2])))
    return entries


def _tables(file: Path) -> list[Any]:
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigurationError(
            f"the reviewers file {str(file)!r} does not exist: {_ADD_HINT}, "
            "or pass --reviewers with the right path"
        ) from None
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigurationError(
            f"cannot read the reviewers file {str(file)!r} ({type(error).__name__}: {error}): "
            "check its path and permissions"
        ) from error
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigurationError(
            f"the reviewers file {str(file)!r} is not valid TOML ({error}): fix the syntax; "
            "each reviewer is a [[reviewer]] table with id, token_sha256 and key"
        ) from None
    unknown = sorted(key for key in data if key != "reviewer")
    if unknown:
        raise ConfigurationError(
            f"the reviewers file {str(file)!r} holds {unknown}, which it does not know: it "
            "holds only [[reviewer]] tables with id, token_sha256 and key"
        )
    tables = data.get("reviewer", [])
    if not isinstance(tables, list):
        raise ConfigurationError(
            f"the reviewers file {str(file)!r}: write each reviewer as a [[reviewer]] table "
            "(double brackets), not [reviewer]"
        )
    return tables


def _entry(file: Path, number: int, raw: Any) -> Reviewer:
    def wrong(what: str) -> ConfigurationError:
        return ConfigurationError(f"the reviewers file {str(file)!r}, reviewer #{number}: {what}")

    if not isinstance(raw, dict):
        raise wrong("is not a table; write [[reviewer]] with id, token_sha256 and key")
    unknown = sorted(set(raw) - _FIELDS)
    if unknown:
        raise wrong(f"has unknown fields {unknown}: keep id, token_sha256 and key")
    reviewer_id, token_sha256, key_file = raw.get("id"), raw.get("token_sha256"), raw.get("key")
    if not isinstance(reviewer_id, str) or not IDENTIFIER_PATTERN.fullmatch(reviewer_id):
        raise wrong(
            f"id {reviewer_id!r} is not an approver id: 1-128 letters, digits and '._:@+-', "
            "the name the agents' verifier trusts the reviewer's key as"
        )
    if not isinstance(token_sha256, str) or not _HASH.fullmatch(token_sha256):
        raise wrong(
            f"{reviewer_id}: token_sha256 must be the SHA-256 of the login token as 64 "
            "lowercase hex digits; make a new token with `jevqueue reviewers add --replace`"
        )
    if not isinstance(key_file, str) or not key_file.strip():
        raise wrong(f"{reviewer_id}: key must be the path of the reviewer's Ed25519 private key")
    key_path = Path(key_file).expanduser()
    if not key_path.is_absolute():
        key_path = file.parent / key_path
    try:
        key = load_private_key(key_path)
    except ConfigurationError as error:
        raise wrong(f"{reviewer_id}: {error}") from None
    return Reviewer(reviewer_id, token_sha256, key_file, key_path, key)


def _toml_string(text: str) -> str:
    # A JSON string with ASCII escapes is a valid TOML basic string.
    return json.dumps(text, ensure_ascii=True)


def render_reviewers_file(entries: Any) -> str:
    """The text of a reviewers file holding ``(id, token_sha256, key_file)`` entries."""
    lines = [
        "# Reviewers of `jevqueue serve`: who may log in and decide, and the key each signs",
        "# with. Only the SHA-256 of each login token is stored here; add a reviewer or give",
        "# one a new token with `jevqueue reviewers add NAME --key KEY [--replace]`.",
    ]
    for reviewer_id, token_sha256, key_file in entries:
        lines += [
            "",
            "[[reviewer]]",
            f"id = {_toml_string(reviewer_id)}",
            f"token_sha256 = {_toml_string(token_sha256)}",
            f"key = {_toml_string(key_file)}",
        ]
    return "\n".join(lines) + "\n"


def write_reviewers_file(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` in one step (a temp file renamed over it), mode 0600.

    Raises:
        ConfigurationError: the file cannot be written.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        descriptor, temporary = tempfile.mkstemp(prefix=".reviewers-", dir=path.parent)
        try:
            with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
                handle.write(text)
            os.chmod(temporary, 0o600)
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
    except OSError as error:
        raise ConfigurationError(
            f"cannot write the reviewers file {str(path)!r} ({type(error).__name__}: {error}): "
            "choose a writable path"
        ) from error
