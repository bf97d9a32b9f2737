"""The error a governed tool raises instead of running: LlamaIndex hands it to the model.

An agent's ``call_tool`` step turns any exception of a tool into
``ToolOutput(is_error=True, content=str(error))``, which the model receives as the tool's
result; the run goes on. So a refusal is raised, never returned as a normal result, and
its message is written for the model: what happened, that nothing ran, what to do.
"""

from __future__ import annotations

from typing import Any

from jevqueue.errors import ControlSignal

__all__ = ["ToolCallRefusedError"]


class ToolCallRefusedError(ControlSignal):
    """A governed tool call was refused and did not run.

    Attributes:
        tool: The tool called.
        action_digest: The canonical action's digest, when the action could be built.
        verdict: The PEP's verdict, when the PEP was reached.
        approval_requested: True when an approval was asked for this call.
    """

    def __init__(
        self,
        message: str,
        *,
        tool: str,
        action_digest: str | None = None,
        verdict: Any = None,
        approval_requested: bool = False,
    ) -> None:
        super().__init__(message)
        self.tool = tool
        self.action_digest = action_digest
        self.verdict = verdict
        self.approval_requested = approval_requested
