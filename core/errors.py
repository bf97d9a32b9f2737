r"""Every error jevqueue raises, under one root.

::

    JevError
    ├── UsageError                     misuse: bad configuration or bad input, fix the caller
    │   ├── ConfigurationError         a Governor, PEP, sink or plugin given impossible settings
    │   ├── InvalidToolSchemaError     a tool schema in neither accepted shape
    │   ├── InvalidContextError        an ExecutionContext field missing, empty or ambient (.field)
    │   ├── NonCanonicalArgumentsError tool arguments that are not canonical JSON (.path)
    │   │   ├── UnsupportedTypeError   bytes, sets, tuples, custom objects
    │   │   ├── NonFiniteNumberError   NaN, +Infinity, -Infinity
    │   │   ├── IntegerOutOfRangeError an integer beyond ±(2**53 - 1): not exact as a JSON number
    │   │   ├── NonStringKeyError      a mapping key that is not a str
    │   │   ├── CyclicArgumentsError   a container that contains itself
    │   │   ├── ArgumentsTooDeepError  nesting beyond the documented depth
    │   │   └── ArgumentsTooLargeError a payload beyond the documented size
    │   ├── UnregisteredToolError      a tool name the registry does not hold (lookalikes included)
    │   ├── InvalidToolArgumentsError  a registered tool's arguments break its path fields or schema
    │   ├── PolicyFileError            a policy file that cannot be read or is wrong (.file, .line)
    │   ├── ToolsFileError             a tools file that cannot be read or is wrong (.file, .line)
    │   ├── InvalidApprovalError       an approval record that is malformed
    │   ├── UnknownRequestError        no request in the approval inbox has that id (or prefix)
    │   ├── ApprovalPendingError       a paused run resumed before its request was decided
    │   ├── DecisionRefusedError       the approval inbox refuses a decision (.request_id)
    │   │   ├── SelfApprovalError      the requester tried to approve its own request
    │   │   ├── DuplicateDecisionError a reviewer who already decided tried again
    │   │   ├── RequestClosedError     the request expired or was already decided (.state)
    │   │   ├── DigestMismatchError    the approval names another action than the request's
    │   │   └── NotAnApproverError     the reviewer is in no approver group the policy names
    │   └── NetworkAccessError         a test reached for the network while the guard forbids it
    ├── JevRuntimeError                something failed while running
    │   ├── ProviderDisobeyedError     the provider ignored the selected tool; nothing executed
    │   ├── ProviderHTTPError          the provider's endpoint failed or answered nonsense (.status)
    │   ├── DecisionError              the governor's decision itself failed (on_error="raise")
    │   ├── AuditWriteError            the audit record could not be written; the call is denied
    │   ├── AuditIntegrityError        a verified audit log was edited, reordered or truncated
    │   ├── AuditReadError             an audit log is missing, unreadable, or not an audit log
    │   ├── InboxError                 the approval inbox could not be read or written
    │   │   └── InboxCorruptionError   a stored request is damaged (.request_id)
    │   └── WebhookDeliveryError       a notification was not delivered (.request_id, .status)
    └── ControlSignal                  not a bug: the flow stops here on purpose
        ├── PolicyDeniedError          the policy denied the call (.verdict)
        ├── UnfulfilledObligationError an obligation such as explicit approval is unmet (.verdict)
        ├── ApprovalRequiredError      an interactive approval is pending (.verdict)
        │   └── ApprovalDeclinedError  an approver said no; the model reads its message
        │       └── ApprovalExpiredError nobody decided before the request expired
        ├── ToolInterruptedError       a call's first run was interrupted; it is not run again
        └── TurnInterruptedError       the host was interrupted before any effect

Every message says what was wrong and what to do about it.

For code migrating from archmage-ai: every ``UsageError`` is also a :class:`ValueError`
(``UnsupportedTypeError`` and ``NonStringKeyError`` also a :class:`TypeError`), and the
refusals ``PolicyDeniedError``, ``UnfulfilledObligationError`` and
``ApprovalRequiredError`` are also :class:`PermissionError`\ s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from jevqueue.policy._verdict import Verdict

__all__ = [
    "ApprovalDeclinedError",
    "ApprovalExpiredError",
    "ApprovalPendingError",
    "ApprovalRequiredError",
    "ArgumentsTooDeepError",
    "ArgumentsTooLargeError",
    "AuditIntegrityError",
    "AuditReadError",
    "AuditWriteError",
    "ConfigurationError",
    "ControlSignal",
    "CyclicArgumentsError",
    "DecisionError",
    "DecisionRefusedError",
    "DigestMismatchError",
    "DuplicateDecisionError",
    "InboxCorruptionError",
    "InboxError",
    "IntegerOutOfRangeError",
    "InvalidApprovalError",
    "InvalidContextError",
    "InvalidToolArgumentsError",
    "InvalidToolSchemaError",
    "JevError",
    "JevRuntimeError",
    "NetworkAccessError",
    "NonCanonicalArgumentsError",
    "NonFiniteNumberError",
    "NonStringKeyError",
    "NotAnApproverError",
    "PolicyDeniedError",
    "PolicyFileError",
    "ProviderDisobeyedError",
    "ProviderHTTPError",
    "RequestClosedError",
    "SelfApprovalError",
    "ToolInterruptedError",
    "ToolsFileError",
    "TurnInterruptedError",
    "UnfulfilledObligationError",
    "UnknownRequestError",
    "UnregisteredToolError",
    "UnsupportedTypeError",
    "UsageError",
    "WebhookDeliveryError",
]


class JevError(Exception):
    """The root of every error jevqueue raises."""


# --- misuse -----------------------------------------------------------------


class UsageError(JevError, ValueError):
    """Bad configuration or bad input: the caller must change something.

    Also a :class:`ValueError` (and, for values of the wrong type, a :class:`TypeError`),
    so code written for archmage-ai's errors keeps catching it.
    """


class ConfigurationError(UsageError):
    """A component was built with settings it cannot work with."""


class InvalidToolSchemaError(UsageError):
    """A tool schema is in neither of the two accepted OpenAI shapes."""


class InvalidContextError(UsageError):
    """An execution context field is missing, empty or an ambient default."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"execution context field {field!r}: {message}")
        self.field = field


class NonCanonicalArgumentsError(UsageError):
    """Tool arguments contain something that is not a canonical JSON value.

    ``path`` is a JSON-pointer-like location of the offending value, e.g. ``/edits/0/text``.
    """

    def __init__(self, path: str, message: str) -> None:
        where = path or "/"
        super().__init__(f"tool arguments at {where}: {message}")
        self.path = path


class UnsupportedTypeError(NonCanonicalArgumentsError, TypeError):
    """Bytes, sets, tuples or custom objects where only JSON values may stand."""


class NonFiniteNumberError(NonCanonicalArgumentsError):
    """NaN or an infinity: JSON has no spelling for it."""


class IntegerOutOfRangeError(NonCanonicalArgumentsError):
    """An integer outside ±(2**53 - 1): RFC 8785 numbers are IEEE-754 doubles."""


class NonStringKeyError(NonCanonicalArgumentsError, TypeError):
    """A mapping key that is not a string."""


class CyclicArgumentsError(NonCanonicalArgumentsError):
    """A list or mapping that contains itself."""


class ArgumentsTooDeepError(NonCanonicalArgumentsError):
    """Nesting deeper than the documented limit."""


class ArgumentsTooLargeError(NonCanonicalArgumentsError):
    """A canonical payload larger than the documented limit."""


class UnregisteredToolError(UsageError):
    """The registry holds no tool of that exact name; nothing was evaluated."""

    def __init__(self, tool_name: str, message: str | None = None) -> None:
        super().__init__(
            message
            or f"tool {tool_name!r} is not registered: register it with its side effects and "
            "path fields before an agent may call it"
        )
        self.tool_name = tool_name


class InvalidToolArgumentsError(UsageError):
    """A registered tool's arguments miss a path field, mistype it, or break its schema."""

    def __init__(self, tool_name: str, message: str) -> None:
        super().__init__(f"tool {tool_name!r}: {message}")
        self.tool_name = tool_name


class PolicyFileError(UsageError):
    """A policy file cannot be read, or says something impossible.

    ``file`` and ``line`` point at the mistake (``line`` is ``None`` when unknown).
    """

    def __init__(self, file: str, line: int | None, message: str) -> None:
        where = f"{file}:{line}" if line is not None else file
        super().__init__(f"{where}: {message}")
        self.file = file
        self.line = line
        self.detail = message


class ToolsFileError(PolicyFileError):
    """A tools file cannot be read, or declares a tool impossibly.

    A tools file is read like a policy file (same TOML, same ``file:line`` messages), so it
    shares its error's shape: ``file`` and ``line`` point at the mistake.
    """


class InvalidApprovalError(UsageError):
    """An approval record is malformed (missing fields, bad timestamps, bad signature encoding)."""


class UnknownRequestError(UsageError):
    """No request in the approval inbox has that id, or a prefix matches several."""


class ApprovalPendingError(UsageError):
    """A paused run was resumed from an approval request nobody has decided yet.

    ``request_id`` names the request; resume once reviewers decided it.
    """

    def __init__(self, message: str, *, request_id: str = "") -> None:
        super().__init__(message)
        self.request_id = request_id


class DecisionRefusedError(UsageError):
    """The approval inbox refuses a decision; nothing was recorded.

    ``request_id`` names the request. The subclasses say which rule refused it.
    """

    def __init__(self, message: str, *, request_id: str = "") -> None:
        super().__init__(message)
        self.request_id = request_id


class SelfApprovalError(DecisionRefusedError):
    """The reviewer is the actor that filed the request: nobody approves their own call."""


class DuplicateDecisionError(DecisionRefusedError):
    """The reviewer already decided this request; each reviewer decides once."""


class RequestClosedError(DecisionRefusedError):
    """The request is no longer pending: it expired, or was approved, denied or cancelled.

    ``state`` is what it is now (``"expired"``, ``"approved"``, ...).
    """

    def __init__(self, message: str, *, request_id: str = "", state: str = "") -> None:
        super().__init__(message, request_id=request_id)
        self.state = state


class DigestMismatchError(DecisionRefusedError):
    """The approval record names another action digest than the request's."""


class NotAnApproverError(DecisionRefusedError):
    """The reviewer is in no approver group the request's policy names for its approval."""


class NetworkAccessError(UsageError):
    """Code under test connected to, or looked up, a host the network guard forbids.

    Raised by :mod:`jevqueue.testing.network`; ``address`` is what was reached for.
    """

    def __init__(self, message: str, *, address: str = "") -> None:
        super().__init__(message)
        self.address = address


# --- runtime failures ---------------------------------------------------------


class JevRuntimeError(JevError):
    """Something failed while running."""


class ProviderDisobeyedError(JevRuntimeError):
    """The provider did not make exactly the call it was constrained to; nothing executed."""

    def __init__(
        self,
        message: str = "The provider ignored the selected tool; execution blocked",
        *,
        expected: list[str] | None = None,
        called: list[str] | None = None,
    ) -> None:
        super().__init__(message)
        self.expected = expected if expected is not None else []
        self.called = called if called is not None else []


class ProviderHTTPError(JevRuntimeError):
    """The provider's endpoint failed, or answered with something that is not a chat completion.

    ``status`` is the HTTP status code (``None`` when no response arrived: refused
    connection, timeout, DNS failure); ``body_excerpt`` is the start of the response body
    with any credential removed. Nothing was executed.
    """

    def __init__(self, message: str, *, status: int | None = None, body_excerpt: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.body_excerpt = body_excerpt


class DecisionError(JevRuntimeError):
    """The governor could not decide (a ballot or rule raised) and ``on_error="raise"``."""


class AuditWriteError(JevRuntimeError):
    """An audit record could not be written; the call it describes is denied."""


class AuditIntegrityError(JevRuntimeError):
    """An audit log failed verification: a record was edited, removed, reordered or cut off."""

    def __init__(self, message: str, *, index: int | None = None) -> None:
        super().__init__(message)
        self.index = index


class AuditReadError(JevRuntimeError):
    """An audit log cannot be verified at all: it is missing, unreadable, or not an audit log."""


class InboxError(JevRuntimeError):
    """The approval inbox could not be read or written; no decision can be relied on."""


class InboxCorruptionError(InboxError):
    """A request stored in the approval inbox is damaged: it is never read as a decision.

    ``request_id`` names it (``""`` when even the id is unreadable).
    """

    def __init__(self, message: str, *, request_id: str = "") -> None:
        super().__init__(message)
        self.request_id = request_id


class WebhookDeliveryError(JevRuntimeError):
    """A webhook notification could not be delivered.

    Attributes:
        request_id: The approval request the notification was about.
        status: The last HTTP status answered, or ``None`` when no answer came.
        attempts: How many attempts were made.
    """

    def __init__(
        self, message: str, *, request_id: str = "", status: int | None = None, attempts: int = 0
    ) -> None:
        super().__init__(message)
        self.request_id = request_id
        self.status = status
        self.attempts = attempts


# --- control-flow signals -----------------------------------------------------


class ControlSignal(JevError):
    """The flow stops here on purpose; catching it is normal."""


class _VerdictSignal(ControlSignal, PermissionError):
    """A refusal: also a :class:`PermissionError`, as archmage-ai's denials are."""

    def __init__(self, message: str, verdict: Verdict | Any = None) -> None:
        super().__init__(message)
        self.verdict = verdict

    def __str__(self) -> str:
        # OSError's own __str__ would format errno and filename; ours have neither.
        return str(self.args[0]) if self.args else ""

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (str(self), self.verdict))


class PolicyDeniedError(_VerdictSignal):
    """The policy denied the call. ``.verdict`` holds the reasons and the action digest."""


class UnfulfilledObligationError(_VerdictSignal):
    """The call needs an obligation (such as explicit approval) that was not fulfilled.

    Read ``.verdict.action_digest``, obtain a fresh approval for exactly that digest from a
    trusted authority, and retry with the resulting ``ApprovalRecord``.
    """


class ApprovalRequiredError(_VerdictSignal):
    """An interactive approval is pending for ``.verdict.action_digest``."""


class ApprovalDeclinedError(ApprovalRequiredError):
    """An approver declined the call; the message is the reason the model reads.

    The one way an approver says no with a reason, in every plugin::

        def approver(request):
            if request.tool == "send_email":
                raise ApprovalDeclinedError("no e-mail leaves before the release")
            return authority.issue(request.action_digest)

    ``.verdict`` is optional (the guard knows which call was declined).
    """


class ApprovalExpiredError(ApprovalDeclinedError):
    """Nobody decided before the approval request expired; the call does not run.

    A :class:`ApprovalDeclinedError`, so every plugin refuses the call as it refuses a
    declined one; the guard reports it as expired, not declined, in the message the model
    reads and in the audit record.
    """


class ToolInterruptedError(ControlSignal):
    """A call's first run was interrupted midway (cancelled, a KeyboardInterrupt).

    It may have had its effect, so the guard does not run it again under the same call id:
    a replay raises this instead. The message is the refusal the model reads.
    """


class TurnInterruptedError(ControlSignal):
    """The host reported an interruption after the decision and before any effect."""
