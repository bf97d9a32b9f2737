"""The execution context: who runs which task, where, at which revision.

Every tool call is judged in a context. The context is validated when it is built, so a
missing, empty or *ambient* value (one that merely reflects whatever the process happened
to inherit: ``/`` as the workspace, ``unknown`` as an identity, ``HEAD`` as a revision) is
refused before any policy runs, with an :class:`~jevqueue.errors.InvalidContextError` that
names the field.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from jevqueue.errors import InvalidContextError
from jevqueue.policy._canonical import encode_prevalidated

__all__ = ["ExecutionContext"]

_FIELDS = ("task_id", "actor_id", "workspace", "git_sha", "environment")
_REQUIRED = ("task_id", "actor_id", "workspace", "git_sha")
_MAX_LENGTH = 256
_MAX_WORKSPACE_LENGTH = 4096
_GIT_SHA = re.compile(r"[0-9a-fA-F]{7,64}")
# Identity values that name nobody in particular. Compared case-insensitively.
_AMBIENT_IDENTITIES = frozenset(
    {"unknown", "none", "null", "nil", "undefined", "n/a", "-", "?", "anonymous"}
)
_MUTABLE_REVISIONS = frozenset({"head", "fetch_head", "orig_head", "main", "master", "latest"})
# C0/C1 controls, the Unicode line/paragraph separators, and lone UTF-16 surrogates.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")
_CACHE_LIMIT = 1024


def _text(field: str, value: object, limit: int = _MAX_LENGTH) -> str:
    if type(value) is not str:
        raise InvalidContextError(
            field, f"must be a str, not {type(value).__name__}: pass the concrete value"
        )
    if not value:
        raise InvalidContextError(field, "is empty: pass the concrete value")
    if value != value.strip():
        raise InvalidContextError(field, "has leading or trailing whitespace: remove it")
    if len(value) > limit:
        raise InvalidContextError(field, f"is longer than {limit} characters")
    if _CONTROL.search(value):
        raise InvalidContextError(field, "contains a control character: remove it")
    return value


def _identity(field: str, value: object) -> str:
    text = _text(field, value)
    if text.casefold() in _AMBIENT_IDENTITIES:
        raise InvalidContextError(
            field, "is a placeholder, not a concrete identity: pass the real identifier"
        )
    return text


def _workspace(value: object) -> str:
    text = _text("workspace", value, _MAX_WORKSPACE_LENGTH)
    if not text.startswith("/"):
        raise InvalidContextError(
            "workspace",
            "must be an absolute path (starting with '/'); relative paths and '~' depend on "
            "the process's current directory or home and are refused",
        )
    normal = posixpath.normpath(text)
    if normal.strip("/") == "":
        raise InvalidContextError(
            "workspace", "is the filesystem root: pass the project directory the agent works in"
        )
    return "/" + normal.lstrip("/")


def _git_sha(value: object) -> str:
    text = _text("git_sha", value)
    if text.casefold() in _MUTABLE_REVISIONS:
        raise InvalidContextError(
            "git_sha",
            "is a movable reference, not an immutable revision: pass the commit hash "
            "(e.g. the output of `git rev-parse HEAD`)",
        )
    if not _GIT_SHA.fullmatch(text):
        raise InvalidContextError(
            "git_sha", "must be 7 to 64 hexadecimal characters (a commit hash)"
        )
    return text.lower()


_VALIDATED: dict[tuple[str, str, str, str, str], ExecutionContext] = {}


@dataclass(frozen=True)
class ExecutionContext:
    """Identity, scope and lineage of one tool call.

    The context is part of every action digest, so an approval given for one task,
    actor, workspace or revision never fits another.

    Attributes:
        task_id: the concrete task the call belongs to.
        actor_id: the concrete agent (or person) making the call.
        workspace: the absolute project directory; every target must stay inside it.
            Stored normalised (``/a/./b/`` becomes ``/a/b``). It need not exist on disk.
        git_sha: the immutable revision the workspace is at, 7 to 64 hex characters,
            stored in lower case.
        environment: a label such as ``local``, ``ci`` or ``prod``.

    Raises:
        InvalidContextError: a field is missing, empty, not a string, padded with
            whitespace, contains control characters, or is an ambient value (``/``,
            ``unknown``, ``HEAD``, a relative workspace, a non-hex revision). ``.field``
            names it.
    """

    task_id: str
    actor_id: str
    workspace: str
    git_sha: str
    environment: str = "local"

    def __post_init__(self) -> None:
        object.__setattr__(self, "task_id", _identity("task_id", self.task_id))
        object.__setattr__(self, "actor_id", _identity("actor_id", self.actor_id))
        object.__setattr__(self, "workspace", _workspace(self.workspace))
        object.__setattr__(self, "git_sha", _git_sha(self.git_sha))
        object.__setattr__(self, "environment", _identity("environment", self.environment))

    @classmethod
    def coerce(cls, value: ExecutionContext | Mapping[str, Any]) -> ExecutionContext:
        """Return ``value`` as a validated context.

        Args:
            value: a context, or a mapping with the keys ``task_id``, ``actor_id``,
                ``workspace``, ``git_sha`` and optionally ``environment``.

        Raises:
            InvalidContextError: a key is missing or unknown, or a value is invalid.
        """
        if type(value) is dict:
            # Fast path: the same plain strings as a context validated before. A hit proves
            # every required key is present, so with this length no key is unknown. Exact
            # str only: a str subclass could lie about equality and hit another entry.
            environment = value.get("environment", "local")
            cached_key = (
                value.get("task_id"),
                value.get("actor_id"),
                value.get("workspace"),
                value.get("git_sha"),
                environment,
            )
            if (
                len(value) == (5 if "environment" in value else 4)
                and type(cached_key[0]) is str
                and type(cached_key[1]) is str
                and type(cached_key[2]) is str
                and type(cached_key[3]) is str
                and type(environment) is str
            ):
                hit = _VALIDATED.get(cached_key)  # type: ignore[arg-type]
                if hit is not None:
                    return hit
        elif isinstance(value, ExecutionContext):
            return value
        if not isinstance(value, Mapping):
            raise InvalidContextError(
                "context",
                f"must be an ExecutionContext or a mapping, not {type(value).__name__}",
            )
        for key in value:
            if key not in _FIELDS:
                name = key if isinstance(key, str) else repr(key)
                raise InvalidContextError(
                    name[:64],
                    f"is not a context field: use only {', '.join(_FIELDS)}",
                )
        for key in _REQUIRED:
            if key not in value:
                raise InvalidContextError(key, "is missing: pass the concrete value")
        fields = (
            value["task_id"],
            value["actor_id"],
            value["workspace"],
            value["git_sha"],
            value.get("environment", "local"),
        )
        # Validation is a pure function of the five values, so a validated context can be
        # reused for the same values (agents send the same context on every call).
        # Exact str only: a str subclass could lie about equality and hit another entry.
        task_id, actor_id, workspace, git_sha, environment = fields
        if (
            type(task_id) is not str
            or type(actor_id) is not str
            or type(workspace) is not str
            or type(git_sha) is not str
            or type(environment) is not str
        ):
            return cls(*fields)
        cached = _VALIDATED.get(fields)
        if cached is not None:
            return cached
        context = cls(*fields)
        if len(_VALIDATED) >= _CACHE_LIMIT:
            _VALIDATED.clear()
        _VALIDATED[fields] = context
        return context

    @cached_property
    def canonical_bytes(self) -> bytes:
        """The RFC 8785 form of :meth:`as_dict`, computed once per context."""
        return encode_prevalidated(self.as_dict())

    @cached_property
    def digest_context_bytes(self) -> bytes:
        """``,"context":`` and :attr:`canonical_bytes`: the context's part of a digest."""
        return b',"context":' + self.canonical_bytes

    def as_dict(self) -> dict[str, str]:
        """Return the five fields as a plain dict (the form hashed into action digests)."""
        return {
            "task_id": self.task_id,
            "actor_id": self.actor_id,
            "workspace": self.workspace,
            "git_sha": self.git_sha,
            "environment": self.environment,
        }
