"""The default ballot: BM25-style word matching of the user's request against tool schemas.

Pure Python, no dependencies. A tool's text is its name (split on ``snake_case``,
``camelCase`` and dots), its description, and the names and descriptions of its
parameters. Words are lowercased, lightly stemmed, and stripped of function words and of
the request verbs every tool shares ("get", "find", "calculate"); in a toolset of three or
more, a word counts less the more tools mention it (an inverse document frequency).

A score answers "is this the tool the request asks for?" on an absolute scale, so that the
governor's thresholds mean the same with one tool as with a hundred:

* mostly, how much of the tool's *own* name and description the request mentions
  (calibrated against the tool's self-match: a request that says everything the tool's
  name and description say scores 1, whatever else it says);
* a little, how much of the request the tool's whole schema explains, saturated
  BM25-style by how often and where (name over description over parameters), so that any
  shared word lifts a score above 0 and a tool that shares none scores exactly 0.

Earlier user messages count a little: when the newest message takes up a word of the (up
to three) user messages before it, the tools those speak to are lifted to at most 0.05, so
that a terse follow-up is not taken for a request no tool fits. Only the newest message
can make a tool confidently best.

Two tools that both fit score alike, so their lead is small and the governor asks rather
than forces. The choice of this score, and the default thresholds, were measured on public
function-calling data: see ``bench/routing.py`` and ``docs/benchmarks.md``.

The index of a toolset is cached by content: a toolset equal to a recent one (the same
list, or one rebuilt with equal content) is recognised by one comparison, and any change —
a description, a parameter — rebuilds the index. The latest result is kept too: the steps
of an agent loop score the same request against the same toolset after every tool result.
"""

from __future__ import annotations

import copy
import math
import re
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jevqueue.errors import InvalidToolSchemaError
from jevqueue.governor._messages import message_text
from jevqueue.governor._tool_schema import normalize_tool

__all__ = ["LexicalBallot"]

_WORD = re.compile(r"[A-Za-z][a-z]+|[A-Z]+(?![a-z])|[a-z]+|[0-9]+")

# Function words, and the request verbs every tool and every request share ("get",
# "calculate", "find", ...): they carry no evidence for one tool over another.
_STOPWORD_TEXT = """
    a about above after again against all also am an and any are as at be because been
    before being below between both but by can could did do does doing down during each
    few for from further had has have having he her here hers herself him himself his how
    i if in into is it its itself just let me more most my myself no nor not now of off on
    once only or other our ours ourselves out over own same she should so some such than
    that the their theirs them themselves then there these they this those through to too
    under until up very was we were what when where which while who whom why will with
    would you your yours yourself yourselves
    please could kindly want need like would help tell show give get find fetch retrieve
    provide calculate compute determine know using use used given specific specified
    certain particular based via one two new current also e g eg i e ie etc
"""
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())

# How much a word says about the tool, by where the tool mentions it.
_FIELD_WEIGHTS = {"name": 3.0, "description": 1.0, "param_name": 1.0, "param_description": 0.5}
_K1 = 1.2
_B = 0.5
# The weight of "how much of the tool's own text the request mentions" in a score; the
# rest is "how much of the request the tool explains".
_OWN_TEXT = 0.9
# Earlier user messages of the conversation lift a tool's score to at most this much (when
# the newest message gives it less), so that a follow-up such as "and the other one too"
# is not taken for a request no tool fits. Far below any threshold that forces a tool:
# only the newest message can make one confidently best.
_CONTEXT = 0.05
# The earlier request share (see _context_lift) that earns the whole lift.
_CONTEXT_FULL = 0.25
# How many earlier user messages count as context.
_CONTEXT_MESSAGES = 3
_CACHE_SIZE = 16
_RECENT_SIZE = 2


def _stem(word: str) -> str:
    # A light suffix stripper: enough to match "files"/"file", "sorted"/"sort",
    # "booking"/"book", applied identically to requests and schemas.
    if len(word) <= 3:
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("sses", "xes", "ches", "shes")):
        return word[:-2]
    if word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    if word.endswith("ing") and len(word) > 5:
        word = word[:-3]
    elif word.endswith("ed") and len(word) > 4:
        word = word[:-2]
    if len(word) > 4 and word[-1] == word[-2] and word[-1] not in "lsz":
        word = word[:-1]
    if word.endswith("e") and len(word) > 4:
        word = word[:-1]
    return word


# Word as written -> its term ("" for a stopword). Requests repeat words, and this runs on
# every turn; the cache is bounded by clearing it when it grows past _WORD_CACHE_SIZE.
_word_terms: dict[str, str] = {}
_WORD_CACHE_SIZE = 50_000


def _term(raw: str) -> str:
    word = raw.lower()
    term = "" if len(word) < 2 or word in _STOPWORDS or word.isdigit() else _stem(word)
    if len(_word_terms) >= _WORD_CACHE_SIZE:
        _word_terms.clear()
    _word_terms[raw] = term
    return term


def _terms(text: str) -> list[str]:
    """Content terms of ``text``: split words and identifiers, lowercase, drop stopwords."""
    out: list[str] = []
    known = _word_terms
    for raw in _WORD.findall(text):
        term = known.get(raw)
        if term is None:
            term = _term(raw)
        if term:
            out.append(term)
    return out


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


# What the index reads from one tool: (name, description, ((param, param description), ...)).
_ToolKey = tuple[str, str, tuple[tuple[str, str], ...]]


def _tool_key(tool: Mapping[str, Any], position: int) -> _ToolKey:
    """The fields of one tool the index depends on, from either OpenAI tool shape."""
    # Fast path for the plain dicts hosts build (this runs for every tool on every turn);
    # anything unusual takes the checked path, which raises on a malformed tool.
    if type(tool) is dict:
        inner = tool.get("function")
        spec = tool if inner is None else inner
        if type(spec) is dict and (inner is None or tool.get("type", "function") == "function"):
            name = spec.get("name")
            description = spec.get("description", "")
            if type(name) is str and name and type(description) is str:
                parameters = spec.get("parameters")
                if parameters is None:
                    return (name, description, ())
                if type(parameters) is dict:
                    properties = parameters.get("properties")
                    if type(properties) is dict:
                        return (name, description, _params(properties))
    schema = normalize_tool(tool, where=f"tools[{position}]")
    properties = schema.parameters.get("properties")
    params = _params(properties) if isinstance(properties, Mapping) else ()
    return (schema.name, schema.description, params)


def _params(properties: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    return tuple(
        [
            (pname, text if type(text := pschema.get("description")) is str else "")
            if type(pschema) is dict and type(pname) is str
            else (
                str(pname),
                _text(pschema.get("description")) if isinstance(pschema, Mapping) else "",
            )
            for pname, pschema in properties.items()
        ]
    )


@dataclass(frozen=True)
class _Index:
    names: tuple[str, ...]
    # term -> ((tool position, request-side share, name share, name+description share), ...)
    postings: Mapping[str, tuple[tuple[int, float, float, float], ...]]
    # term -> weight in (0, 1]: lower when many tools of the set mention the term
    weights: Mapping[str, float]


def _build_index(keys: Sequence[_ToolKey]) -> _Index:
    docs: list[dict[str, float]] = []
    names: list[frozenset[str]] = []
    cores: list[frozenset[str]] = []
    for name, description, params in keys:
        tf: dict[str, float] = {}
        fields: list[tuple[str, float]] = [
            (name, _FIELD_WEIGHTS["name"]),
            (description, _FIELD_WEIGHTS["description"]),
        ]
        for pname, pdesc in params:
            fields.append((pname, _FIELD_WEIGHTS["param_name"]))
            fields.append((_text(pdesc), _FIELD_WEIGHTS["param_description"]))
        for text, weight in fields:
            for term in _terms(text):
                tf[term] = tf.get(term, 0.0) + weight
        docs.append(tf)
        name_terms = frozenset(_terms(name))
        names.append(name_terms)
        cores.append(name_terms | frozenset(_terms(description)))
    n = len(docs)
    document_frequency: dict[str, int] = {}
    for tf in docs:
        for term in tf:
            document_frequency[term] = document_frequency.get(term, 0) + 1
    # With one or two tools every term is as telling as any other; in larger sets a term
    # most tools share (a common preamble, "file" in a file system) says little about
    # which tool the request wants.
    weights = {
        term: 1.0 if n <= 2 else math.log1p(n / df) / math.log1p(n)
        for term, df in document_frequency.items()
    }
    lengths = [sum(tf.values()) for tf in docs]
    avg = (sum(lengths) / n) if n else 1.0
    postings: dict[str, list[tuple[int, float, float, float]]] = {}
    for position, tf in enumerate(docs):
        norm = _K1 * (1.0 - _B + _B * (lengths[position] / avg if avg else 1.0))
        name_total = sum(weights[term] for term in names[position])
        core_total = sum(weights[term] for term in cores[position])
        for term, freq in tf.items():
            weight = weights[term]
            # BM25 saturation: a term named once in the tool's name gives ~0.7, once in
            # its description ~0.45, absent 0.
            request_side = weight * freq / (freq + norm)
            core_share = weight / core_total if term in cores[position] and core_total else 0.0
            # A name with no content words ("get") defers to the description.
            if not name_total:
                name_share = core_share
            else:
                name_share = weight / name_total if term in names[position] else 0.0
            postings.setdefault(term, []).append((position, request_side, name_share, core_share))
    names_in_order = tuple(key[0] for key in keys)
    if len(set(names_in_order)) != len(names_in_order):
        duplicate = next(name for name in names_in_order if names_in_order.count(name) > 1)
        raise InvalidToolSchemaError(
            f"two tools are named {duplicate!r}: give every tool a unique name so that "
            "forcing one is unambiguous"
        )
    return _Index(
        names=names_in_order,
        postings={term: tuple(plist) for term, plist in postings.items()},
        weights=weights,
    )


def _user_texts(messages: Sequence[Mapping[str, Any]]) -> tuple[str, tuple[str, ...]]:
    """The newest user message's text, and the texts of up to ``_CONTEXT_MESSAGES`` user
    messages before it, newest first."""
    newest: str | None = None
    earlier: list[str] = []
    for message in reversed(messages):
        if message.get("role") != "user":
            continue
        if newest is None:
            newest = message_text(message)
            continue
        earlier.append(message_text(message))
        if len(earlier) >= _CONTEXT_MESSAGES:
            break
    return newest or "", tuple(earlier)


def _by_score(item: tuple[str, float]) -> float:
    return item[1]


class LexicalBallot:
    """Scores every tool by how well the newest user message and the tool's schema match.

    A score in [0, 1] combines two BM25-style coverages, with terms weighted by how few
    tools of the set mention them:

    * mostly (``0.9``) how much of the tool's *own* text the request mentions: the
      geometric mean of the share of the tool's name words in the request and the share
      of its name and description words in it. Calibrated against the tool's self-match,
      this is 1 when the request says everything the tool's name and description say,
      whatever the request's length, so a lone tool scores as it would among many.
    * a little (``0.1``) how much of the request the tool's schema explains (name,
      description, parameter names and descriptions, saturated by how often and where),
      so that a tool sharing any word with the request scores above 0 and a tool sharing
      none scores exactly 0.

    A request with no content words, or no user message, scores 0 for every tool.

    A request that takes up a word of the (up to three) user messages before it is a
    follow-up: each tool those messages speak to scores at least its share of them, scaled
    to at most ``0.05`` — enough to keep the follow-up out of ``prose`` under a raised
    floor, far too little to force a tool.

    Example:
        >>> ballot = LexicalBallot()
        >>> tools = [{"name": "read_file", "description": "Read a text file."}]
        >>> scores = ballot.score([{"role": "user", "content": "read the file"}], tools)
        >>> 0.0 < scores["read_file"] <= 1.0
        True
    """

    def __init__(self) -> None:
        self._indexes: OrderedDict[tuple[_ToolKey, ...], _Index] = OrderedDict()
        # Copies of the toolsets most recently indexed: an equal toolset (the same one, or
        # one the host rebuilt with the same content) is recognised by one comparison
        # that runs in C, without re-reading every tool field by field.
        self._recent: tuple[tuple[list[Any], _Index], ...] = ()
        self._last_query: tuple[str, tuple[str, ...]] = ("", ())
        self._last_context: tuple[tuple[str, ...], frozenset[str]] = ((), frozenset())
        # The latest result, by index, request and context: an agent loop scores the same
        # request against the same toolset again after every tool result.
        self._last_result: tuple[_Index | None, str, tuple[str, ...], dict[str, float]] = (
            None,
            "",
            (),
            {},
        )
        # One ballot may serve concurrent turns: the caches change only under this lock,
        # and the lock-free reads see whole tuples.
        self._lock = threading.Lock()

    def _index_for(self, tools: Sequence[Mapping[str, Any]]) -> _Index:
        """The (cached) index of ``tools``.

        Raises:
            InvalidToolSchemaError: A tool is in neither OpenAI shape, or two tools share
                a name.
        """
        as_list = tools if type(tools) is list else list(tools)
        for recent, cached in self._recent:
            if recent == as_list:
                return cached
        key = tuple(_tool_key(tool, position) for position, tool in enumerate(as_list))
        with self._lock:
            index = self._indexes.get(key)
            if index is not None:
                self._indexes.move_to_end(key)
                return index
        index = _build_index(key)
        snapshot: list[Any] | None
        try:
            snapshot = copy.deepcopy(as_list)
        except Exception:  # a toolset that cannot be copied is read field by field each turn
            snapshot = None
        with self._lock:
            self._indexes[key] = index
            if len(self._indexes) > _CACHE_SIZE:
                self._indexes.popitem(last=False)
            if snapshot is not None:
                self._recent = ((snapshot, index), *self._recent[: _RECENT_SIZE - 1])
        return index

    def _query_terms(self, text: str) -> tuple[str, ...]:
        last_text, last_terms = self._last_query
        if text == last_text:
            return last_terms
        terms = tuple(dict.fromkeys(_terms(text)))
        self._last_query = (text, terms)
        return terms

    def _context_terms(self, texts: tuple[str, ...]) -> frozenset[str]:
        last_texts, last_terms = self._last_context
        if texts == last_texts:
            return last_terms
        terms = frozenset(term for text in texts for term in _terms(text))
        self._last_context = (texts, terms)
        return terms

    @staticmethod
    def _context_lift(terms: frozenset[str], index: _Index, values: dict[int, float]) -> None:
        """Raise to the context lift every tool the earlier user messages speak to.

        A tool's lift is ``_CONTEXT`` times the share of the earlier requests' words the
        tool explains (saturated BM25-style as on the request side), reached in full at a
        share of ``_CONTEXT_FULL``; it replaces the tool's score only when larger.
        """
        postings = index.postings
        weights = index.weights
        explained: dict[int, float] = {}
        total = 0.0
        for term in terms:
            plist = postings.get(term)
            if plist is None:
                total += 1.0
                continue
            total += weights[term]
            for position, request_side, _name_share, _core_share in plist:
                explained[position] = explained.get(position, 0.0) + request_side
        for position, share in explained.items():
            lift = _CONTEXT * min(1.0, share / (total * _CONTEXT_FULL))
            if lift > values.get(position, 0.0):
                values[position] = lift

    def score(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]
    ) -> Mapping[str, float]:
        """Score every tool against the newest user message.

        Args:
            messages: The conversation, oldest first, in OpenAI message form.
            tools: The tools offered this turn, in either OpenAI shape.

        Returns:
            Tool name to a score in [0, 1], highest first (ties in toolset order).

        Raises:
            InvalidToolSchemaError: A tool is in neither OpenAI shape, or two tools share
                a name.
        """
        return dict(self._ranked(messages, tools)[1])

    def _ranked(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]
    ) -> tuple[tuple[str, ...], dict[str, float]]:
        """The toolset's names in order, and :meth:`score`'s result: a dict holding every
        one of them, highest first, each a float in [0, 1]. The governor relies on that and
        skips checking it again. The dict is shared with later calls that score the same
        request against the same toolset (the steps of an agent loop after each tool
        result): read it, never change it.

        Raises:
            InvalidToolSchemaError: See :meth:`score`.
        """
        index = self._index_for(tools)
        names = index.names
        if not names:
            return names, {}
        newest, earlier = _user_texts(messages)
        last_index, last_newest, last_earlier, last_result = self._last_result
        if last_index is index and last_newest == newest and last_earlier == earlier:
            return names, last_result
        # position -> [request side, name share, name+description share]
        touched: dict[int, list[float]] = {}
        total = 0.0
        postings = index.postings
        weights = index.weights
        for term in self._query_terms(newest):
            plist = postings.get(term)
            if plist is None:
                total += 1.0
                continue
            total += weights[term]
            for position, request_side, name_share, core_share in plist:
                sums = touched.get(position)
                if sums is None:
                    touched[position] = [request_side, name_share, core_share]
                else:
                    sums[0] += request_side
                    sums[1] += name_share
                    sums[2] += core_share
        values: dict[int, float] = {}
        if touched:
            request_weight = (1.0 - _OWN_TEXT) / total
            for position, (request, named, described) in touched.items():
                own = math.sqrt(
                    (named if named < 1.0 else 1.0) * (described if described < 1.0 else 1.0)
                )
                value = _OWN_TEXT * own + request_weight * request
                values[position] = value if value < 1.0 else 1.0
        if earlier:
            context = self._context_terms(earlier)
            # Only a message that takes up a word of the earlier requests continues them;
            # one that shares no word with them (nor with any tool) opens a new topic.
            if not context.isdisjoint(self._query_terms(newest)):
                self._context_lift(context, index, values)
        if not values:
            result = dict.fromkeys(names, 0.0)
        else:
            scores = {names[position]: values[position] for position in sorted(values)}
            # sorted() is stable: tied tools keep their toolset order.
            result = dict(sorted(scores.items(), key=_by_score, reverse=True))
            if len(result) < len(names):
                for name in names:
                    if name not in result:
                        result[name] = 0.0
        self._last_result = (index, newest, earlier, result)
        return names, result
