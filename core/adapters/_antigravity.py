"""The Antigravity reference adapter."""

from __future__ import annotations

from typing import TYPE_CHECKING

from jevqueue.adapters._generic import GenericAdapter
from jevqueue.policy._registry import antigravity_registry

if TYPE_CHECKING:  # pragma: no cover
    from jevqueue.policy._pep import PolicyEnforcementPoint
    from jevqueue.policy._registry import ToolRegistry

__all__ = ["AntigravityAdapter"]


class AntigravityAdapter(GenericAdapter):
    """A :class:`GenericAdapter` over :func:`jevqueue.policy.antigravity_registry`.

    Accepts ``write_to_file`` (``TargetFile``, ``CodeContent``), ``run_command``
    (``CommandLine``, ``Cwd``; ``SafeToAutoRun`` is the agent's claim and is ignored),
    ``multi_replace_file_content`` (``TargetFile``, ``ReplacementChunks``) and
    ``view_file`` (``AbsolutePath``).
    """

    def __init__(
        self, pep: PolicyEnforcementPoint, *, registry: ToolRegistry | None = None
    ) -> None:
        super().__init__(pep, registry=registry if registry is not None else antigravity_registry())
