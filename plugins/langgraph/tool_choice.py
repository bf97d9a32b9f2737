"""How each LangChain chat-model integration is told to force, forbid or leave tools alone.

langchain-core passes ``tool_choice`` to ``bind_tools`` untranslated; every integration
maps it its own way. :class:`ToolChoice` holds one integration's mapping of the
governor's three ``generate`` modes:

=============  ===============================================================
mode           what the model is bound with
=============  ===============================================================
force ``X``    ``bind_tools(tools, **force("X"))`` — one call of X, no parallel calls
forbid         ``bind_tools(tools, **forbid)`` — prose only
passthrough    ``model.bind_tools(tools)`` — nothing else, exactly as without jevqueue
=============  ===============================================================

:meth:`ToolChoice.for_model` picks the mapping by the model's class (its MRO, so
subclasses such as ``AzureChatOpenAI`` inherit). Pass your own ``ToolChoice`` to
:func:`~jevqueue.plugins.langgraph.governed_model_node` for an integration that is not
listed. Whatever the mapping, the governed node reads the answer back and blocks a turn
whose calls are not exactly the forced one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["ToolChoice"]


def _openai_force(name: str) -> dict[str, Any]:
    return {"tool_choice": name, "parallel_tool_calls": False}


def _anthropic_force(name: str) -> dict[str, Any]:
    # The dict form: ChatAnthropic would read a bare "none"/"required" string as a tool name.
    return {"tool_choice": {"type": "tool", "name": name}, "parallel_tool_calls": False}


def _name_only_force(name: str) -> dict[str, Any]:
    return {"tool_choice": name}


def _no_keywords(name: str) -> dict[str, Any]:
    return {}


def tool_name(tool: Any) -> str | None:
    """The name of a LangChain tool or an OpenAI-style tool dict."""
    name = getattr(tool, "name", None)
    if isinstance(name, str):
        return name
    if isinstance(tool, Mapping):
        function = tool.get("function")
        if isinstance(function, Mapping):
            return function.get("name")
        return tool.get("name")
    return None


@dataclass(frozen=True)
class ToolChoice:
    """One integration's mapping of the force and forbid modes, as ``bind_tools`` keywords.

    Attributes:
        name: A label for messages and logs (``"openai"``, ``"anthropic"`` ...).
        force: ``tool_name -> keywords`` that make ``bind_tools`` constrain the model to
            exactly one call of that tool.
        forbid: Keywords that make ``bind_tools`` forbid tool calls; ``None`` means the
            integration has none, so no tools are bound at all on a prose turn.
        narrow: Offer only the forced tool on a forced turn (for integrations that drop
            ``tool_choice``).
        directive_role: The role of the appended directive message: ``"system"``, or
            ``"human"`` for providers that accept a system message only at the start.
        can_force: False when the integration cannot truly constrain the model; the
            read-back is then the only guard.
    """

    name: str
    force: Callable[[str], Mapping[str, Any]]
    forbid: Mapping[str, Any] | None = field(default_factory=lambda: {"tool_choice": "none"})
    narrow: bool = False
    directive_role: Literal["system", "human"] = "system"
    can_force: bool = True

    @classmethod
    def openai(cls) -> ToolChoice:
        """OpenAI and OpenAI-compatible APIs: a name, ``parallel_tool_calls=False``, "none"."""
        return cls("openai", _openai_force)

    @classmethod
    def anthropic(cls) -> ToolChoice:
        """Anthropic: the dict forms ``{"type": "tool", ...}`` and ``{"type": "none"}``.

        With extended thinking on, Anthropic drops a forced choice (it only warns); the
        read-back then blocks a turn that does not call the tool.
        """
        return cls(
            "anthropic",
            _anthropic_force,
            forbid={"tool_choice": {"type": "none"}},
            directive_role="human",
        )

    @classmethod
    def name_only(cls) -> ToolChoice:
        """Integrations that take a tool name and "none" but no parallel-calls switch."""
        return cls("name_only", _name_only_force)

    @classmethod
    def narrowing(cls) -> ToolChoice:
        """Integrations that drop ``tool_choice`` (ChatOllama): narrow the tools instead.

        Forcing offers only the chosen tool; forbidding binds no tools. Neither can stop
        the model answering in prose on a forced turn: the read-back blocks that turn.
        """
        return cls("narrowing", _no_keywords, forbid=None, narrow=True, can_force=False)

    @classmethod
    def for_model(cls, model: Any) -> ToolChoice:
        """The mapping for ``model``'s integration; OpenAI's when it is not listed."""
        for klass in type(model).__mro__:
            factory = _BY_CLASS.get(klass.__name__)
            if factory is not None:
                return factory()
        return cls.openai()

    # --- binding a model ---------------------------------------------------------------

    def forced_tools(self, tools: Sequence[Any], name: str) -> list[Any]:
        """The tools offered on a turn forced to ``name``."""
        return [t for t in tools if tool_name(t) == name] if self.narrow else list(tools)

    def bind_force(self, model: Any, tools: Sequence[Any], name: str) -> Any:
        """``model`` bound to call exactly ``name`` once."""
        return model.bind_tools(self.forced_tools(tools, name), **self.force(name))

    def bind_forbid(self, model: Any, tools: Sequence[Any]) -> Any:
        """``model`` bound to answer without calling tools."""
        if self.forbid is None:
            return model
        return model.bind_tools(tools, **self.forbid)

    def bind_passthrough(self, model: Any, tools: Sequence[Any]) -> Any:
        """The untouched binding: ``model.bind_tools(tools)``, no tool_choice, no flags."""
        return model.bind_tools(tools)


_BY_CLASS: dict[str, Callable[[], ToolChoice]] = {
    "BaseChatOpenAI": ToolChoice.openai,
    "ChatOpenAI": ToolChoice.openai,
    "AzureChatOpenAI": ToolChoice.openai,
    "ChatDeepSeek": ToolChoice.openai,
    "ChatXAI": ToolChoice.openai,
    "ChatGroq": ToolChoice.openai,
    "ChatFireworks": ToolChoice.openai,
    "ChatTogether": ToolChoice.openai,
    "ChatAnthropic": ToolChoice.anthropic,
    "ChatGoogleGenerativeAI": ToolChoice.name_only,
    "ChatOllama": ToolChoice.narrowing,
}
