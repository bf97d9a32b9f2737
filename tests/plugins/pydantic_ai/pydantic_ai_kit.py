"""What the Pydantic AI tests share: suite tools as real Pydantic AI tools, one agent step."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from jevqueue import ExecutionContext, PolicyEnforcementPoint, create_default_policy_decision_point
from jevqueue.approvals import ApprovalAuthority, MemoryConsumedApprovals, SignedApprovalVerifier
from jevqueue.plugins.pydantic_ai import GovernorCapability, PolicyCapability, tool_spec
from jevqueue.testing.conformance import ConformanceTool
from jevqueue.testing.recording_audit import RecordingAuditSink
from pydantic_ai import Agent, DeferredToolRequests, Tool
from pydantic_ai.messages import ModelResponse


class SignedPolicy:
    """The default policy over ``root``: a PEP whose approvals ``authority`` signs, a
    recording audit sink, single-use approvals in memory, and the context."""

    def __init__(self, root: Path) -> None:
        key = Ed25519PrivateKey.generate()
        self.authority = ApprovalAuthority(key, "alice")
        self.audit = RecordingAuditSink()
        self.pep = PolicyEnforcementPoint(
            create_default_policy_decision_point(),
            audit_logger=self.audit,
            approval_verifier=SignedApprovalVerifier({"alice": key.public_key()}),
            consumed_approvals=MemoryConsumedApprovals(),
        )
        self.context = ExecutionContext(
            task_id="task-1", actor_id="agent", workspace=str(root), git_sha="0123456"
        )


def pydantic_tool(neutral: ConformanceTool) -> Tool[Any]:
    """A real Pydantic AI tool whose body is the suite's tool."""

    def body(**arguments: Any) -> str:
        return neutral.run(arguments)

    return Tool.from_schema(body, neutral.name, neutral.description, neutral.parameters)


def specs_for(tools: Sequence[ConformanceTool]) -> list[Any]:
    """Each suite tool declared from its Pydantic AI form, as a user declares theirs."""
    return [
        tool_spec(
            pydantic_tool(tool),
            side_effects=tool.side_effects,
            path_fields=tool.path_fields,
        )
        for tool in tools
    ]


def build_agent(
    model: Any,
    tools: Sequence[ConformanceTool],
    *,
    system_prompt: str = "",
    governor: Any = None,
    policy: PolicyCapability | None = None,
) -> Agent[None, Any]:
    """A real agent over the suite's tools, with the plugin's capabilities."""
    capabilities: list[Any] = []
    if governor is not None:
        capabilities.append(GovernorCapability(governor))
    if policy is not None:
        capabilities.append(policy)
    return Agent(
        model,
        tools=[pydantic_tool(tool) for tool in tools],
        system_prompt=system_prompt,
        output_type=[str, DeferredToolRequests],
        capabilities=capabilities,
    )


async def first_step(agent: Agent[None, Any], prompt: str) -> ModelResponse | None:
    """Run the agent loop through its first model request and that request's tool step.

    Returns the model response of the first request, or ``None`` if the loop ended before
    one. The loop stops before a second model request, so a one-step script suffices.
    """
    from pydantic_ai import CallToolsNode, ModelRequestNode

    response: ModelResponse | None = None
    async with agent.iter(prompt) as run:
        node = run.next_node
        requests = 0
        while not Agent.is_end_node(node):
            if isinstance(node, ModelRequestNode):
                if requests == 1:
                    break
                requests += 1
            node = await run.next(node)
            if isinstance(node, CallToolsNode):
                response = node.model_response
    return response
