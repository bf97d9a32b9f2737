"""The governor: on every agent turn, one of nine paths — above all which one tool to force.

* :class:`Governor` decides (:meth:`Governor.decide`) and acts (:meth:`Governor.step`) on a
  :class:`~jevqueue.host.Host`, recording a :class:`Decision` whose :class:`Path` is one of
  the nine;
* ballots (:class:`Ballot`, :class:`LexicalBallot`) score the tools against the
  conversation and :class:`Thresholds` turn the scores into a path;
* static tool payloads and risk rules are the two ways to route a turn without the model;
* :mod:`messages <jevqueue.governor._messages>` and :mod:`tool schemas
  <jevqueue.governor._tool_schema>` read a host's conversation and tools in OpenAI form.

Names are imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jevqueue._lazy import lazy_getattr

if TYPE_CHECKING:  # pragma: no cover
    from jevqueue.governor._argument_sufficiency import (
        missing_arguments,
        missing_question,
    )
    from jevqueue.governor._ballot import (
        Ballot,
    )
    from jevqueue.governor._calibration import (
        Fit,
        Observation,
        coverage_curve,
        fit_thresholds,
        wilson,
    )
    from jevqueue.governor._decision import (
        Decision,
    )
    from jevqueue.governor._embedding_ballot import (
        EmbeddingBallot,
        tool_text,
    )
    from jevqueue.governor._governor import (
        PROSE_DIRECTIVE,
        Governor,
        tool_directive,
    )
    from jevqueue.governor._hybrid_ballot import (
        HybridBallot,
        fuse,
    )
    from jevqueue.governor._lexical_ballot import (
        LexicalBallot,
    )
    from jevqueue.governor._messages import (
        DIRECTIVE_ROLE,
        TOOL_RESULT_ROLES,
        follows_tool_result,
        is_user_turn,
        message_text,
        newest_role,
        newest_tool_result_text,
        newest_user_text,
        with_directive,
    )
    from jevqueue.governor._path import (
        Path,
    )
    from jevqueue.governor._policy_probe import (
        PolicyProbe,
    )
    from jevqueue.governor._risk_rules import (
        DESTRUCTIVE_WORDS,
        INJECTION_PATTERNS,
        RiskRule,
        default_risk_rules,
        destructive_intent,
        injected_instructions,
    )
    from jevqueue.governor._sentence_encoder import (
        EMBED_INSTALL,
        MODEL_ID,
        SentenceEncoder,
        shared_encoder,
    )
    from jevqueue.governor._static_tools import (
        StaticPayload,
        check_static_tools,
        payload_problem,
        plain_arguments,
        resolve_payload,
    )
    from jevqueue.governor._thresholds import (
        Thresholds,
    )
    from jevqueue.governor._tool_schema import (
        EMPTY_PARAMETERS,
        ToolSchema,
        normalize_tool,
        normalize_tools,
        tool_names,
    )
    from jevqueue.governor._turn_recorder import (
        TurnRecorder,
        observations,
        read_records,
    )

_EXPORTS: dict[str, str] = {
    "missing_arguments": "jevqueue.governor._argument_sufficiency",
    "missing_question": "jevqueue.governor._argument_sufficiency",
    "Ballot": "jevqueue.governor._ballot",
    "Fit": "jevqueue.governor._calibration",
    "Observation": "jevqueue.governor._calibration",
    "coverage_curve": "jevqueue.governor._calibration",
    "fit_thresholds": "jevqueue.governor._calibration",
    "wilson": "jevqueue.governor._calibration",
    "Decision": "jevqueue.governor._decision",
    "EmbeddingBallot": "jevqueue.governor._embedding_ballot",
    "tool_text": "jevqueue.governor._embedding_ballot",
    "PROSE_DIRECTIVE": "jevqueue.governor._governor",
    "Governor": "jevqueue.governor._governor",
    "tool_directive": "jevqueue.governor._governor",
    "HybridBallot": "jevqueue.governor._hybrid_ballot",
    "fuse": "jevqueue.governor._hybrid_ballot",
    "LexicalBallot": "jevqueue.governor._lexical_ballot",
    "DIRECTIVE_ROLE": "jevqueue.governor._messages",
    "TOOL_RESULT_ROLES": "jevqueue.governor._messages",
    "follows_tool_result": "jevqueue.governor._messages",
    "is_user_turn": "jevqueue.governor._messages",
    "message_text": "jevqueue.governor._messages",
    "newest_role": "jevqueue.governor._messages",
    "newest_tool_result_text": "jevqueue.governor._messages",
    "newest_user_text": "jevqueue.governor._messages",
    "with_directive": "jevqueue.governor._messages",
    "Path": "jevqueue.governor._path",
    "PolicyProbe": "jevqueue.governor._policy_probe",
    "DESTRUCTIVE_WORDS": "jevqueue.governor._risk_rules",
    "INJECTION_PATTERNS": "jevqueue.governor._risk_rules",
    "RiskRule": "jevqueue.governor._risk_rules",
    "default_risk_rules": "jevqueue.governor._risk_rules",
    "destructive_intent": "jevqueue.governor._risk_rules",
    "injected_instructions": "jevqueue.governor._risk_rules",
    "EMBED_INSTALL": "jevqueue.governor._sentence_encoder",
    "MODEL_ID": "jevqueue.governor._sentence_encoder",
    "SentenceEncoder": "jevqueue.governor._sentence_encoder",
    "shared_encoder": "jevqueue.governor._sentence_encoder",
    "StaticPayload": "jevqueue.governor._static_tools",
    "check_static_tools": "jevqueue.governor._static_tools",
    "payload_problem": "jevqueue.governor._static_tools",
    "plain_arguments": "jevqueue.governor._static_tools",
    "resolve_payload": "jevqueue.governor._static_tools",
    "Thresholds": "jevqueue.governor._thresholds",
    "EMPTY_PARAMETERS": "jevqueue.governor._tool_schema",
    "ToolSchema": "jevqueue.governor._tool_schema",
    "normalize_tool": "jevqueue.governor._tool_schema",
    "normalize_tools": "jevqueue.governor._tool_schema",
    "tool_names": "jevqueue.governor._tool_schema",
    "TurnRecorder": "jevqueue.governor._turn_recorder",
    "observations": "jevqueue.governor._turn_recorder",
    "read_records": "jevqueue.governor._turn_recorder",
}

__all__ = [
    "DESTRUCTIVE_WORDS",
    "DIRECTIVE_ROLE",
    "EMBED_INSTALL",
    "EMPTY_PARAMETERS",
    "INJECTION_PATTERNS",
    "MODEL_ID",
    "PROSE_DIRECTIVE",
    "TOOL_RESULT_ROLES",
    "Ballot",
    "Decision",
    "EmbeddingBallot",
    "Fit",
    "Governor",
    "HybridBallot",
    "LexicalBallot",
    "Observation",
    "Path",
    "PolicyProbe",
    "RiskRule",
    "SentenceEncoder",
    "StaticPayload",
    "Thresholds",
    "ToolSchema",
    "TurnRecorder",
    "check_static_tools",
    "coverage_curve",
    "default_risk_rules",
    "destructive_intent",
    "fit_thresholds",
    "follows_tool_result",
    "fuse",
    "injected_instructions",
    "is_user_turn",
    "message_text",
    "missing_arguments",
    "missing_question",
    "newest_role",
    "newest_tool_result_text",
    "newest_user_text",
    "normalize_tool",
    "normalize_tools",
    "observations",
    "payload_problem",
    "plain_arguments",
    "read_records",
    "resolve_payload",
    "shared_encoder",
    "tool_directive",
    "tool_names",
    "tool_text",
    "wilson",
    "with_directive",
]

__getattr__ = lazy_getattr(__name__, _EXPORTS, globals())


def __dir__() -> list[str]:
    return __all__
