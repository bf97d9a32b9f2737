"""What the tool node shows a human through ``interrupt()``, and how it reads the answer.

The interrupt payload (``kind == "jevqueue.approval_request"``) lists every call that
needs an explicit approval, each with its canonical action (``canonical_action``: the
RFC 8785 text whose SHA-256 is ``action_digest``), so the approver sees exactly what an
approval will authorise and nothing else.

The graph resumes with ``Command(resume=answer)``, where ``answer`` is one of:

* an :class:`~jevqueue.approvals.ApprovalRecord`, or its ``to_dict()`` form;
* a list of those (each fulfils only the action whose digest it carries);
* a mapping ``{tool_call_id: record | [records] | False}`` — ``False`` declines that call;
* ``False``: decline every call in the request (LangGraph cannot resume with ``None``).

An approval never authorises anything but the action whose digest it carries: there is
no "edit" answer. To run a different call, the model proposes it and it is judged anew.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jevqueue.approvals import ApprovalRecord
from jevqueue.errors import InvalidApprovalError
from jevqueue.policy import Action, Verdict, canonical_json

__all__ = ["APPROVAL_REQUEST_KIND", "PendingApproval", "approval_request", "read_approval_answer"]

APPROVAL_REQUEST_KIND = "jevqueue.approval_request"


@dataclass
class PendingApproval:
    """One call waiting for a human: its action, its verdict, and the answer once read.

    Attributes:
        tool_call_id: The LangChain tool call id.
        action: The canonical action.
        verdict: The verdict that asks for the approval.
        records: The approval records the answer offered for this call.
        declined: Why the call will not run (declined, or an unreadable answer), if so.
    """

    tool_call_id: str
    action: Action
    verdict: Verdict
    records: tuple[Any, ...] = ()
    declined: str | None = None


def approval_request(pending: Sequence[PendingApproval]) -> dict[str, Any]:
    """The ``interrupt()`` payload for ``pending``: JSON-ready, checkpoint-safe."""
    actions = []
    for item in pending:
        action = item.action
        document = action.digest_document()
        actions.append(
            {
                "tool_call_id": item.tool_call_id,
                "tool": action.tool,
                "arguments": document["arguments"],
                "action_digest": action.digest,
                "canonical_action": canonical_json(document).decode("utf-8"),
                "targets": list(action.targets),
                "side_effects": sorted(action.side_effects),
                "context": action.context.as_dict(),
                "obligations": list(item.verdict.obligations),
                "reasons": list(item.verdict.reasons),
                "policy_revision": item.verdict.policy_revision,
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
        ),
        "actions": actions,
    }


def _record(value: Any) -> ApprovalRecord:
    if isinstance(value, ApprovalRecord):
        return value
    if isinstance(value, Mapping):
        return ApprovalRecord.from_dict(value)
    raise InvalidApprovalError(
        f"a {type(value).__name__} is not an approval record: resume with an ApprovalRecord "
        "or its to_dict() form"
    )


def _records(value: Any) -> tuple[ApprovalRecord, ...]:
    if isinstance(value, (list, tuple)):
        return tuple(_record(item) for item in value)
    return (_record(value),)


def _looks_like_record(value: Any) -> bool:
    return isinstance(value, ApprovalRecord) or (
        isinstance(value, Mapping) and "action_digest" in value
    )


def read_approval_answer(answer: Any, pending: Sequence[PendingApproval]) -> None:
    """Attach the resume ``answer`` to the ``pending`` calls it concerns (fail closed).

    A call the answer does not approve gets ``declined`` set, with the reason; an answer
    that cannot be read declines every call and says why.
    """
    by_id = {item.tool_call_id: item for item in pending}
    try:
        if answer is None or answer is False:
            for item in pending:
                item.declined = "the approver declined it"
            return
        if isinstance(answer, Mapping) and not _looks_like_record(answer):
            unknown = sorted(str(key) for key in answer if key not in by_id)
            if unknown:
                raise InvalidApprovalError(
                    f"the answer names {unknown}, which are not tool calls awaiting approval "
                    f"(awaiting: {sorted(by_id)}); an approval cannot be edited into another "
                    "call — approve the action as shown, or decline it"
                )
            for call_id, value in answer.items():
                item = by_id[call_id]
                if value is None or value is False:
                    item.declined = "the approver declined it"
                else:
                    item.records = _records(value)
            for item in pending:
                if item.tool_call_id not in answer:
                    item.declined = "the answer did not approve it"
            return
        records = _records(answer)
        for item in pending:
            # Every offered record goes to the PEP, which accepts only one bound to this
            # action's digest: a record for another action authorises nothing here.
            item.records = records
    except InvalidApprovalError as error:
        for item in pending:
            item.declined = f"the approval answer could not be read ({error})"
