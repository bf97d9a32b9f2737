"""Retrieved tools, governed: an agent's ``tool_retriever`` never hands out a bare tool.

A LlamaIndex agent may get its tools from an ``ObjectRetriever`` (``FunctionAgent(
tool_retriever=...)``) at every step; those tools would run around the guard.
:class:`GovernedToolRetriever` wraps the retriever: every tool it returns is wrapped with
the agent's :class:`~.governed_tools.ToolPolicy`, so each call is judged like any other.
A retrieved tool with no declaration cannot be refused when the agent is built (it is only
known when retrieved): the guard refuses each of its calls, and audits the refusal.
"""

from __future__ import annotations

from typing import Any

from jevqueue.errors import ConfigurationError
from jevqueue.plugins.llamaindex._framework import ObjectRetriever
from jevqueue.plugins.llamaindex.governed_tools import ToolPolicy

__all__ = ["GovernedToolRetriever"]


class GovernedToolRetriever(ObjectRetriever):  # type: ignore[type-arg]
    """An ``ObjectRetriever`` whose retrieved tools are governed by one policy.

    Args:
        retriever: The agent's own tool retriever.
        policy: The policy the agent's tools are governed by.
    """

    def __init__(self, retriever: Any, policy: ToolPolicy) -> None:
        if not isinstance(retriever, ObjectRetriever):
            raise ConfigurationError(
                f"tool_retriever must be a LlamaIndex ObjectRetriever, not "
                f"{type(retriever).__name__}"
            )
        super().__init__(
            retriever.retriever, retriever.object_node_mapping, retriever.node_postprocessors
        )
        self.inner = retriever
        self.policy = policy

    def retrieve(self, str_or_query_bundle: Any) -> list[Any]:
        """The inner retriever's tools, each governed."""
        return self.policy.wrap_retrieved(self.inner.retrieve(str_or_query_bundle))

    async def aretrieve(self, str_or_query_bundle: Any) -> list[Any]:
        """The inner retriever's tools, each governed."""
        return self.policy.wrap_retrieved(await self.inner.aretrieve(str_or_query_bundle))


def governed_retriever(retriever: Any, policy: ToolPolicy) -> GovernedToolRetriever | None:
    """``retriever`` governed by ``policy`` (``None`` stays ``None``; kept when it already is)."""
    if retriever is None:
        return None
    if isinstance(retriever, GovernedToolRetriever) and retriever.policy is policy:
        return retriever
    return GovernedToolRetriever(retriever, policy)
