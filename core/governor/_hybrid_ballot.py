"""A ballot that weighs word evidence and meaning together: lexical and embedding scores fused.

Each tool scores ``w * lexical + (1 - w) * embedding``: the
:class:`~jevqueue.governor.LexicalBallot` is sharp when the request names the tool's
own words, the :class:`~jevqueue.governor.EmbeddingBallot` when it says the same
thing in other words. The weight, and the fusion itself, were chosen by measurement on
public function-calling data (``bench/routing.py``): the alternatives — other weights, a
second opinion that forces only when both ballots agree on the top tool, the minimum of
the two scores — and their figures are in ``docs/benchmarks.md``.

Requires the ``embed`` extra (``pip install "jevqueue[embed]"``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from jevqueue.errors import ConfigurationError
from jevqueue.governor._embedding_ballot import EmbeddingBallot
from jevqueue.governor._lexical_ballot import LexicalBallot
from jevqueue.governor._thresholds import Thresholds

__all__ = ["HybridBallot", "fuse"]

_DEFAULT_WEIGHT = 0.65


def fuse(
    lexical: Mapping[str, float], embedding: Mapping[str, float], weight: float
) -> dict[str, float]:
    """``weight * lexical + (1 - weight) * embedding`` per tool, highest first."""
    names = list(embedding) or list(lexical)
    fused = {
        name: min(1.0, weight * lexical.get(name, 0.0) + (1.0 - weight) * embedding.get(name, 0.0))
        for name in names
    }
    return dict(sorted(fused.items(), key=lambda item: item[1], reverse=True))


class HybridBallot:
    """Scores every tool by a weighted mean of the lexical and the embedding score.

    Args:
        lexical: The word-matching ballot; a new :class:`LexicalBallot` by default.
        embedding: The embedding ballot; a new :class:`EmbeddingBallot` (sharing the
            process's one loaded model) by default.
        weight: The lexical score's weight in ``[0, 1]``; the calibrated
            :attr:`thresholds` hold for the default only.

    Raises:
        ConfigurationError: ``weight`` is not a number in ``[0, 1]``.
        ImportError: On the first score, when the ``embed`` extra is not installed.

    Example:
        >>> from jevqueue import Governor, HybridBallot
        >>> governor = Governor(HybridBallot())  # its own calibrated thresholds
    """

    thresholds: ClassVar[Thresholds] = Thresholds(confident=0.49, margin=0.26, floor=0.06)
    """The thresholds calibrated for this ballot (``bench/routing.py``); a
    :class:`~jevqueue.governor.Governor` built with this ballot and no thresholds uses them."""

    def __init__(
        self,
        lexical: LexicalBallot | None = None,
        embedding: EmbeddingBallot | None = None,
        *,
        weight: float = _DEFAULT_WEIGHT,
    ) -> None:
        if isinstance(weight, bool) or not isinstance(weight, (int, float)):
            raise ConfigurationError(
                f"HybridBallot weight must be a number in [0, 1], got {weight!r}"
            )
        if not 0.0 <= weight <= 1.0:
            raise ConfigurationError(
                f"HybridBallot weight must lie in [0, 1], got {weight!r}: it is the lexical "
                "score's share of the fused score"
            )
        self._lexical = lexical if lexical is not None else LexicalBallot()
        self._embedding = embedding if embedding is not None else EmbeddingBallot()
        self._weight = float(weight)

    @property
    def weight(self) -> float:
        """The lexical score's weight."""
        return self._weight

    def score(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]
    ) -> Mapping[str, float]:
        """Score every tool against the newest user message.

        Args:
            messages: The conversation, oldest first, in OpenAI message form.
            tools: The tools offered this turn, in either OpenAI shape.

        Returns:
            Tool name to the fused score in ``[0, 1]``, highest first.

        Raises:
            InvalidToolSchemaError: A tool is in neither OpenAI shape, or two tools share
                a name.
            ImportError: The ``embed`` extra is not installed.
        """
        lexical = self._lexical.score(messages, tools)
        embedding = self._embedding.score(messages, tools)
        return fuse(lexical, embedding, self._weight)
