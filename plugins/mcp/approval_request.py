"""The question the proxy puts to the client's user: the core ``ApprovalRequest``, as a form.

The proxy never builds a request of its own: the guard hands it the core
:class:`~jevqueue.policy.ApprovalRequest` (re-exported here), and both MCP majors show it
the same way — a form elicitation whose message is :meth:`ApprovalRequest.describe` (the
tool, the policy's reasons, the action digest and the canonical action the digest hashes),
with one boolean field. On protocol 2026-07-28 the ``InputRequiredResult`` that carries
the question also carries :meth:`ApprovalRequest.to_dict` in its ``_meta`` under
:data:`REQUEST_META_KEY`. Only
``accept`` with ``approve: true`` approves; decline, cancel, a missing or non-boolean
field, or anything else is a refusal.

An approval is bound to the digest: on a "yes" the proxy's own approval authority signs a
record for exactly that digest, and the PEP checks it (signature, binding, freshness,
single use) like any other record. On protocol 2026-07-28, where the question travels in
an ``InputRequiredResult`` and the client answers on a retry, the only state the client
echoes is a random token the proxy keeps server-side (:class:`PendingApprovals`), single
use, expiring, and tied to the call the question showed: a retry with other arguments is
refused, and an approved retry runs exactly the action the question showed (its digest,
and the provenance labels the person read, even when the agent read more meanwhile).
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Mapping
from typing import Any

from jevqueue.policy import ApprovalRequest

__all__ = [
    "APPROVAL_FIELD",
    "REQUEST_META_KEY",
    "ApprovalRequest",
    "PendingApprovals",
    "answer_approves",
    "approval_message",
    "approval_schema",
]

APPROVAL_FIELD = "approve"
"""The boolean field of the approval form."""

REQUEST_META_KEY = "jevqueue/approval_request"
"""The ``_meta`` key of an ``InputRequiredResult`` holding ``ApprovalRequest.to_dict()``."""


def approval_message(request: ApprovalRequest) -> str:
    """The text shown to the person asked: the core request, as a person should read it."""
    return (
        f"jevqueue: {request.describe()}\n"
        f"Approving authorises exactly this action, once ({request.action_digest})."
    )


def approval_schema(request: ApprovalRequest) -> dict[str, Any]:
    """The form: one required boolean, described with the tool and the digest."""
    return {
        "type": "object",
        "properties": {
            APPROVAL_FIELD: {
                "type": "boolean",
                "title": f"Approve {request.tool}",
                "description": f"Run {request.tool} once, exactly as shown "
                f"({request.action_digest})",
            }
        },
        "required": [APPROVAL_FIELD],
    }


def answer_approves(action: str | None, content: Mapping[str, Any] | None) -> bool:
    """Whether an elicitation answer approves: ``accept`` with ``approve`` exactly ``True``."""
    return (
        action == "accept" and isinstance(content, Mapping) and content.get(APPROVAL_FIELD) is True
    )


class PendingApprovals:
    """Approval questions awaiting the client's retry, kept server-side (protocol 2026-07-28).

    Args:
        ttl_seconds: how long a question stays answerable.
        limit: at most this many open questions; the oldest is dropped beyond it.
    """

    def __init__(self, *, ttl_seconds: float = 600.0, limit: int = 1024) -> None:
        self._ttl = ttl_seconds
        self._limit = limit
        self._open: dict[str, tuple[str, float, Any]] = {}
        self._lock = threading.Lock()

    def open(self, digest: str, *, held: Any = None) -> str:
        """Remember a question about ``digest``; return the opaque state the client echoes.

        ``held`` is kept with it (the paused judgement), for :meth:`claim`.
        """
        token = secrets.token_urlsafe(32)
        with self._lock:
            while len(self._open) >= self._limit:
                self._open.pop(next(iter(self._open)))
            self._open[token] = (digest, time.monotonic() + self._ttl, held)
        return token

    def close(self, token: object, digest: str) -> str | None:
        """Consume ``token``; return why it does not answer a question about ``digest``.

        Returns ``None`` when it does. The token is gone afterwards either way: one
        question, one answer.
        """
        return self.claim(token, digest)[1]

    def claim(self, token: object, digest: str) -> tuple[Any, str | None]:
        """Like :meth:`close`, and also return what was held with the question."""
        if type(token) is not str:
            return None, "the retry carries no approval state from this proxy"
        with self._lock:
            entry = self._open.pop(token, None)
        if entry is None:
            return None, (
                "the approval state is unknown, already used or expired: call the tool again"
            )
        expected, deadline, held = entry
        if time.monotonic() > deadline:
            return None, "the approval question expired: call the tool again"
        if expected != digest:
            return None, (
                "the retry's arguments are not the ones the approval question showed "
                f"({digest} is not {expected}): call the tool again"
            )
        return held, None
