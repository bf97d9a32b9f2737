"""Runs the tool calls of a chat completion, each judged by the policy before it runs.

The governor decides which tool the model must call; :class:`PolicyToolRunner` decides
whether the concrete call — name, canonical arguments, execution context — may run. For
each call in ``choices[0].message.tool_calls`` (and the legacy ``function_call``) it
builds the canonical :class:`~jevqueue.policy.Action`, asks the
:class:`~jevqueue.policy.PolicyEnforcementPoint` (which audits every decision) and only then
runs the function. Calls are read by
:func:`~jevqueue.plugins.openai.completion.read_called_tools`, the same reader as the
governor's read-back, so the tool that runs is the tool the read-back checked. A denied
call, a call awaiting approval, a repair proposal, a call the registry refuses, a call
whose name cannot be read and a call whose arguments are not JSON all become a message the
model reads, never a crash and never an execution.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jevqueue.errors import (
    ConfigurationError,
    PolicyDeniedError,
    UnfulfilledObligationError,
    UsageError,
)
from jevqueue.plugins.openai.completion import UNNAMED_CALL, CalledTool, read_called_tools
from jevqueue.policy import (
    Action,
    ExecutionContext,
    PolicyEnforcementPoint,
    ToolRegistry,
    ToolSpec,
    Verdict,
    VerdictKind,
    registry_from_specs,
)

__all__ = ["PolicyToolRunner", "ToolCallResult"]

ToolFunction = Callable[..., Any]


@dataclass(frozen=True)
class ToolCallResult:
    """What one tool call came to.

    Attributes:
        call_id: The ``tool_calls[i].id`` the result answers ("" when there was none).
        name: The tool called.
        arguments: The arguments, parsed (``{}`` when they were not a JSON object).
        content: What the model reads: the tool's output, or why it did not run.
        is_error: True when the call did not run, or ran and failed.
        executed: True when the tool's function was called.
        verdict: The policy's verdict, when the call was evaluated.
        approval_requested: The action digest an approver must sign before the call may
            run, when the policy asks for an explicit approval.
        legacy: True when the result answers a legacy ``function_call``.
    """

    call_id: str
    name: str
    arguments: Mapping[str, Any]
    content: str
    is_error: bool
    executed: bool
    verdict: Verdict | None = None
    approval_requested: str | None = None
    legacy: bool = False

    def message(self) -> dict[str, Any]:
        """The message to append to the conversation.

        A ``tool`` message answering ``call_id``; for a legacy ``function_call``, the
        ``function`` message that answers it.
        """
        if self.legacy:
            return {"role": "function", "name": self.name, "content": self.content}
        return {"role": "tool", "tool_call_id": self.call_id, "content": self.content}


class PolicyToolRunner:
    """Runs the tool calls a response makes, each judged by the policy first.

    Args:
        functions: Tool name to the Python function that implements it; called with the
            call's arguments as keyword arguments. Its return value becomes the ``tool``
            message (a string as is, anything else as JSON).
        pep: The policy enforcement point; it audits every decision.
        specs: The tools' declarations (side effects, path fields), one ``ToolSpec`` per
            function (or read them with :func:`jevqueue.load_tools_file`). Every function
            must be declared: an undeclared tool could never be judged.
        registry: Deprecated: the older spelling of ``specs`` (a ``ToolRegistry``).
        context: The execution context of every call (an
            :class:`~jevqueue.policy.ExecutionContext` or a mapping of its fields).

    Raises:
        ConfigurationError: A function has no declaration.
        InvalidContextError: The context is incomplete or ambient.

    Example:
        >>> runner = PolicyToolRunner({"read_file": read_file}, pep=pep,  # doctest: +SKIP
        ...                           specs=specs, context=context)
        >>> messages.extend(r.message() for r in runner.run(response))  # doctest: +SKIP
    """

    def __init__(
        self,
        functions: Mapping[str, ToolFunction],
        *,
        pep: PolicyEnforcementPoint,
        specs: Iterable[ToolSpec] | ToolRegistry = (),
        registry: ToolRegistry | None = None,
        context: ExecutionContext | Mapping[str, Any],
    ) -> None:
        registry = registry_from_specs(specs, registry=registry, owner="PolicyToolRunner")
        missing = sorted(name for name in functions if name not in registry)
        if missing:
            raise ConfigurationError(
                f"tools {missing} are not declared: pass a ToolSpec for each in specs=[...], "
                "with its side effects and path fields, so that its calls can be judged"
            )
        self._functions = dict(functions)
        self._pep = pep
        self._registry = registry
        self._context = ExecutionContext.coerce(context)

    def run(
        self, response: Mapping[str, Any], approval_records: Sequence[Any] = ()
    ) -> list[ToolCallResult]:
        """Judge and run every tool call of a chat-completion response, in order.

        Calls are read exactly as the governor's read-back reads them
        (:func:`~jevqueue.plugins.openai.completion.read_called_tools`). A call whose name
        cannot be read (:data:`~jevqueue.plugins.openai.UNNAMED_CALL`: a ``type`` other
        than ``"function"``, or no string ``function.name``) is refused and audited, never
        run.

        Args:
            response: The response body (``choices[0].message.tool_calls`` and the legacy
                ``function_call``).
            approval_records: Approvals to present for calls that need one; each is bound
                to one action digest and used at most once.

        Returns:
            One result per call, in order; ``[]`` when the response calls nothing.
        """
        results: list[ToolCallResult] = []
        choices = response.get("choices") if isinstance(response, Mapping) else None
        if isinstance(choices, list) and len(choices) > 1:
            return self._refuse_choices(response, len(choices))
        for call in read_called_tools(response):
            if call.name == UNNAMED_CALL:
                result = self._refuse_unnamed(call)
            else:
                result = self.run_call(
                    call.name,
                    call.arguments,
                    call_id=call.call_id,
                    approval_records=approval_records,
                )
            results.append(dataclasses.replace(result, legacy=call.legacy))
        return results

    def _refuse_choices(self, response: Mapping[str, Any], count: int) -> list[ToolCallResult]:
        """Refuse every call of a response with several choices: none is judged, none runs."""
        error = UsageError(
            f"the response has {count} choices; only one can be judged: ask the provider for "
            "one choice (no n > 1)"
        )
        results: list[ToolCallResult] = []
        for choice in response["choices"]:
            single = {**response, "choices": [choice]}
            for call in read_called_tools(single):
                self._pep.audit_rejection(call.name, self._context, error)
                results.append(
                    dataclasses.replace(
                        self._refused(call.call_id, call.name, {}, f"not run: {error}"),
                        legacy=call.legacy,
                    )
                )
        return results

    def _refuse_unnamed(self, call: CalledTool) -> ToolCallResult:
        error = UsageError(
            "a tool call whose name cannot be read: only "
            '{"type": "function", "function": {"name": ..., "arguments": ...}} names a '
            "tool; ask the model to call the tool again in that shape"
        )
        self._pep.audit_rejection(UNNAMED_CALL, self._context, error)
        return self._refused(call.call_id, UNNAMED_CALL, {}, f"not run: {error}")

    def run_call(
        self,
        name: str,
        arguments: Mapping[str, Any] | str,
        *,
        call_id: str = "",
        approval_records: Sequence[Any] = (),
    ) -> ToolCallResult:
        """Judge one call and run it if, and only if, the policy lets it.

        Args:
            name: The tool called.
            arguments: Its arguments, as a mapping or as the JSON string providers send.
            call_id: The id of the call, echoed in the ``tool`` message.
            approval_records: Approvals to present if the policy asks for one.

        Returns:
            The result; it never raises for a policy outcome or a tool failure.
        """
        parsed = _parse(arguments)
        if parsed is None:
            error = UsageError(f"the arguments of {name!r} are not a JSON object: {arguments!r}")
            self._pep.audit_rejection(name, self._context, error)
            return self._refused(call_id, name, {}, f"not run: {error}")
        try:
            action = Action.build(self._registry, name, parsed, self._context)
        except UsageError as exc:
            self._pep.audit_rejection(name, self._context, exc)
            return self._refused(
                call_id, name, parsed, f"not run, refused before evaluation: {exc}"
            )
        try:
            verdict = self._pep.enforce(action, approval_records)
        except PolicyDeniedError as exc:
            return self._refused(
                call_id,
                name,
                parsed,
                f"denied by policy: {'; '.join(exc.verdict.reasons)}",
                verdict=exc.verdict,
            )
        except UnfulfilledObligationError as exc:
            digest = exc.verdict.action_digest
            return self._refused(
                call_id,
                name,
                parsed,
                f"not run: {name} needs an explicit approval of action {digest}; ask an "
                "approver, then call it again",
                verdict=exc.verdict,
                approval_requested=digest,
            )
        if verdict.kind is VerdictKind.REPAIR:
            return self._refused(
                call_id,
                name,
                parsed,
                "not run: the policy proposes this call instead: "
                f"{json.dumps(dict(verdict.repaired or {}))}; " + "; ".join(verdict.reasons),
                verdict=verdict,
            )
        function = self._functions.get(name)
        if function is None:
            return self._refused(
                call_id, name, parsed, f"not run: no function implements {name!r}", verdict=verdict
            )
        try:
            # What was judged is what runs: a fresh copy, paths resolved as judged.
            output = function(**action.arguments_to_run(parsed))
        except Exception as exc:
            return ToolCallResult(
                call_id,
                name,
                parsed,
                f"error: {name} failed: {type(exc).__name__}: {exc}",
                is_error=True,
                executed=True,
                verdict=verdict,
            )
        content = output if isinstance(output, str) else json.dumps(output, default=str)
        return ToolCallResult(
            call_id, name, parsed, content, is_error=False, executed=True, verdict=verdict
        )

    @staticmethod
    def _refused(
        call_id: str,
        name: str,
        arguments: Mapping[str, Any],
        content: str,
        *,
        verdict: Verdict | None = None,
        approval_requested: str | None = None,
    ) -> ToolCallResult:
        return ToolCallResult(
            call_id,
            name,
            arguments,
            content,
            is_error=True,
            executed=False,
            verdict=verdict,
            approval_requested=approval_requested,
        )


def _parse(arguments: Mapping[str, Any] | str | None) -> dict[str, Any] | None:
    if isinstance(arguments, Mapping):
        return dict(arguments)
    if arguments is None or arguments == "":
        return {}
    if not isinstance(arguments, str):
        return None
    try:
        parsed = json.loads(arguments)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None
