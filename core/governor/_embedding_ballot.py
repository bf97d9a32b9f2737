"""A ballot that compares meanings: sentence embeddings of the request and of each tool.

The newest user message and each tool's text are embedded with a local sentence model
(all-MiniLM-L6-v2, int8 ONNX; see :mod:`jevqueue.governor._sentence_encoder`) and a tool scores the
cosine similarity of the two vectors, clipped to ``[0, 1]``. A request that says "Will it
rain in Oslo tomorrow?" lands next to a tool described as "Get the weather forecast for a
city" although the two share no word.

The text embedded for a tool was chosen by measurement on public function-calling data
(``bench/routing.py --texts``): its name split into words, then its description, then its
parameters' names. The model loads once per process, lazily, on the first score; tool
vectors are cached by the tool's text, so a host that rebuilds its tool list every turn
costs one dictionary look-up per tool.

Requires the ``embed`` extra (``pip install "jevqueue[embed]"``); importing this module
does not import ``onnxruntime``.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

from jevqueue.governor._messages import message_text
from jevqueue.governor._sentence_encoder import SentenceEncoder, shared_encoder
from jevqueue.governor._thresholds import Thresholds
from jevqueue.governor._tool_schema import ToolSchema, normalize_tool

__all__ = ["EmbeddingBallot", "tool_text"]

_SPLIT = re.compile(r"[_.\-]+|(?<=[a-z0-9])(?=[A-Z])")
_TOOL_CACHE = 4096


def _words(name: str) -> str:
    return " ".join(part for part in _SPLIT.split(name) if part).lower()


def tool_text(tool: ToolSchema) -> str:
    """The text embedded for a tool: its name as words, its description, its parameters.

    ``get_weather_forecast(city, days)`` described as "Forecast for a city." becomes
    ``"get weather forecast. Forecast for a city. Parameters: city, days."``.
    """
    parts = [_words(tool.name) + "."]
    if tool.description.strip():
        parts.append(tool.description.strip())
    properties = tool.parameters.get("properties")
    if isinstance(properties, Mapping) and properties:
        parts.append("Parameters: " + ", ".join(_words(str(name)) for name in properties) + ".")
    return " ".join(parts)


def _newest_user_text(messages: Sequence[Mapping[str, Any]]) -> str:
    for message in reversed(messages):
        if message.get("role") == "user":
            return message_text(message)
    return ""


class EmbeddingBallot:
    """Scores every tool by the cosine similarity of its text and the newest user message.

    Args:
        encoder: The sentence encoder; by default the process's shared
            all-MiniLM-L6-v2 (loaded on the first score, once for every ballot).
        tool_text: How a tool becomes the text that is embedded; by default
            :func:`tool_text`, the form the calibrated :attr:`thresholds` were measured
            with. Another form needs thresholds calibrated for it.

    A conversation with no user message, or an empty one, scores 0 for every tool.

    Raises:
        ImportError: On the first score, when the ``embed`` extra is not installed (the
            message names ``pip install "jevqueue[embed]"``).

    Example:
        >>> ballot = EmbeddingBallot()
        >>> tools = [{"name": "get_forecast", "description": "Weather forecast for a city."}]
        >>> ballot.score([{"role": "user", "content": "Will it rain in Oslo?"}], tools)
        ... # doctest: +SKIP
        {'get_forecast': 0.49...}
    """

    thresholds: ClassVar[Thresholds] = Thresholds(confident=0.55, margin=0.19, floor=0.15)
    """The thresholds calibrated for this ballot (``bench/routing.py --calibrate``); a
    :class:`~jevqueue.governor.Governor` built with this ballot and no thresholds uses them."""

    def __init__(
        self,
        encoder: SentenceEncoder | None = None,
        *,
        tool_text: Callable[[ToolSchema], str] = tool_text,
    ) -> None:
        self._encoder = encoder
        self._tool_text = tool_text
        self._vectors: OrderedDict[str, Any] = OrderedDict()
        self._toolsets: OrderedDict[tuple[str, ...], Any] = OrderedDict()
        self._last_query: tuple[str, Any] = ("", None)
        self._lock = threading.Lock()

    @property
    def encoder(self) -> SentenceEncoder:
        """The sentence encoder (the shared one unless another was passed)."""
        if self._encoder is None:
            self._encoder = shared_encoder()
        return self._encoder

    def _matrix(self, texts: tuple[str, ...]) -> Any:
        """The tool vectors of ``texts`` as one matrix, cached by the toolset's texts."""
        with self._lock:
            matrix = self._toolsets.get(texts)
            if matrix is not None:
                self._toolsets.move_to_end(texts)
                return matrix
            missing = [text for text in dict.fromkeys(texts) if text not in self._vectors]
        if missing:
            encoded = self.encoder.encode(missing)
            with self._lock:
                for text, vector in zip(missing, encoded, strict=True):
                    self._vectors[text] = vector
                while len(self._vectors) > _TOOL_CACHE:
                    self._vectors.popitem(last=False)
        import numpy

        with self._lock:
            rows = [self._vectors.get(text) for text in texts]
        if any(row is None for row in rows):  # evicted meanwhile by a huge toolset
            rows = list(self.encoder.encode(list(texts)))
        matrix = numpy.asarray(rows, dtype=numpy.float32)
        with self._lock:
            self._toolsets[texts] = matrix
            while len(self._toolsets) > 32:
                self._toolsets.popitem(last=False)
        return matrix

    def _query(self, text: str) -> Any:
        last_text, last_vector = self._last_query
        if last_vector is not None and text == last_text:
            return last_vector
        vector = self.encoder.encode([text])[0]
        self._last_query = (text, vector)
        return vector

    def similarities(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]
    ) -> dict[str, float]:
        """Every tool's raw cosine similarity to the newest user message, in toolset order.

        Raises:
            InvalidToolSchemaError: A tool is in neither OpenAI shape.
        """
        schemas = [normalize_tool(tool, where=f"tools[{i}]") for i, tool in enumerate(tools)]
        if not schemas:
            return {}
        request = _newest_user_text(messages).strip()
        if not request:
            return {schema.name: 0.0 for schema in schemas}
        matrix = self._matrix(tuple(self._tool_text(schema) for schema in schemas))
        cosines = matrix @ self._query(request)
        return {schema.name: float(value) for schema, value in zip(schemas, cosines, strict=True)}

    def score(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]
    ) -> Mapping[str, float]:
        """Score every tool against the newest user message.

        Args:
            messages: The conversation, oldest first, in OpenAI message form.
            tools: The tools offered this turn, in either OpenAI shape.

        Returns:
            Tool name to the cosine similarity clipped to ``[0, 1]``, highest first.

        Raises:
            InvalidToolSchemaError: A tool is in neither OpenAI shape.
            ImportError: The ``embed`` extra is not installed.
        """
        raw = self.similarities(messages, tools)
        clipped = {name: min(1.0, max(0.0, value)) for name, value in raw.items()}
        return dict(sorted(clipped.items(), key=lambda item: item[1], reverse=True))
