"""Judging one ``tools/call`` the proxy received: a thin adapter of :class:`~jevqueue.policy.Guard`.

This part knows nothing of the MCP SDK: the relay hands it the tool name and arguments as
they arrived, the call's id and ``_meta``, and — when the client can ask its user — a way
to ask; it answers with the guard's :class:`~jevqueue.policy.Judgement` and runs an
allowed call upstream through :meth:`Guard.arun` (the judged arguments, once per call id).
The guard audits every answer, including calls refused before evaluation.

What the proxy adds to the guard is MCP's own:

* **The upstream's listing narrows the tools file.** A declared tool the upstream itself
  marks ``destructiveHint`` while the tools file declares no writing effect is refused
  like an undeclared one (annotations only ever tighten; ``readOnlyHint`` loosens
  nothing). The listing is read when the proxy starts, on every ``tools/list``, and again
  before the next call after the upstream announces ``notifications/tools/list_changed``.
* **The listing is pinned** (:class:`~jevqueue.policy.ListingPins`): a declared tool
  listed with a schema or description other than the tools file's (``[tool.schema]``,
  ``description``), or changed after the proxy first listed it, or a name listed twice, is
  withdrawn — hidden and refused — and the withdrawal logged once.
* **A call carries only declared arguments.** An argument the declaration does not name
  (its schema's ``properties``, its path, working-directory and content fields) would
  reach the upstream unjudged: the call is refused, naming it, and audited.
* **Who serves the tool is judged.** Every declaration carries the upstream's origin
  (``ToolSpec.origin``), part of each action digest: an approval of a call on one upstream
  never authorises it on another.
* **Resource reads are calls.** A ``resources/read`` is judged as a call of the declared
  tool ``resources/read`` (:mod:`~jevqueue.plugins.mcp.resource_read`).
* **Where approvals come from.** Signed records the client attaches to the call
  (``_meta[APPROVALS_META_KEY]``) are judged with it. Otherwise, when the policy asks for
  an approval, the guard's approver tries in turn: a record in the approvals directory
  for exactly this digest; the embedding's ``approver=``; the client's user, asked with an
  elicitation and signed by the proxy's authority; else a decline saying what to
  configure. On protocol 2026-07-28 the relay pauses instead (:meth:`CallJudge.judge`,
  then :meth:`CallJudge.answered` on the client's retry).
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from jevqueue.approvals import ApprovalRecord
from jevqueue.errors import (
    ApprovalDeclinedError,
    ConfigurationError,
    InvalidToolArgumentsError,
    UnregisteredToolError,
)
from jevqueue.plugins.mcp.no_elicitation import (
    APPROVALS_META_KEY,
    no_authority_message,
    no_elicitation_message,
)
from jevqueue.plugins.mcp.resource_read import RESOURCE_READ, check_read_spec, read_arguments
from jevqueue.policy import (
    FILE_DELETE,
    FILE_WRITE,
    SHELL_COMMAND,
    ApprovalRequest,
    Approver,
    ExecutionContext,
    Guard,
    Judgement,
    ListedTool,
    ListingPins,
    ToolRegistry,
    ToolSpec,
    registry_from_specs,
)
from jevqueue.policy._approval_request import check_approver

__all__ = ["APPROVALS_META_KEY", "AskUser", "CallJudge", "Judgement"]

_logger = logging.getLogger("jevqueue.plugins.mcp")

_WRITING_EFFECTS = frozenset({FILE_WRITE, FILE_DELETE, SHELL_COMMAND})

AskUser = Callable[[ApprovalRequest], Awaitable[bool]]
"""The relay's way to ask the client's user about one request: True only for a plain yes."""


def _refused_by_annotations(spec: ToolSpec, annotations: Mapping[str, Any] | None) -> str | None:
    """Why an upstream's own annotations contradict a read-only declaration, if they do."""
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


def _listed(tool: Mapping[str, Any]) -> ListedTool | None:
    """A ``tools/list`` entry as the core pins it (``None``: it has no string name)."""
    name, schema = tool.get("name"), tool.get("inputSchema")
    if type(name) is not str:
        return None
    title, description = tool.get("title"), tool.get("description")
    return ListedTool(
        name=name,
        title=title if isinstance(title, str) else None,
        description=description if isinstance(description, str) else None,
        schema=schema if isinstance(schema, Mapping) else {},
    )


class _ListedRegistry(ToolRegistry):
    """The tools file's declarations, less the tools the upstream's listing contradicts.

    ``refused`` holds what the latest listing's annotations contradict (lifted when a later
    listing no longer does); ``withdrawn`` what broke a pin, for the proxy's life.
    """

    def __init__(self, specs: Iterable[ToolSpec]) -> None:
        super().__init__(specs)
        self.refused: dict[str, str] = {}
        self.withdrawn: dict[str, str] = {}

    def get(self, name: str) -> ToolSpec:
        if type(name) is str:
            reason = self.withdrawn.get(name) or self.refused.get(name)
            if reason is not None:
                raise UnregisteredToolError(name, f"tool {name!r} is refused: {reason}")
        try:
            return super().get(name)
        except UnregisteredToolError as error:
            raise UnregisteredToolError(
                error.tool_name,
                f"{error}; it is not declared in the proxy's tools file, so nothing was sent "
                "to the server (operator: add a [[tool]] table for it; `jevqueue mcp-proxy "
                "--describe -- COMMAND` prints a starting point)",
            ) from None

    def __contains__(self, name: object) -> bool:
        return (
            super().__contains__(name) and name not in self.refused and name not in self.withdrawn
        )


def _with_origin(specs: Iterable[ToolSpec], origin: str | None) -> tuple[ToolSpec, ...]:
    """The declarations, each bound to the upstream that serves it."""
    declared = registry_from_specs(specs, owner="PolicyProxyServer").specs()
    if origin is None:
        return declared
    bound = []
    for spec in declared:
        if spec.origin is not None and spec.origin != origin:
            raise ConfigurationError(
                f"tool {spec.name!r} is declared for the origin {spec.origin!r}, and this "
                f"proxy serves {origin!r}: declare it without an origin (the proxy sets it)"
            )
        bound.append(dataclasses.replace(spec, origin=origin))
    return tuple(bound)


class CallJudge:
    """Judges the proxy's calls with one guard, and knows where approvals come from.

    Args:
        pep: the policy enforcement point (audits every decision).
        specs: the declared tools; anything else is refused.
        context: the execution context every call runs in.
        approver: who approves calls that need an explicit approval, instead of the
            client's user (:class:`~jevqueue.policy.Approver`, plain or ``async``).
        authority: signs the client's user's "yes" (the PEP's verifier must trust it).
        approvals_dir: a directory of signed approval records (JSON files printed by
            ``jevqueue approve``); a record is offered for the digest it names.
        origin: who serves the tools (:attr:`Upstream.origin
            <jevqueue.plugins.mcp.Upstream.origin>`), set on every declaration.

    Attributes:
        guard: the :class:`~jevqueue.policy.Guard` that judges and runs every call.
        stale: True when the upstream announced a changed tool list not yet read.

    Raises:
        ConfigurationError: a spec, the context, the approver, the authority or the
            directory is unusable.
    """

    def __init__(
        self,
        *,
        pep: Any,
        specs: Iterable[ToolSpec],
        context: ExecutionContext | Mapping[str, Any],
        approver: Approver | None = None,
        authority: Any = None,
        approvals_dir: str | Path | None = None,
        origin: str | None = None,
    ) -> None:
        if authority is not None and not callable(getattr(authority, "issue", None)):
            raise ConfigurationError(
                "authority must be a jevqueue.approvals.ApprovalAuthority (it has no "
                "issue(action_digest) method)"
            )
        if approvals_dir is not None and not Path(approvals_dir).is_dir():
            raise ConfigurationError(
                f"the approvals directory {str(approvals_dir)!r} does not exist: create it, "
                "and put records from `jevqueue approve DIGEST ... > DIR/NAME.json` in it"
            )
        self.approver = check_approver(approver)
        self.authority = authority
        self.approvals_dir = None if approvals_dir is None else Path(approvals_dir)
        self.guard = Guard(
            pep,
            specs=_with_origin(specs, origin),
            context=context,
            approver=self._approve,
            owner="PolicyProxyServer",
        )
        # The guard judges against the declarations as the upstream's listing narrows them
        # (the guard copies specs= into a plain registry, so the narrowed one replaces it).
        self.registry = _ListedRegistry(self.guard.registry.specs())
        self.guard.registry = self.registry
        if RESOURCE_READ in self.registry:
            check_read_spec(self.registry.get(RESOURCE_READ))
        self.pins = ListingPins(self.registry.specs())
        self.stale = False
        # The guard's approver is one for the proxy; the client to ask is per call, found
        # by the call id the guard puts in each ApprovalRequest.
        self._asking: dict[str | None, AskUser | None] = {}

    # --- tools/list -------------------------------------------------------------------

    def learn_tools(self, tools: Iterable[Mapping[str, Any]]) -> None:
        """Read the upstream's listing: withdraw what breaks a pin, refuse declared tools
        its annotations contradict."""
        tools = list(tools)
        registry = self.registry

        def declared(name: str) -> bool:
            return ToolRegistry.__contains__(registry, name)

        listing = [listed for listed in map(_listed, tools) if listed is not None]
        for name, reason in self.pins.read(listing):
            registry.withdrawn[name] = (
                f"{reason}; it stays hidden and refused until the proxy restarts with a tools "
                "file that describes it again (operator: review what `jevqueue mcp-proxy "
                "--describe -- COMMAND` prints now)"
            )
            if declared(name):
                _logger.warning(
                    "hiding and refusing %r until it is described again: %s", name, reason
                )
        for tool in tools:
            name = tool.get("name")
            if type(name) is not str or name in registry.withdrawn or not declared(name):
                continue
            if name == RESOURCE_READ:
                registry.withdrawn[name] = (
                    f"the upstream lists a tool named {RESOURCE_READ!r}, the tools file's "
                    "name for resource reads: it is never called as a tool"
                )
                _logger.warning("refusing the upstream's tool %s: the name is reserved", name)
                continue
            spec = ToolRegistry.get(registry, name)
            reason = _refused_by_annotations(spec, tool.get("annotations"))
            if reason is None:
                registry.refused.pop(name, None)
            else:
                if name not in registry.refused:
                    _logger.warning("refusing %s: %s", name, reason)
                registry.refused[name] = reason

    def listed(self, name: object) -> bool:
        """Whether the proxy shows the upstream tool ``name`` to its client."""
        return name in self.registry and name != RESOURCE_READ

    @property
    def reads_resources(self) -> bool:
        """True when the tools file declares ``resources/read``: resources are relayed,
        each read judged."""
        return ToolRegistry.__contains__(self.registry, RESOURCE_READ)

    @property
    def pauses(self) -> bool:
        """True when a call may wait for the client's user (no ``approver=``, an authority)."""
        return self.approver is None and self.authority is not None

    # --- tools/call -------------------------------------------------------------------

    async def check(
        self,
        name: object,
        arguments: object,
        call_id: str | None,
        meta: Mapping[str, Any] | None = None,
        *,
        ask_user: AskUser | None = None,
    ) -> Judgement:
        """Judge one call as it arrived, asking for an approval in place when one is needed.

        Never pending. ``ask_user`` asks the client's user (``None``: the client cannot).
        """
        outside = self._refused_early(name, arguments, call_id)
        if outside is not None:
            return outside
        return await self._check(name, arguments, call_id, meta, ask_user)

    async def check_read(
        self,
        uri: object,
        call_id: str | None,
        meta: Mapping[str, Any] | None = None,
        *,
        ask_user: AskUser | None = None,
    ) -> Judgement:
        """Judge a ``resources/read`` of ``uri`` as a call of the declared ``resources/read``
        (:func:`~jevqueue.plugins.mcp.resource_read.read_arguments`). Never pending."""
        try:
            arguments = read_arguments(uri)
        except InvalidToolArgumentsError as error:
            return self.guard.refuse(RESOURCE_READ, error, call_id)
        if RESOURCE_READ in self.registry:
            files = "path" in self.registry.get(RESOURCE_READ).path_fields
            if files and "uri" in arguments:
                why = (
                    f"{str(uri)[:200]!r} is not a file:// URI, and the tools file declares "
                    'resources/read for files (path_fields = ["path"]); operator: a server '
                    "of other resources is declared without path fields, judged by its side "
                    "effects"
                )
            elif not files and "path" in arguments:
                why = (
                    "a file:// resource is read only under a resources/read declaration "
                    'that contains it in the workspace (path_fields = ["path"]), and the '
                    "tools file declares none"
                )
            else:
                why = ""
            if why:
                return self.guard.refuse(
                    RESOURCE_READ, InvalidToolArgumentsError(RESOURCE_READ, why), call_id
                )
        return await self._check(RESOURCE_READ, arguments, call_id, meta, ask_user)

    async def _check(
        self,
        name: object,
        arguments: object,
        call_id: str | None,
        meta: Mapping[str, Any] | None,
        ask_user: AskUser | None,
    ) -> Judgement:
        self._asking[call_id] = ask_user
        try:
            return await self.guard.acheck(
                name,  # type: ignore[arg-type]
                arguments,
                call_id,
                records=_attached(meta),
            )
        finally:
            self._asking.pop(call_id, None)

    def judge(
        self,
        name: object,
        arguments: object,
        call_id: str | None,
        meta: Mapping[str, Any] | None = None,
    ) -> Judgement:
        """Judge one call for a client that answers on a retry: pending when nobody has."""
        outside = self._refused_early(name, arguments, call_id)
        if outside is not None:
            return outside
        judgement = self.guard.judge(
            name,  # type: ignore[arg-type]
            arguments,
            call_id,
            records=_attached(meta),
        )
        if judgement.pending and judgement.request is not None:
            filed = self._filed(judgement.request.action_digest)
            if filed:
                return self.guard.resume(judgement, filed)
        return judgement

    def _refused_early(
        self, name: object, arguments: object, call_id: str | None
    ) -> Judgement | None:
        """The refusal of a ``tools/call`` of ``resources/read``, or of a call that carries
        an argument its declaration does not name.

        Such an argument reaches the upstream unjudged (a second path, a flag), so the call
        is refused rather than trimmed: the model learns which argument to drop, and what
        runs is what it asked for. ``None`` when every argument is declared, or when the
        guard refuses the call anyway (an undeclared tool, arguments that are no object).
        """
        if name == RESOURCE_READ:
            return self.guard.refuse(
                name,
                UnregisteredToolError(
                    name,
                    f"{RESOURCE_READ!r} is the tools file's name for resource reads, never a "
                    "tool: read the resource with resources/read",
                ),
                call_id,
            )
        if type(name) is not str or name not in self.registry:
            return None
        if not isinstance(arguments, Mapping):
            return None
        spec = self.registry.get(name)
        allowed = self.pins.arguments(spec)
        extra = sorted(str(key) for key in arguments if key not in allowed)
        if not extra:
            return None
        shown = ", ".join(repr(key[:80]) for key in extra[:10])
        return self.guard.refuse(
            name,
            InvalidToolArgumentsError(
                name,
                f"the argument{'s' if len(extra) > 1 else ''} {shown} "
                f"{'are' if len(extra) > 1 else 'is'} not declared (its parameters: "
                f"{', '.join(sorted(allowed)) or 'none'}), so nothing was sent to the server: "
                "call it with its declared parameters only (operator: an argument the "
                "upstream really takes belongs in the tools file's [tool.schema] properties)",
            ),
            call_id,
        )

    def answered(self, pending: Judgement, approves: bool, problem: str | None = None) -> Judgement:
        """A paused call judged again with the user's answer (signed when it is a yes)."""
        request = pending.request
        if problem is not None or not approves or request is None or self.authority is None:
            return self.guard.resume(
                pending, ApprovalDeclinedError(problem or _not_approved(pending))
            )
        return self.guard.resume(pending, self.authority.issue(request.action_digest))

    # --- the guard's approver ---------------------------------------------------------

    def _approve(self, request: ApprovalRequest) -> Any:
        filed = self._filed(request.action_digest)
        if filed:
            return filed
        if self.approver is not None:
            return self.approver(request)
        ask_user = self._asking.get(request.call_id)
        if ask_user is None:
            raise ApprovalDeclinedError(no_elicitation_message(request))
        if self.authority is None:
            raise ApprovalDeclinedError(no_authority_message(request))
        return self._ask(ask_user, request)

    async def _ask(self, ask_user: AskUser, request: ApprovalRequest) -> ApprovalRecord:
        if not await ask_user(request):
            raise ApprovalDeclinedError(_not_approved(request))
        record: ApprovalRecord = self.authority.issue(request.action_digest)
        return record

    def _filed(self, digest: str) -> list[Any]:
        """The records in the approvals directory that name ``digest``."""
        if self.approvals_dir is None:
            return []
        records: list[Any] = []
        for path in sorted(self.approvals_dir.glob("*.json")):
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
                _logger.warning("ignoring approval record %s: %s", path.name, error)
                continue
            if isinstance(data, Mapping) and data.get("action_digest") == digest:
                records.append(data)  # the guard reads it as a record; the PEP checks it
        return records


def _attached(meta: Mapping[str, Any] | None) -> tuple[Any, ...]:
    """The records a client attached to its call, judged with it as given."""
    offered = meta.get(APPROVALS_META_KEY) if isinstance(meta, Mapping) else None
    if offered is None:
        return ()
    return tuple(offered) if isinstance(offered, list) else (offered,)


def _not_approved(call: Judgement | ApprovalRequest) -> str:
    return f"the user did not approve {call.tool} ({call.action_digest})"
