"""What the tool node shows a human through ``interrupt()``, and how it reads the answer.

The interrupt payload (``kind == "jevqueue.approval_request"``) lists every call that
needs an explicit approval, each built from the core
:class:`~jevqueue.policy.ApprovalRequest` the guard made for it
(:meth:`~jevqueue.policy.ApprovalRequest.to_dict`: tool, arguments as judged,
``action_digest``, reasons, context, ``call_id``, and ``provenance``: where each value came
from, each with the sentence a reviewer reads in ``says``) plus the call's ``tool_call_id``
and its canonical action (``canonical_action``: the RFC 8785 text whose SHA-256 is
``action_digest``), so the approver sees exactly what an approval will authorise. The
payload's ``message`` repeats, per call, each value that did not come from the user's
request and the output it came from ("to came from the 'body' field of item 1 of
read_inbox's output (call c1), not from your request").

The graph resumes with ``Command(resume=answer)``, where ``answer`` is one of:

* an :class:`~jevqueue.approvals.ApprovalRecord`, or the dict ``jevqueue approve`` prints
  (its ``to_dict()`` form);
* a list of those (each fulfils only the action whose digest it carries);
* a mapping ``{tool_call_id: record | [records] | False}`` — ``False`` declines that call;
* ``False``: decline every call in the request (LangGraph cannot resume with ``None``);
* an :class:`~jevqueue.errors.ApprovalDeclinedError`: decline every call, with its reason
  (an :class:`~jevqueue.errors.ApprovalExpiredError` declines it as expired);
* what ``InboxApprover.answer(action_digest)`` returns — records, or one of those errors —
  for a request the guard filed in the approval inbox (``InboxApprover(pause=True)``).

The guard checks each record (bound to the digest, fresh, signed, never used before) and
reports an answer it cannot read. An approval never authorises anything but the action
whose digest it carries: there is no "edit" answer. To run a different call, the model
proposes it and it is judged anew.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from jevqueue.approvals import ApprovalRecord
from jevqueue.errors import ApprovalDeclinedError, ApprovalRequiredError
from jevqueue.policy import ApprovalRequest, canonical_json

__all__ = ["APPROVAL_REQUEST_KIND", "approval_request", "read_approval_answer"]

APPROVAL_REQUEST_KIND = "jevqueue.approval_request"


def approval_request(requests: Sequence[ApprovalRequest]) -> dict[str, Any]:
    """The ``interrupt()`` payload for the core ``requests``: JSON-ready, checkpoint-safe."""
    actions = []
    origins = []
    for request in requests:
        provenance = request.provenance
        said = provenance.describe() if provenance is not None else ""
        if said:
            origins.append(f"{request.tool} ({request.call_id}): " + "; ".join(said.splitlines()))
        action, verdict = request.action, request.verdict
        actions.append(
            {
                **request.to_dict(),
                "tool_call_id": request.call_id,
                "canonical_action": canonical_json(action.digest_document()).decode("utf-8"),
                "targets": list(action.targets),
                "side_effects": sorted(action.side_effects),
                "obligations": list(verdict.obligations) if verdict is not None else [],
                "policy_revision": verdict.policy_revision if verdict is not None else None,
            }
        )
    count = len(actions)
    return {
        "kind": APPROVAL_REQUEST_KIND,
        "message": (
            f"{count} tool call{'s' if count != 1 else ''} need{'s' if count == 1 else ''} an "
            "explicit approval. Approve one by issuing an ApprovalRecord for its "
            "action_digest; resume with Command(resume=record), a list of records, "
            "{tool_call_id: record}, or False to decline."
            + "".join(f"\nWhere the values came from: {line}" for line in origins)
        ),
        "actions": actions,
    }


def _looks_like_record(value: Any) -> bool:
    return isinstance(value, ApprovalRecord) or (
        isinstance(value, Mapping) and "action_digest" in value
    )


def read_approval_answer(answer: Any, call_ids: Sequence[str | None]) -> dict[str | None, Any]:
    """Split the resume ``answer`` into each paused call's answer, for ``Guard.resume``.

    Returns:
        For each id of ``call_ids``: the records offered to it (the guard reads and checks
        them, and reports an answer that is not records), or an
        :class:`~jevqueue.errors.ApprovalDeclinedError` saying why it will not run.
    """
    if answer is None or answer is False:
        return dict.fromkeys(call_ids, ApprovalDeclinedError("the approver declined it"))
    if isinstance(answer, ApprovalRequiredError):
        return dict.fromkeys(call_ids, answer)
    if isinstance(answer, Mapping) and not _looks_like_record(answer):
        unknown = sorted(str(key) for key in answer if key not in call_ids)
        if unknown:
            return dict.fromkeys(
                call_ids,
                ApprovalDeclinedError(
                    f"the resume answer names {unknown}, which are not tool calls awaiting "
                    f"approval (awaiting: {sorted(map(str, call_ids))}); an approval cannot "
                    "be edited into another call — approve the action as shown, or decline it"
                ),
            )
        out: dict[str | None, Any] = {}
        for call_id in call_ids:
            if call_id not in answer:
                out[call_id] = ApprovalDeclinedError("the answer did not approve it")
            elif answer[call_id] is None or answer[call_id] is False:
                out[call_id] = ApprovalDeclinedError("the approver declined it")
            else:
                out[call_id] = answer[call_id]
        return out
    # Every offered record goes to the PEP, which accepts only one bound to each action's
    # digest: a record for another action authorises nothing there.
    return dict.fromkeys(call_ids, answer)
