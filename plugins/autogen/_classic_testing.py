"""A scripted model for classic AutoGen: the provider boundary inside ``OpenAIWrapper``.

:class:`ScriptedModel` answers through a model client registered with the agent's own
``OpenAIWrapper`` (AutoGen's ``model_client_cls`` mechanism), so everything AutoGen does
on the way to a provider — merging ``llm_config`` over the per-call arguments, adding the
configured tools — happens as with a real one, and each request is recorded as the
provider would receive it::

    model = ScriptedModel([classic_tool_call("get_weather", {"city": "Lisbon"}), "Sunny."])
    assistant = ConversableAgent("assistant", llm_config=model.llm_config())
    ...register tools for the LLM...
    model.install(assistant)   # after the tools: registering one rebuilds the client
    executor.initiate_chat(assistant, message="Weather in Lisbon?", max_turns=2)
    model.assert_complete()

A step is a ``str`` (a text answer), one call as :func:`classic_tool_call` builds it or a
list of them, an exception to raise, or a callable ``(ClassicRequest) -> step``. A call
beyond the script fails loudly (and is remembered, in case the caller swallows it).
"""

from __future__ import annotations

import copy
import json
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from jevqueue.errors import ConfigurationError

__all__ = ["ClassicRequest", "ScriptedModel", "ScriptedModelClient", "classic_tool_call"]


class UnexpectedModelCallError(AssertionError):
    """The scripted model was called with no step left."""


def classic_tool_call(
    name: str, arguments: Mapping[str, Any], *, call_id: str | None = None
) -> dict[str, Any]:
    """One tool call in the OpenAI shape a model returns."""
    return {
        "id": call_id or f"call_{uuid.uuid4().hex[:12]}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(dict(arguments))},
    }


@dataclass(frozen=True)
class ClassicRequest:
    """One request as it reached the provider boundary (``ModelClient.create``).

    Attributes:
        messages: A deep copy of the messages sent.
        tool_names: The names of the tools sent.
        tool_choice: The ``tool_choice`` sent, ``None`` when absent.
        forced_tool: The tool a named ``tool_choice`` forces, else ``None``.
        parallel_tool_calls: The ``parallel_tool_calls`` sent, ``None`` when absent.
        params: A read-only deep copy of every parameter sent.
    """

    messages: tuple[Mapping[str, Any], ...]
    tool_names: tuple[str, ...]
    tool_choice: Any
    forced_tool: str | None
    parallel_tool_calls: bool | None
    params: Mapping[str, Any]


def _request(params: Mapping[str, Any]) -> ClassicRequest:
    kept = copy.deepcopy({k: v for k, v in params.items() if k not in ("agent", "cache")})
    choice = kept.get("tool_choice")
    forced = None
    if isinstance(choice, Mapping) and isinstance(choice.get("function"), Mapping):
        forced = choice["function"].get("name")
    parallel = kept.get("parallel_tool_calls")
    return ClassicRequest(
        messages=tuple(kept.get("messages") or ()),
        tool_names=tuple(t["function"]["name"] for t in kept.get("tools") or ()),
        tool_choice=choice,
        forced_tool=forced,
        parallel_tool_calls=parallel if isinstance(parallel, bool) else None,
        params=MappingProxyType(kept),
    )


def _completion(step: Any, model: str) -> Any:
    from openai.types.chat import ChatCompletion

    if isinstance(step, str):
        message: dict[str, Any] = {"role": "assistant", "content": step}
        finish = "stop"
    else:
        calls = [step] if isinstance(step, Mapping) else list(step)
        message = {"role": "assistant", "content": None, "tool_calls": calls}
        finish = "tool_calls"
    return ChatCompletion.model_validate(
        {
            "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
        }
    )


class ScriptedModel:
    """A classic AutoGen model double that answers from a script and records every request.

    Args:
        steps: The answers, in order.
        model: The model name it reports.
        latency: Seconds each answer takes (``time.sleep``), for benchmarks.
    """

    def __init__(
        self, steps: Sequence[Any] = (), *, model: str = "scripted-model", latency: float = 0.0
    ) -> None:
        self.model = model
        self.latency = latency
        self._steps = list(steps)
        self._requests: list[ClassicRequest] = []
        self._responses: list[Any] = []
        self._unexpected: list[ClassicRequest] = []
        self._lock = threading.Lock()

    def llm_config(self, **extra: Any) -> dict[str, Any]:
        """An ``llm_config`` whose one entry is answered by this model (no cache)."""
        entry = {"model": self.model, "model_client_cls": ScriptedModelClient.__name__}
        return {"config_list": [entry], "cache_seed": None, **extra}

    def install(self, agent: Any) -> ScriptedModel:
        """Register this model with ``agent``'s client; do it after registering tools."""
        agent.register_model_client(ScriptedModelClient, scripted=self)
        return self

    @property
    def requests(self) -> list[ClassicRequest]:
        """Every request so far, oldest first."""
        with self._lock:
            return list(self._requests)

    @property
    def responses(self) -> list[Any]:
        """What the model answered (``ChatCompletion`` s), oldest first."""
        with self._lock:
            return list(self._responses)

    @property
    def remaining(self) -> int:
        """How many steps are still unconsumed."""
        with self._lock:
            return len(self._steps)

    def add(self, *steps: Any) -> None:
        """Append steps to the script."""
        with self._lock:
            self._steps.extend(steps)

    def assert_complete(self) -> None:
        """Fail when a request found no step, or a step was never consumed."""
        with self._lock:
            unexpected, left = list(self._unexpected), list(self._steps)
        assert not unexpected, f"{len(unexpected)} unexpected model call(s) beyond the script"
        assert not left, f"{len(left)} scripted step(s) never consumed: {left!r:.300}"

    def answer(self, params: Mapping[str, Any]) -> Any:
        """Record one request and return the next step as a ``ChatCompletion``."""
        if self.latency:
            time.sleep(self.latency)
        request = _request(params)
        with self._lock:
            self._requests.append(request)
            if not self._steps:
                self._unexpected.append(request)
                raise UnexpectedModelCallError(
                    f"unexpected model call #{len(self._requests)}: the script has no step left "
                    f"(tool_choice: {request.tool_choice!r})"
                )
            step = self._steps.pop(0)
        if callable(step):
            step = step(request)
        if isinstance(step, BaseException):
            raise step
        response = _completion(step, self.model)
        with self._lock:
            self._responses.append(response)
        return response


class ScriptedModelClient:
    """The ``ModelClient`` AutoGen's ``OpenAIWrapper`` builds for a :class:`ScriptedModel`."""

    def __init__(self, config: Mapping[str, Any], scripted: ScriptedModel, **_: Any) -> None:
        if not isinstance(scripted, ScriptedModel):
            raise ConfigurationError("register the client with scripted=<a ScriptedModel>")
        self.config = dict(config)
        self.scripted = scripted

    def create(self, params: dict[str, Any]) -> Any:
        return self.scripted.answer(params)

    def message_retrieval(self, response: Any) -> list[Any]:
        return [
            choice.message if choice.message.tool_calls else choice.message.content
            for choice in response.choices
        ]

    def cost(self, response: Any) -> float:
        return 0.0

    @staticmethod
    def get_usage(response: Any) -> dict[str, Any]:
        return {
            "prompt_tokens": 0,
            "completion_tokens": 0,
            "total_tokens": 0,
            "cost": 0.0,
            "model": response.model,
        }
