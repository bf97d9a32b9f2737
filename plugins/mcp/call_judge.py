"""Judging one ``tools/call`` the proxy received: run it, refuse it, or ask for an approval.

This part knows nothing of the MCP SDK: the proxy hands it a tool name and the arguments
as they arrived, it answers with a :class:`Judgement`. Every answer is audited by the PEP,
including calls refused before evaluation (unknown tool, malformed arguments).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jevqueue.approvals import ApprovalRecord
from jevqueue.errors import ConfigurationError, JevError, UnregisteredToolError, UsageError
from jevqueue.policy import (
    FILE_DELETE,
    FILE_WRITE,
    SHELL_COMMAND,
    Action,
    ExecutionContext,
    ToolSpec,
    Verdict,
    VerdictKind,
    registry_from_specs,
)

__all__ = ["APPROVALS_META_KEY", "CallJudge", "Judgement"]

_logger = logging.getLogger("jevqueue.plugins.mcp")

APPROVALS_META_KEY = "jevqueue/approval_records"
"""The ``_meta`` key of a ``tools/call`` under which a client may send signed records."""

_WRITING_EFFECTS = frozenset({FILE_WRITE, FILE_DELETE, SHELL_COMMAND})
_EXPLICIT_APPROVAL = "explicit_approval"


@dataclass(frozen=True)
class Judgement:
    """What the proxy does with one call.

    Attributes:
        outcome: ``"run"`` (forward ``arguments`` upstream), ``"deny"`` (answer ``message``
            as an error result; nothing reaches the upstream) or ``"approve"`` (ask the
            client's user about ``action`` first).
        tool: the tool name as called.
        message: the text the client sees for a denial or an approval request.
        arguments: for ``"run"``: the arguments that were judged, path and working
            directory fields replaced by the resolved absolute paths the policy checked.
        action: the canonical action, when one could be built.
        verdict: the PEP's verdict, when the call was evaluated.
        reasons: for ``"approve"``: why the policy asks, as a person should read it.
    """

    outcome: str
    tool: str
    message: str = ""
    arguments: dict[str, Any] | None = None
    action: Action | None = None
    verdict: Verdict | None = field(default=None, compare=False)
    reasons: str = ""


def _refused_by_annotations(spec: ToolSpec, annotations: Mapping[str, Any] | None) -> str | None:
    """Why an upstream's own annotations contradict a read-only declaration, if they do.

    Annotations come from the upstream and are untrusted, so they only ever tighten: a
    tool the upstream itself calls destructive is refused while the tools file declares
    it without a writing effect. ``readOnlyHint`` never relaxes anything.
    """
    if not annotations:
        return None
    read_only = annotations.get("readOnlyHint") is True
    destructive = annotations.get("destructiveHint") is True
    if destructive and not read_only and not spec.side_effects & _WRITING_EFFECTS:
        return (
            f"the upstream marks {spec.name!r} destructive (destructiveHint) but the tools "
            f"file declares only {sorted(spec.side_effects) or 'no side effects'}: declare "
            "its writing effect (file_write, file_delete or shell_command) and its path fields"
        )
    return None


class CallJudge:
    """Judges calls against one PEP, one registry and one execution context.

    Args:
        pep: the policy enforcement point (audits every decision).
        specs: the declared tools; anything else is refused.
        context: the execution context every call runs in.
        approvals_dir: a directory of signed approval records (JSON files printed by
            ``jevqueue approve``); records for a call's digest are offered to the PEP.

    Raises:
        ConfigurationError: a spec, the context or the directory is unusable.
    """

    def __init__(
        self,
        *,
        pep: Any,
        specs: Iterable[ToolSpec],
        context: ExecutionContext | Mapping[str, Any],
        approvals_dir: str | Path | None = None,
    ) -> None:
        if not callable(getattr(pep, "evaluate", None)):
            raise ConfigurationError(
                "pep must be a jevqueue.PolicyEnforcementPoint (it has no evaluate(action))"
            )
        self.pep = pep
        self.registry = registry_from_specs(specs, owner="PolicyProxyServer")
        self.context = (
            context if type(context) is ExecutionContext else ExecutionContext.coerce(context)
        )
        if approvals_dir is not None and not Path(approvals_dir).is_dir():
            raise ConfigurationError(
                f"the approvals directory {str(approvals_dir)!r} does not exist: create it, "
                "and put records from `jevqueue approve DIGEST ... > DIR/NAME.json` in it"
            )
        self.approvals_dir = None if approvals_dir is None else Path(approvals_dir)
        self._refused: dict[str, str] = {}

    # --- tools/list -------------------------------------------------------------------

    def learn_tools(self, tools: Iterable[Mapping[str, Any]]) -> None:
        """Read the upstream's listing: refuse declared tools its annotations contradict."""
        for tool in tools:
            name = tool.get("name")
            if type(name) is not str or name not in self.registry:
                continue
            reason = _refused_by_annotations(self.registry.get(name), tool.get("annotations"))
            if reason is None:
                self._refused.pop(name, None)
            else:
                if name not in self._refused:
                    _logger.warning("refusing %s: %s", name, reason)
                self._refused[name] = reason

    def listed(self, name: object) -> bool:
        """Whether the proxy shows the upstream tool ``name`` to its client."""
        return type(name) is str and name in self.registry and name not in self._refused

    # --- tools/call -------------------------------------------------------------------

    def judge(
        self,
        name: object,
        arguments: object,
        meta: Mapping[str, Any] | None = None,
    ) -> Judgement:
        """Judge one call as it arrived (name and arguments straight from the request).

        Args:
            name: the requested tool name.
            arguments: the requested arguments (``None`` means none).
            meta: the request's ``_meta``; signed records under :data:`APPROVALS_META_KEY`
                are offered to the PEP.
        """
        shown = name if type(name) is str else repr(name)[:80]
        if type(name) is str and name in self._refused:
            return self._reject(name, UnregisteredToolError(name, self._refused[name]))
        if arguments is None:
            arguments = {}
        try:
            if type(name) is not str:
                raise UnregisteredToolError(shown, "a tool name must be a string")
            action = Action.build(self.registry, name, arguments, self.context)  # type: ignore[arg-type]
        except UnregisteredToolError as error:
            return self._reject(shown, error, unknown=True)
        except UsageError as error:
            return self._reject(shown, error)
        records, unreadable = self._records(action.digest, meta)
        verdict = self.pep.evaluate(action, tuple(records))
        judgement = self._answer(action, verdict)
        if unreadable and judgement.outcome != "run":
            return Judgement(
                judgement.outcome,
                judgement.tool,
                f"{judgement.message} (ignored approval records: {'; '.join(unreadable)})",
                judgement.arguments,
                judgement.action,
                judgement.verdict,
            )
        return judgement

    def approved(self, action: Action, record: ApprovalRecord) -> Judgement:
        """Judge ``action`` again with the record an approver just issued for its digest."""
        return self._answer(action, self.pep.evaluate(action, (record,)))

    # --- internals --------------------------------------------------------------------

    def _reject(self, name: str, error: JevError, *, unknown: bool = False) -> Judgement:
        audit_rejection = getattr(self.pep, "audit_rejection", None)
        if callable(audit_rejection):
            audit_rejection(name, self.context, error)
        if unknown:
            message = (
                f"Refused by jevqueue: the tool {name!r} is not declared in the proxy's tools "
                "file, and the proxy runs no tool it does not know. Nothing was sent to the "
                "server. (Operator: add a [[tool]] table for it; `jevqueue mcp-proxy "
                "--describe -- COMMAND` prints a starting point.)"
            )
        else:
            message = f"Refused by jevqueue before policy evaluation: {error}. Nothing ran."
        return Judgement("deny", name, message)

    def _answer(self, action: Action, verdict: Verdict) -> Judgement:
        if verdict.allowed:
            return Judgement("run", action.tool, "", _forwarded(action), action, verdict)
        kind = verdict.kind
        if kind is VerdictKind.REPAIR and verdict.repaired is not None:
            proposal = dict(verdict.repaired)
            proposal = proposal.get("arguments", proposal)  # the arguments of the repaired call
            repaired = json.dumps(proposal, sort_keys=True, ensure_ascii=False, default=str)
            message = (
                f"Not run: jevqueue asks to resubmit {action.tool} with these arguments: "
                f"{repaired} ({'; '.join(verdict.reasons)})"
            )
            return Judgement("deny", action.tool, message, None, action, verdict)
        if kind is VerdictKind.ALLOW_WITH_OBLIGATIONS and verdict.obligations == (
            _EXPLICIT_APPROVAL,
        ):
            # The PEP's own "no approval record supplied" is for callers, not for a person.
            why = "; ".join(r for r in verdict.reasons if "no approval record" not in r)
            message = f"{action.tool} needs an explicit approval of action {action.digest}: {why}"
            return Judgement("approve", action.tool, message, None, action, verdict, why)
        reasons = "; ".join(verdict.reasons) or kind.value
        return Judgement(
            "deny",
            action.tool,
            f"Denied by jevqueue policy: {reasons}. The call to {action.tool} was not executed.",
            None,
            action,
            verdict,
        )

    def _records(
        self, digest: str, meta: Mapping[str, Any] | None
    ) -> tuple[list[ApprovalRecord], list[str]]:
        """Signed records for ``digest``: from the request's ``_meta`` and the directory."""
        raw: list[Any] = []
        unreadable: list[str] = []
        offered = meta.get(APPROVALS_META_KEY) if isinstance(meta, Mapping) else None
        if offered is not None:
            raw.extend(offered if isinstance(offered, list) else [offered])
        if self.approvals_dir is not None:
            for path in sorted(self.approvals_dir.glob("*.json")):
                try:
                    raw.append(json.loads(path.read_text(encoding="utf-8")))
                except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
                    unreadable.append(f"{path.name}: {type(error).__name__}")
        records: list[ApprovalRecord] = []
        for item in raw:
            if isinstance(item, Mapping) and item.get("action_digest") != digest:
                continue  # a record for another action: not offered, not burnt
            try:
                records.append(ApprovalRecord.from_dict(item))
            except JevError as error:
                unreadable.append(str(error))
        return records, unreadable


def _forwarded(action: Action) -> dict[str, Any]:
    """The judged arguments, with each path field as the absolute path the policy checked.

    The upstream resolves a relative path against its own working directory, which need
    not be the workspace the policy judged; the resolved form leaves it no other reading.
    """
    arguments = json.loads(json.dumps(dict(action.arguments)))
    for name, target in zip(action.target_fields, action.targets, strict=True):
        if isinstance(arguments.get(name), str):
            arguments[name] = target
    spec = action.spec
    cwd_field = spec.cwd_field if spec is not None else None
    if cwd_field and action.cwd is not None and isinstance(arguments.get(cwd_field), str):
        arguments[cwd_field] = action.cwd
    return arguments
