"""The policy enforcement point: decide, check approvals, audit — then let the call run.

For every action, :meth:`PolicyEnforcementPoint.evaluate`:

1. asks the PDP for a verdict; a PDP that raises or returns something that is not a
   :class:`~jevqueue.policy.Verdict` yields DENY (fail closed);
2. for ALLOW_WITH_OBLIGATIONS, tries to fulfil ``explicit_approval`` with the supplied
   approval records through :func:`jevqueue.approvals.check_approvals` (bound to the
   digest, fresh, accepted by the ``approval_verifier``, never used before). Without an
   ``approval_verifier`` no approval can ever be fulfilled, and a raw string such as
   ``"explicit_approval"`` never counts;
3. writes one audit record of the final verdict (to the ``audit_logger``, or to the
   embedded default log in the state directory when none is given);
4. returns the verdict.

Audit failure is a denial, everywhere: when the record cannot be written,
:meth:`~PolicyEnforcementPoint.evaluate` returns a DENY verdict (rule
``jevqueue.pep.audit``) and :meth:`~PolicyEnforcementPoint.enforce` raises
:class:`~jevqueue.errors.PolicyDeniedError` whose ``__cause__`` is the
:class:`~jevqueue.errors.AuditWriteError`. No call runs without its record.
"""

from __future__ import annotations

import inspect
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from jevqueue.errors import (
    AuditWriteError,
    ConfigurationError,
    JevError,
    PolicyDeniedError,
    UnfulfilledObligationError,
)
from jevqueue.policy._approval_quorum import no_record_reason
from jevqueue.policy._provenance import provenance_line
from jevqueue.policy._verdict import Verdict, VerdictKind

if TYPE_CHECKING:  # pragma: no cover
    from jevqueue.policy._action import Action
    from jevqueue.policy._pdp import PolicyDecisionPoint

__all__ = ["PolicyEnforcementPoint", "new_decision_id"]

_logger = logging.getLogger("jevqueue.pep")

PDP_FAILED = "jevqueue.pep.fail_closed"
AUDIT_FAILED = "jevqueue.pep.audit"
APPROVAL_CHECK_FAILED = "jevqueue.pep.approvals"
APPROVAL_EXPIRED = "jevqueue.approval.expired"
DIGEST_MISMATCH = "jevqueue.policy._pep.digest"
_EXPLICIT_APPROVAL = "explicit_approval"


def new_decision_id() -> str:
    """Return a fresh UUIDv7 string: unique per decision and ordered by time."""
    # 48 bits of Unix milliseconds, then 80 random bits of which the version nibble
    # (hex digit 12) becomes 7 and the top two bits of hex digit 16 the RFC 9562 variant.
    stamp = ((time.time_ns() // 1_000_000) & _MS_MASK).to_bytes(6, "big").hex()
    noise = _noise()
    tail = noise.hex()
    return (
        f"{stamp[:8]}-{stamp[8:]}-7{tail[1:4]}-{_VARIANT_DIGITS[noise[2] >> 4]}"
        f"{tail[5:8]}-{tail[8:]}"
    )


_MS_MASK = (1 << 48) - 1
_VARIANT_DIGITS = "89ab" * 4  # indexed by a nibble: its low two bits under the variant


# Random bytes for decision ids, drawn from os.urandom 640 at a time: one system call per
# 64 decisions. A forked child drops what it inherited, so no two processes share any.
_POOL_SIZE = 640
_pool = b""
_pool_lock = threading.Lock()


def _noise() -> bytes:
    """Ten fresh random bytes."""
    global _pool
    with _pool_lock:
        if len(_pool) < 10:
            _pool = os.urandom(_POOL_SIZE)
        noise, _pool = _pool[:10], _pool[10:]
    return noise


def _drop_pool() -> None:
    global _pool, _pool_lock
    _pool = b""
    _pool_lock = threading.Lock()  # a lock held by another thread at the fork stays held


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_drop_pool)


def utc_timestamp() -> str:
    """Return the current UTC time as ``YYYY-MM-DDTHH:MM:SS.ffffffZ``.

    The form audit records store; the part up to the seconds is formatted once per second.
    """
    global _SECOND
    now = time.time_ns()
    second = now // 1_000_000_000
    cached = _SECOND
    if cached[0] != second:
        cached = _SECOND = (second, time.strftime("%Y-%m-%dT%H:%M:%S.", time.gmtime(second)))
    return f"{cached[1]}{now // 1000 % 1_000_000:06d}Z"


_SECOND: tuple[int, str] = (-1, "")


_ACTION_TYPE: list[type] = []


def _action_type() -> type:
    """:class:`jevqueue.policy.Action`, imported once (pep is imported by action users)."""
    if not _ACTION_TYPE:
        from jevqueue.policy._action import Action

        _ACTION_TYPE.append(Action)
    return _ACTION_TYPE[0]


_CHECK_APPROVALS: list[Callable[..., Verdict]] = []


def _check_approvals() -> Callable[..., Verdict]:
    """:func:`jevqueue.approvals.check_approvals`, imported once, on first need."""
    if not _CHECK_APPROVALS:
        from jevqueue.approvals import check_approvals

        _CHECK_APPROVALS.append(check_approvals)
    return _CHECK_APPROVALS[0]


def _as_record(record: Any) -> Any:
    if not isinstance(record, Mapping):
        return record
    from jevqueue.approvals import ApprovalRecord
    from jevqueue.errors import InvalidApprovalError

    try:
        return ApprovalRecord.from_dict(record)
    except InvalidApprovalError:
        return record


def _clip(value: object) -> str:
    if not isinstance(value, str):
        return ""
    return value if len(value) <= 256 else value[:253] + "..."


def _sink_writer(audit_logger: Any) -> Callable[[dict[str, Any]], None]:
    """Return the function that writes one event, hash-chained when possible."""
    try:
        from jevqueue.audit import AuditChain
    except ImportError:
        chain: Any = None
    else:
        chain = AuditChain
    if chain is not None:
        wrapped = audit_logger if isinstance(audit_logger, chain) else chain(audit_logger)
        append: Callable[[dict[str, Any]], None] = wrapped.append
        return append
    for name in ("append", "log"):
        method = getattr(audit_logger, name, None)
        if callable(method):
            return method  # type: ignore[no-any-return]
    raise ConfigurationError(
        f"audit_logger {type(audit_logger).__name__} has neither append(event) nor "
        "log(event): pass an audit sink such as jevqueue.audit.SQLiteAuditLog"
    )


_DEFAULT_CHAINS: dict[int, Any] = {}


def _chain_for_default(log: Any) -> Any:
    """One chain per default log: its lock serialises every PEP of the process."""
    from jevqueue.audit import AuditChain

    chain = _DEFAULT_CHAINS.get(id(log))
    if chain is None or chain.sink is not log:
        chain = _DEFAULT_CHAINS[id(log)] = AuditChain(log)
    return chain


def _decision_appender(write: Any) -> Callable[..., None] | None:
    """The audit chain's field-by-field route, when ``write`` is an exact chain's append."""
    chain = getattr(write, "__self__", None)
    if chain is None or getattr(write, "__func__", None) is not type(chain).append:
        return None
    try:
        from jevqueue.audit import AuditChain
    except ImportError:  # pragma: no cover - the audit package is part of jevqueue
        return None
    if type(chain) is not AuditChain:
        return None
    appender: Callable[..., None] | None = chain._decision_appender()
    return appender


def _freshness(value: timedelta | float | None) -> timedelta:
    """The approval freshness window: a timedelta, or seconds; default 300 s."""
    if value is None:
        from jevqueue.approvals import DEFAULT_FRESHNESS

        return DEFAULT_FRESHNESS
    if isinstance(value, timedelta):
        window = value
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        window = timedelta(seconds=value)
    else:
        raise ConfigurationError(
            f"approval_freshness must be a timedelta or a number of seconds, not "
            f"{type(value).__name__}"
        )
    if window <= timedelta(0):
        raise ConfigurationError("approval_freshness must be positive, e.g. 300 (seconds)")
    return window


def _check_verifier(verifier: Any) -> None:
    """Refuse, at construction, a verifier that cannot be called as ``verifier(record, action)``.

    Otherwise every approval would later be refused with an opaque TypeError.
    """
    if not callable(verifier):
        raise ConfigurationError(
            f"approval_verifier {type(verifier).__name__} is not callable: pass a callable "
            "verifier(record, action) -> bool such as jevqueue.approvals.SignedApprovalVerifier"
        )
    try:
        signature = inspect.signature(verifier)
    except (TypeError, ValueError):
        return  # a builtin without a readable signature: nothing to check
    try:
        signature.bind(object(), object())
    except TypeError as error:
        raise ConfigurationError(
            f"approval_verifier {getattr(verifier, '__qualname__', type(verifier).__name__)}"
            f"{signature} cannot be called as verifier(record, action) ({error}): give it "
            "exactly two positional parameters, the ApprovalRecord and the Action"
        ) from None


def _audited_reasons(action: Action, verdict: Verdict) -> tuple[str, ...]:
    """The verdict's reasons, and, for an action with provenance, one line of its labels:
    where each value came from (never the value, never the output's text)."""
    provenance = getattr(action, "provenance", None)
    if provenance is None:
        return verdict.reasons
    return (*verdict.reasons, provenance_line(provenance))


def _unfulfilled(verdict: Verdict) -> Verdict:
    """``verdict`` when no approval record was supplied for its ``explicit_approval``.

    The first attempt of every approval flow: nothing to check, nothing to burn.
    """
    return Verdict._trusted(
        verdict.kind,
        (*verdict.reasons, no_record_reason(verdict.quorums, verdict.action_digest)),
        verdict.obligations,
        None,
        verdict.action_digest,
        verdict.policy_revision,
        verdict.rule_ids,
        verdict.quorums,
    )


def _signal(action: Action, verdict: Verdict) -> JevError | None:
    """The error :meth:`PolicyEnforcementPoint.enforce` raises for ``verdict``, if any."""
    kind = verdict.kind
    if kind is VerdictKind.DENY:
        return PolicyDeniedError(
            f"the policy denied {action.tool}: " + "; ".join(verdict.reasons), verdict
        )
    if kind is VerdictKind.ALLOW_WITH_OBLIGATIONS and verdict.obligations:
        # The records offered and refused say why first ("already used", "approves another
        # action"), before what to do.
        refused = "".join(
            f"{reason}; "
            for reason in verdict.reasons
            if reason.startswith(("approval record #", "explicit approval unmet: "))
        )
        if verdict.quorums:
            from jevqueue.policy._approval_quorum import describe_quorums

            wanted = (
                f"obtain {describe_quorums(verdict.quorums)} for exactly "
                f"{verdict.action_digest} and retry with every ApprovalRecord"
            )
        else:
            wanted = (
                f"obtain an approval for exactly {verdict.action_digest} from a trusted "
                "authority and retry with the ApprovalRecord"
            )
        return UnfulfilledObligationError(
            f"{action.tool} needs {', '.join(verdict.obligations)} before it may run: "
            f"{refused}{wanted}",
            verdict,
        )
    return None


class PolicyEnforcementPoint:
    """Judges each action, fulfils approvals, audits, and says whether it may run.

    Args:
        pdp: the policy decision point (``create_default_policy_decision_point()``).
        audit_logger: where decisions are recorded: anything with ``append(event)`` or
            ``log(event)``. Wrapped in :class:`jevqueue.audit.AuditChain` (hash chaining)
            when that is available. ``None`` means the embedded default, an SQLite log at
            :func:`jevqueue.audit.default_audit_log_path` opened on the first decision: no
            decision goes unaudited (one that cannot be recorded is denied).
        approval_verifier: decides whether an approval record is genuine
            (:class:`jevqueue.approvals.SignedApprovalVerifier`). Without one, no
            ``explicit_approval`` can be fulfilled.
        approval_freshness: how long after it was issued an approval may be used: a
            ``timedelta`` or seconds; default 300 s (``jevqueue.approvals.DEFAULT_FRESHNESS``).
        consumed_approvals: remembers used approvals. Defaults, once a verifier is set, to
            the durable SQLite store at
            :func:`jevqueue.approvals.default_consumed_approvals_path`, so a used approval
            stays used across restarts.

    Raises:
        ConfigurationError: ``pdp`` lacks ``evaluate``/``revision``, or ``audit_logger``
            has no ``append``/``log`` method.
    """

    def __init__(
        self,
        pdp: PolicyDecisionPoint,
        *,
        audit_logger: Any = None,
        approval_verifier: Any = None,
        consumed_approvals: Any = None,
        approval_freshness: timedelta | float | None = None,
    ) -> None:
        if not callable(getattr(pdp, "evaluate", None)):
            raise ConfigurationError(
                f"pdp {type(pdp).__name__} has no evaluate(action) method: pass "
                "create_default_policy_decision_point() or another PolicyDecisionPoint"
            )
        if approval_verifier is not None:
            _check_verifier(approval_verifier)
        if consumed_approvals is not None and not callable(
            getattr(consumed_approvals, "consume", None)
        ):
            raise ConfigurationError(
                "consumed_approvals must have consume(approval_id, action_digest) -> bool"
            )
        self.approval_freshness = _freshness(approval_freshness)
        self.pdp = pdp
        self.audit_logger = audit_logger
        self.approval_verifier = approval_verifier
        self._consumed = consumed_approvals
        self._write: Callable[[dict[str, Any]], None] | None
        self._append_decision: Callable[..., None] | None
        if audit_logger is None:
            # Every evaluation is audited: without a logger, the embedded default log in
            # the state directory, opened on the first decision (not at import time).
            self._write = self._write_to_default_log
            self._append_decision = None
        else:
            self._write = _sink_writer(audit_logger)
            # The same record, written field by field (no event dict) into an SQLite log.
            self._append_decision = _decision_appender(self._write)

    def _write_to_default_log(self, event: dict[str, Any]) -> None:
        from jevqueue.audit._default_log import default_audit_log

        chain = _chain_for_default(default_audit_log())
        self.audit_logger = chain.sink
        self._write = chain.append
        self._append_decision = _decision_appender(self._write)
        self._write(event)

    @property
    def revision(self) -> str:
        """The PDP's policy revision ("" when it has none)."""
        revision = getattr(self.pdp, "revision", "")
        return revision if type(revision) is str else ""

    @property
    def consumed_approvals(self) -> Any:
        """The consumed-approval store (created on first use when defaulted)."""
        if self._consumed is None and self.approval_verifier is not None:
            from jevqueue.approvals import (
                SQLiteConsumedApprovals,
                default_consumed_approvals_path,
            )

            self._consumed = SQLiteConsumedApprovals(default_consumed_approvals_path())
        return self._consumed

    # --- deciding -----------------------------------------------------------------

    def evaluate(self, action: Action, approval_records: Sequence[Any] = ()) -> Verdict:
        """Return the final, audited verdict for ``action``. Never raises for policy.

        Args:
            action: the action, from :meth:`jevqueue.policy.Action.build`.
            approval_records: :class:`~jevqueue.approvals.ApprovalRecord`\\ s offered to
                fulfil an ``explicit_approval`` obligation.

        Returns:
            DENY, REPAIR, ALLOW, or ALLOW_WITH_OBLIGATIONS (``.allowed`` tells whether every
            obligation was fulfilled).
        """
        return self._decide(action, approval_records)[0]

    def enforce(self, action: Action, approval_records: Sequence[Any] = ()) -> Verdict:
        """Like :meth:`evaluate`, but raise unless the call may run or must be repaired.

        Returns:
            The verdict, for ALLOW, fulfilled ALLOW_WITH_OBLIGATIONS and REPAIR (a REPAIR
            does not allow the call: resubmit ``verdict.repaired``).

        Raises:
            PolicyDeniedError: DENY (including an unwritable audit record).
            UnfulfilledObligationError: an obligation is unmet; read
                ``.verdict.action_digest``, obtain an approval for exactly it, and retry.
        """
        verdict, audit_error = self._decide(action, approval_records)
        signal = _signal(action, verdict)
        if signal is not None:
            raise signal from audit_error
        return verdict

    def _decide(
        self, action: Action, approval_records: Sequence[Any]
    ) -> tuple[Verdict, AuditWriteError | None]:
        revision = getattr(self.pdp, "revision", "")
        if type(revision) is not str:
            revision = ""
        stored = action.digest
        # Action.build never runs __init__; an Action built by hand or copied with
        # dataclasses.replace did, and carries what Action.build made of its contents.
        # Judge that, and refuse a stored digest that does not match it (an approval of
        # one action must never fulfil a copy whose arguments were replaced).
        rebuilt = action.__dict__.get("_rebuilt") if type(action) is _action_type() else None
        if rebuilt is not None:
            action = rebuilt
        digest = action.digest
        try:
            if rebuilt is not None and stored != digest:
                verdict = Verdict.deny(
                    f"the action's stored digest {stored} is not the digest of its contents "
                    f"({digest}): it was changed after it was built; build every action with "
                    "Action.build",
                    rule_ids=(DIGEST_MISMATCH,),
                )
            else:
                verdict = self.pdp.evaluate(action)
            if type(verdict) is not Verdict:
                raise TypeError(f"the PDP returned a {type(verdict).__name__}, not a Verdict")
        except Exception as error:  # fail closed; the message may quote arguments
            verdict = Verdict.deny(
                f"the policy decision point failed ({type(error).__name__}): denied to fail closed",
                rule_ids=(PDP_FAILED,),
            )
        if verdict.action_digest != digest or verdict.policy_revision != revision:
            verdict = verdict.bound(digest, revision)
        if verdict.kind is VerdictKind.ALLOW_WITH_OBLIGATIONS and verdict.obligations:
            if (
                type(approval_records) is tuple
                and not approval_records
                and _EXPLICIT_APPROVAL in verdict.obligations
            ):
                verdict = _unfulfilled(verdict)  # what _fulfil answers, without the checks
            else:
                verdict = self._fulfil(verdict, action, approval_records)
        if self._write is None:
            return verdict, None
        try:
            append_decision = self._append_decision
            if append_decision is None:
                self._write(self._event(action, verdict))
            else:
                context = action.context
                append_decision(
                    new_decision_id(),
                    utc_timestamp(),
                    verdict.action_digest,
                    action.tool,
                    verdict.kind.value,
                    verdict.allowed,
                    _audited_reasons(action, verdict),
                    verdict.obligations,
                    verdict.rule_ids,
                    verdict.policy_revision,
                    context.task_id,
                    context.actor_id,
                    context.environment,
                    context.workspace,
                    context.git_sha,
                )
        except Exception as error:
            audit_error = AuditWriteError(
                f"the audit record for {digest} could not be written ({type(error).__name__}); "
                "the call is denied: fix the audit sink"
            )
            audit_error.__cause__ = error
            _logger.error(
                "audit write failed; denying the %s call %s: %s: %s",
                getattr(action, "tool", "unnamed"),
                digest,
                type(error).__name__,
                error,
            )
            _logger.debug("why the audit write for %s failed", digest, exc_info=error)
            denial = Verdict(
                VerdictKind.DENY,
                (
                    f"the audit record could not be written ({type(error).__name__}): denied, "
                    "because no call runs unaudited",
                ),
                action_digest=digest,
                policy_revision=revision,
                rule_ids=(AUDIT_FAILED,),
            )
            return denial, audit_error
        return verdict, None

    def _fulfil(self, verdict: Verdict, action: Action, approval_records: Any) -> Verdict:
        if _EXPLICIT_APPROVAL not in verdict.obligations:
            return verdict
        records: Sequence[Any]
        if type(approval_records) is tuple or type(approval_records) is list:
            records = tuple(approval_records)
        elif approval_records is None:
            records = ()
        elif isinstance(approval_records, (str, bytes, Mapping)):
            # A bare string is a sequence of characters, not of records: judge it whole.
            records = (approval_records,)
        else:
            records = tuple(approval_records)
        if not records:
            return _unfulfilled(verdict)
        # The dict `jevqueue approve` prints is read as the record it is (its signature,
        # binding and freshness are checked below like any record's); a dict that is not
        # a valid record stays a dict, which check_approvals refuses with its reason.
        records = tuple(_as_record(record) for record in records)
        try:
            check_approvals = _check_approvals()
            consumed = self.consumed_approvals if self.approval_verifier is not None else None
            checked = check_approvals(
                verdict,
                action,
                records,
                verifier=self.approval_verifier,
                consumed=consumed,
                freshness=self.approval_freshness,
            )
            if type(checked) is not Verdict:
                raise TypeError("check_approvals returned something that is not a Verdict")
        except Exception as error:  # fail closed: the obligation stays unmet
            return Verdict(
                verdict.kind,
                (
                    *verdict.reasons,
                    f"the approvals could not be checked ({type(error).__name__}): the "
                    "obligation stays unmet",
                ),
                obligations=verdict.obligations,
                action_digest=verdict.action_digest,
                policy_revision=verdict.policy_revision,
                rule_ids=(*verdict.rule_ids, APPROVAL_CHECK_FAILED),
                quorums=verdict.quorums,
            )
        if checked.kind is VerdictKind.DENY:
            return checked.bound(verdict.action_digest, verdict.policy_revision)
        remaining = checked.obligations
        if checked.kind is not VerdictKind.ALLOW_WITH_OBLIGATIONS or not set(remaining) <= set(
            verdict.obligations
        ):
            # An approval check may only remove obligations (or deny): anything else is
            # a fault, and the obligation stays unmet.
            return Verdict._trusted(
                verdict.kind,
                (*verdict.reasons, "the approval check answered inconsistently: unmet"),
                verdict.obligations,
                None,
                verdict.action_digest,
                verdict.policy_revision,
                (*verdict.rule_ids, APPROVAL_CHECK_FAILED),
                verdict.quorums,
            )
        return Verdict._trusted(
            VerdictKind.ALLOW_WITH_OBLIGATIONS,
            checked.reasons,
            remaining,
            None,
            verdict.action_digest,
            verdict.policy_revision,
            checked.rule_ids,
            verdict.quorums,
        )

    # --- auditing -----------------------------------------------------------------

    def _event(self, action: Action, verdict: Verdict) -> dict[str, Any]:
        context = action.context
        return {
            "decision_id": new_decision_id(),
            "timestamp": utc_timestamp(),
            "action_digest": verdict.action_digest,
            "tool": action.tool,
            "result": verdict.kind.value,
            "allowed": verdict.allowed,
            "reasons": _audited_reasons(action, verdict),
            "obligations": verdict.obligations,
            "rule_ids": verdict.rule_ids,
            "policy_revision": verdict.policy_revision,
            "task_id": context.task_id,
            "actor_id": context.actor_id,
            "environment": context.environment,
            "workspace": context.workspace,
            "git_sha": context.git_sha,
        }

    def audit_expired(self, action: Action, verdict: Verdict, why: str) -> None:
        """Record that a call's approval request expired: nobody decided in time.

        The record repeats the pending verdict (its obligation still unmet, not allowed)
        with ``why`` among its reasons and the rule id ``jevqueue.approval.expired``: the
        pending record written before the approver was asked cannot say how the wait
        ended. A failure to write it is logged, not raised: the call is refused anyway.
        """
        if self._write is None:
            return
        ended = Verdict._trusted(
            verdict.kind,
            (
                *(
                    reason
                    for reason in verdict.reasons
                    if not reason.startswith("explicit approval required: no approval record")
                ),
                why,
            ),
            verdict.obligations,
            None,
            verdict.action_digest,
            verdict.policy_revision,
            (*verdict.rule_ids, APPROVAL_EXPIRED),
            verdict.quorums,
        )
        try:
            self._write(self._event(action, ended))
        except Exception as failure:
            _logger.error(
                "audit write failed; the %s call whose approval expired stays refused: %s: %s",
                getattr(action, "tool", "unnamed"),
                type(failure).__name__,
                failure,
            )

    def audit_rejection(self, tool_name: object, context: object, error: BaseException) -> None:
        """Record a call refused before evaluation (bad context, tool or arguments).

        The record is a DENY without an action digest; identities are copied from the raw
        context only when they are strings. A failure to write it is logged, not raised:
        the caller is already refusing the call.
        """
        if self._write is None:
            return
        raw: Mapping[str, Any] = (
            context.as_dict()
            if hasattr(context, "as_dict")
            else (context if isinstance(context, Mapping) else {})
        )
        event = {
            "decision_id": new_decision_id(),
            "timestamp": utc_timestamp(),
            "action_digest": "",
            "tool": _clip(tool_name),
            "result": VerdictKind.DENY.value,
            "allowed": False,
            "reasons": [f"refused before evaluation: {type(error).__name__}"],
            "obligations": [],
            "rule_ids": ["jevqueue.pep.input"],
            "policy_revision": self.revision,
            "task_id": _clip(raw.get("task_id")),
            "actor_id": _clip(raw.get("actor_id")),
            "environment": _clip(raw.get("environment", "local")),
            "workspace": _clip(raw.get("workspace")),
            "git_sha": _clip(raw.get("git_sha")),
        }
        try:
            self._write(event)
        except Exception as failure:
            _logger.error(
                "audit write failed; the %s call refused before evaluation stays refused: %s: %s",
                event["tool"] or "unnamed",
                type(failure).__name__,
                failure,
            )
            _logger.debug("why the audit write for a refused call failed", exc_info=failure)
