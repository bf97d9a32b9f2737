"""The error a governed tool raises instead of running: LlamaIndex hands it to the model.

An agent's ``call_tool`` step turns any exception of a tool into
``ToolOutput(is_error=True, content=str(error))``, which the model receives as the tool's
result; the run goes on. So a refusal is raised, never returned as a normal result, and
its message is the guard's, written for the model: what happened, why, that nothing ran.
"""

from __future__ import annotations

from typing import Any

from jevqueue.errors import ControlSignal
from jevqueue.policy import Judgement

__all__ = ["ToolCallRefusedError"]


class ToolCallRefusedError(ControlSignal):
    """A governed tool call was refused and did not run.

    Attributes:
        tool: The tool called.
        action_digest: The canonical action's digest, when the action could be built.
        verdict: The PEP's verdict, when the PEP was reached.
        approval_requested: True when an approval was asked for this call.
        judgement: The guard's judgement, when the guard refused the call.
    """

    def __init__(
        self,
        message: str,
        *,
        tool: str,
        action_digest: str | None = None,
        verdict: Any = None,
        approval_requested: bool = False,
        judgement: Judgement | None = None,
    ) -> None:
        super().__init__(message)
        self.tool = tool
        self.action_digest = action_digest
        self.verdict = verdict
        self.approval_requested = approval_requested
        self.judgement = judgement

    @classmethod
    def of(cls, judgement: Judgement) -> ToolCallRefusedError:
        """The error for a judgement that does not let the call run (its message)."""
        return cls(
            judgement.message
            or f"jevqueue did not run the call to {judgement.tool!r}: it is {judgement.kind.value}",
            tool=judgement.tool,
            action_digest=judgement.action_digest,
            verdict=judgement.verdict,
            approval_requested=judgement.request is not None,
            judgement=judgement,
        )
