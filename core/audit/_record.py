"""One audit record: a policy decision, in the shape of a decision log, chained by hash."""

from __future__ import annotations

import hashlib
import re
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from enum import Enum
from json.encoder import encode_basestring as _quote  # the C escaper, as json.dumps uses
from typing import TYPE_CHECKING, Any

from jevqueue.errors import AuditWriteError

if TYPE_CHECKING:  # pragma: no cover
    from jevqueue.policy._action import Action
    from jevqueue.policy._verdict import Verdict

__all__ = ["GENESIS_HASH", "AuditRecord", "canonical_record_bytes", "decision_event"]

GENESIS_HASH = "sha256:" + "0" * 64
"""The ``prev_hash`` of the first record of every chain."""

_TEXT_FIELDS = (
    "decision_id",
    "timestamp",
    "action_digest",
    "tool",
    "result",
    "policy_revision",
    "task_id",
    "actor_id",
    "environment",
    "workspace",
    "git_sha",
    "prev_hash",
)
_LIST_FIELDS = ("reasons", "obligations", "rule_ids")
HASHED_FIELDS = (*_TEXT_FIELDS, *_LIST_FIELDS, "allowed")
RECORD_FIELDS = (*HASHED_FIELDS, "record_hash")
_RECORD_FIELD_SET = frozenset(RECORD_FIELDS)
# Optional caller-supplied fields; everything else about a record is assigned by the chain.
_EVENT_TEXT_FIELDS = tuple(name for name in _TEXT_FIELDS if name != "prev_hash")


_SORTED_FIELDS = tuple((name, f'"{name}":') for name in sorted(HASHED_FIELDS))


def unexpected_fields(data: Mapping[str, Any]) -> list[str]:
    """Return the keys of ``data`` that are not record fields, sorted.

    Such keys are not covered by ``record_hash``: a reader that kept them would present
    unsigned content as part of the record.
    """
    return sorted(str(key) for key in data if key not in _RECORD_FIELD_SET)


_NAMES_SHOWN = 8
_NAME_CHARS = 40


def key_names(names: Iterable[str]) -> str:
    """Name JSON keys in a message: quoted, escaped, long names cut, at most a few shown.

    Keys come from the log being checked, so they are shown as ``repr`` (no raw control
    characters reach a terminal) and never together with their values.
    """
    unique = sorted(set(names))
    shown = [
        repr(name if len(name) <= _NAME_CHARS else name[:_NAME_CHARS] + "...")
        for name in unique[:_NAMES_SHOWN]
    ]
    if len(unique) > _NAMES_SHOWN:
        shown.append(f"and {len(unique) - _NAMES_SHOWN} more")
    return ", ".join(shown)


def json_string_list(values: Sequence[str]) -> str:
    """Return the canonical JSON array of ``values`` (strings only)."""
    return "[" + ",".join(map(_quote, values)) + "]"


def _is_unicode(text: str) -> bool:
    """Whether ``text`` encodes as UTF-8 (JSON can spell a lone surrogate; UTF-8 cannot)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def canonical_record_bytes(fields: Mapping[str, Any]) -> bytes:
    """Return the RFC 8785 canonical JSON of a record's hashed fields.

    Every hashed field is a string, a list of strings or a boolean under a fixed ASCII
    key. For exactly that shape, RFC 8785 is: keys in code-point order, no whitespace,
    and strings escaped exactly as ``json.dumps(..., ensure_ascii=False)`` escapes them
    (the C ``encode_basestring``: quote, backslash, the short escapes, a six-character
    escape for other control characters, everything else literal UTF-8). The test suite
    pins the equivalence against the ``rfc8785`` package; building the text directly is
    about ten times faster, which matters on the path of every decision.

    Raises:
        AuditWriteError: a field holds text that cannot be encoded (a lone surrogate).
    """
    parts = []
    for name, key in _SORTED_FIELDS:
        value = fields[name]
        if value is True:
            parts.append(key + "true")
        elif value is False:
            parts.append(key + "false")
        elif type(value) is str:
            parts.append(key + _quote(value))
        else:
            parts.append(key + json_string_list(value))
    try:
        return ("{" + ",".join(parts) + "}").encode("utf-8")
    except UnicodeEncodeError as error:
        raise AuditWriteError(
            "an audit field holds text that is not valid Unicode (a lone surrogate); "
            "the decision was not recorded and its call is denied"
        ) from error


def _hash(fields: Mapping[str, Any]) -> str:
    return "sha256:" + hashlib.sha256(canonical_record_bytes(fields)).hexdigest()


@dataclass(frozen=True)
class AuditRecord:
    """One policy decision, as written to the audit log.

    Shaped like a policy engine's decision log: a unique ``decision_id`` (two identical
    actions get two ids), the UTC ``timestamp``, the input's ``action_digest``, the
    ``tool``, the ``result`` (a verdict kind), whether the call was ``allowed`` to run
    (for ALLOW_WITH_OBLIGATIONS: whether every obligation was fulfilled), its
    ``reasons``, the ``obligations`` still unmet and the ``rule_ids``, the
    ``policy_revision``, the context (``task_id``, ``actor_id``, ``environment``,
    ``workspace``, ``git_sha``), and the hash chain:
    ``prev_hash`` (the previous record's ``record_hash``, or :data:`GENESIS_HASH`) and
    ``record_hash`` — ``sha256:`` + hex SHA-256 of the RFC 8785 canonical JSON of every
    other field.
    """

    decision_id: str
    timestamp: str
    action_digest: str
    tool: str
    result: str
    reasons: tuple[str, ...]
    obligations: tuple[str, ...]
    policy_revision: str
    task_id: str
    actor_id: str
    environment: str
    prev_hash: str
    record_hash: str
    rule_ids: tuple[str, ...] = ()
    workspace: str = ""
    git_sha: str = ""
    allowed: bool = False

    def to_dict(self) -> dict[str, Any]:
        """Return the record as a JSON-ready mapping (lists for the tuples)."""
        data: dict[str, Any] = {name: getattr(self, name) for name in _TEXT_FIELDS}
        for name in _LIST_FIELDS:
            data[name] = list(getattr(self, name))
        data["allowed"] = self.allowed
        data["record_hash"] = self.record_hash
        return data

    def computed_hash(self) -> str:
        """Recompute ``record_hash`` from the other fields (verification uses this)."""
        return _hash(self.to_dict())

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AuditRecord:
        """Read a record written by :meth:`to_dict`.

        Keys other than the record's fields are refused, not dropped: ``record_hash`` does
        not cover them, so a record carrying them is not the record that was written.

        Raises:
            ValueError: a field is missing or has the wrong type, or a key is not a field.
        """
        missing = [name for name in RECORD_FIELDS if name not in data]
        if missing:
            raise ValueError(f"missing fields {missing}")
        unexpected = unexpected_fields(data)
        if unexpected:
            raise ValueError(
                f"keys that are not record fields (not covered by record_hash): "
                f"{key_names(unexpected)}"
            )
        for name in (*_TEXT_FIELDS, "record_hash"):
            if not isinstance(data[name], str):
                raise ValueError(f"field {name!r} is not a string")
        values: dict[str, Any] = {name: data[name] for name in (*_TEXT_FIELDS, "record_hash")}
        for name in _LIST_FIELDS:
            value = data[name]
            if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
                raise ValueError(f"field {name!r} is not a list of strings")
            values[name] = tuple(value)
        if not isinstance(data["allowed"], bool):
            raise ValueError("field 'allowed' is not a boolean")
        for name in (*_TEXT_FIELDS, *_LIST_FIELDS):
            texts = values[name] if name in _LIST_FIELDS else (values[name],)
            if not all(_is_unicode(text) for text in texts):
                raise ValueError(
                    f"field {name!r} holds text that is not valid Unicode (a lone "
                    "surrogate), which no writer records"
                )
        values["allowed"] = data["allowed"]
        return cls(**values)

    @classmethod
    def chained(cls, event: Mapping[str, Any], prev_hash: str) -> AuditRecord:
        """Build the record for ``event`` that follows a record whose hash is ``prev_hash``.

        ``event`` holds the decision's fields (see :func:`decision_event`); a missing
        ``decision_id`` becomes a fresh UUID4, a missing ``timestamp`` the current UTC
        time. Hash fields in the event are ignored: the chain assigns them.

        Raises:
            AuditWriteError: the event is malformed; the decision is not recorded.
        """
        if type(event) is dict:
            record = _chained_plain(cls, event, prev_hash)
            if record is not None:
                return record
        if not isinstance(event, Mapping):
            raise AuditWriteError(
                f"an audit event must be a mapping, not {type(event).__name__}; "
                "the decision was not recorded and its call is denied"
            )
        fields: dict[str, Any] = {}
        get = event.get
        for name in _EVENT_TEXT_FIELDS:
            value = get(name)
            fields[name] = value if type(value) is str else _text(value, name)
        if not fields["decision_id"]:
            fields["decision_id"] = str(uuid.uuid4())
        fields["timestamp"] = _timestamp(get("timestamp"), fields["timestamp"])
        if not fields["result"]:
            raise AuditWriteError(
                "an audit event has no 'result' (the verdict kind); the decision was not "
                "recorded and its call is denied"
            )
        for name in _LIST_FIELDS:
            fields[name] = _texts(get(name), name)
        allowed = get("allowed")
        if allowed is None:
            allowed = fields["result"] == "ALLOW" or (
                fields["result"] == "ALLOW_WITH_OBLIGATIONS" and not fields["obligations"]
            )
        if not isinstance(allowed, bool):
            raise AuditWriteError(
                "audit event field 'allowed' must be a boolean; the decision was not "
                "recorded and its call is denied"
            )
        fields["allowed"] = allowed
        fields["prev_hash"] = prev_hash
        fields["record_hash"] = _hash(fields)
        # Every field was checked above; skip the dataclass __init__ on the hot path.
        record = object.__new__(cls)
        record.__dict__.update(fields)
        return record


_UTC_ISO = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6})(?:\+00:00|Z)")
_UTC_Z = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z")


def plain_list(value: Any) -> str | None:
    """The canonical JSON array of a list or tuple of exact strings, else ``None``."""
    kind = type(value)
    if kind is not tuple and kind is not list:
        return None
    if not value:
        return "[]"
    for item in value:
        if type(item) is not str:
            return None
    return "[" + ",".join(map(_quote, value)) + "]"


def plain_record_hash(
    decision_id: str,
    timestamp: str,
    action_digest: str,
    tool: str,
    result: str,
    allowed: bool,
    reasons_json: str,
    obligations_json: str,
    rule_ids_json: str,
    policy_revision: str,
    task_id: str,
    actor_id: str,
    environment: str,
    workspace: str,
    git_sha: str,
    prev_hash: str,
) -> str:
    """The ``record_hash`` of a record given as exact strings and canonical JSON arrays.

    Writes the canonical form directly, in the key order and with the escaping of
    :func:`canonical_record_bytes` (which a test pins against RFC 8785).

    Raises:
        AuditWriteError: a field holds text that cannot be encoded (a lone surrogate).
    """
    quote = _quote
    text = (
        f'{{"action_digest":{quote(action_digest)},"actor_id":{quote(actor_id)},'
        f'"allowed":{"true" if allowed else "false"},"decision_id":{quote(decision_id)},'
        f'"environment":{quote(environment)},"git_sha":{quote(git_sha)},'
        f'"obligations":{obligations_json},"policy_revision":{quote(policy_revision)},'
        f'"prev_hash":{quote(prev_hash)},"reasons":{reasons_json},"result":{quote(result)},'
        f'"rule_ids":{rule_ids_json},"task_id":{quote(task_id)},'
        f'"timestamp":{quote(timestamp)},"tool":{quote(tool)},'
        f'"workspace":{quote(workspace)}}}'
    )
    try:
        encoded = text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise AuditWriteError(
            "an audit field holds text that is not valid Unicode (a lone surrogate); "
            "the decision was not recorded and its call is denied"
        ) from error
    return "sha256:" + hashlib.sha256(encoded).hexdigest()


def _chained_plain(
    cls: type[AuditRecord], event: dict[str, Any], prev_hash: str
) -> AuditRecord | None:
    """:meth:`AuditRecord.chained` for the common event, or ``None`` to take the full route.

    The common event is a plain dict whose text fields are all present as non-empty exact
    strings where required, whose timestamp is already in the record's form, whose lists
    hold exact strings and whose ``allowed`` is a bool. For it the general route's checks
    change nothing, and the canonical form is written directly, in the key order and with
    the escaping of :func:`canonical_record_bytes` (which a test pins against RFC 8785).
    """
    get = event.get
    decision_id = get("decision_id")
    timestamp = get("timestamp")
    action_digest = get("action_digest")
    tool = get("tool")
    result = get("result")
    policy_revision = get("policy_revision")
    task_id = get("task_id")
    actor_id = get("actor_id")
    environment = get("environment")
    workspace = get("workspace")
    git_sha = get("git_sha")
    allowed = get("allowed")
    if (
        type(decision_id) is not str
        or not decision_id
        or type(timestamp) is not str
        or type(action_digest) is not str
        or type(tool) is not str
        or type(result) is not str
        or not result
        or type(policy_revision) is not str
        or type(task_id) is not str
        or type(actor_id) is not str
        or type(environment) is not str
        or type(workspace) is not str
        or type(git_sha) is not str
        or type(prev_hash) is not str
        or (allowed is not True and allowed is not False)
        or _UTC_Z.fullmatch(timestamp) is None
    ):
        return None
    reasons = get("reasons", ())
    obligations = get("obligations", ())
    rule_ids = get("rule_ids", ())
    reasons_json = plain_list(reasons)
    obligations_json = plain_list(obligations)
    rule_ids_json = plain_list(rule_ids)
    if reasons_json is None or obligations_json is None or rule_ids_json is None:
        return None
    record_hash = plain_record_hash(
        decision_id,
        timestamp,
        action_digest,
        tool,
        result,
        allowed,
        reasons_json,
        obligations_json,
        rule_ids_json,
        policy_revision,
        task_id,
        actor_id,
        environment,
        workspace,
        git_sha,
        prev_hash,
    )
    record = object.__new__(cls)
    record.__dict__.update(
        decision_id=decision_id,
        timestamp=timestamp,
        action_digest=action_digest,
        tool=tool,
        result=result,
        reasons=reasons if type(reasons) is tuple else tuple(reasons),
        obligations=obligations if type(obligations) is tuple else tuple(obligations),
        policy_revision=policy_revision,
        task_id=task_id,
        actor_id=actor_id,
        environment=environment,
        prev_hash=prev_hash,
        record_hash=record_hash,
        rule_ids=rule_ids if type(rule_ids) is tuple else tuple(rule_ids),
        workspace=workspace,
        git_sha=git_sha,
        allowed=allowed,
    )
    return record


def _timestamp(raw: Any, text: str) -> str:
    if isinstance(raw, datetime):
        return _utc(raw)
    if not text:
        return _utc(datetime.now(timezone.utc))
    # The common shapes, datetime.now(timezone.utc).isoformat() and our own, need no parse.
    match = _UTC_ISO.fullmatch(text)
    if match is not None:
        return match.group(1) + "Z"
    return _utc(_parse(text))


def _parse(text: str) -> datetime:
    try:
        return datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith("Z") else text)
    except ValueError:
        raise AuditWriteError(
            "audit event field 'timestamp' is not an ISO 8601 time; the decision was not "
            "recorded and its call is denied"
        ) from None


def _utc(moment: datetime) -> str:
    if moment.tzinfo is None:
        raise AuditWriteError("an audit event timestamp must be timezone-aware")
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _text(value: Any, name: str) -> str:
    if value is None:
        return ""
    if isinstance(value, Enum):
        value = value.value
    if isinstance(value, str):
        return value
    if isinstance(value, datetime):
        return _utc(value)
    raise AuditWriteError(
        f"audit event field {name!r} must be a string, not {type(value).__name__}; "
        "the decision was not recorded and its call is denied"
    )


def _texts(value: Any, name: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if type(value) in (list, tuple) and all(type(item) is str for item in value):
        return tuple(value)
    if isinstance(value, str) or not isinstance(value, Sequence | frozenset | set):
        raise AuditWriteError(
            f"audit event field {name!r} must be a sequence of strings; "
            "the decision was not recorded and its call is denied"
        )
    items = sorted(value) if isinstance(value, frozenset | set) else list(value)
    return tuple(_text(item, name) for item in items)


def decision_event(
    verdict: Verdict, action: Action | None = None, *, decision_id: str | None = None
) -> dict[str, Any]:
    """Return the audit event for ``verdict`` about ``action`` (the PEP's input).

    Works with any object shaped like :class:`~jevqueue.policy.Verdict` and
    :class:`~jevqueue.policy.Action`; ``action`` may be ``None`` when no action could be
    built, and then only the verdict's fields are recorded.
    """
    context = getattr(action, "context", None)
    kind = getattr(verdict, "kind", "")
    allowed = getattr(verdict, "allowed", None)
    return {
        "decision_id": decision_id,
        "action_digest": getattr(verdict, "action_digest", "") or getattr(action, "digest", ""),
        "tool": getattr(action, "tool", ""),
        "result": getattr(kind, "value", kind),
        "reasons": tuple(getattr(verdict, "reasons", ())),
        "obligations": tuple(getattr(verdict, "obligations", ())),
        "rule_ids": tuple(getattr(verdict, "rule_ids", ())),
        "policy_revision": getattr(verdict, "policy_revision", ""),
        "task_id": getattr(context, "task_id", ""),
        "actor_id": getattr(context, "actor_id", ""),
        "environment": getattr(context, "environment", ""),
        "workspace": getattr(context, "workspace", ""),
        "git_sha": getattr(context, "git_sha", ""),
        "allowed": allowed if isinstance(allowed, bool) else None,
    }
