"""AuditChain and AuditRecord: ids, hashes, any sink, failures that deny."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import jevqueue.audit as audit
import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st
from jevqueue.audit import (
    GENESIS_HASH,
    AuditChain,
    AuditRecord,
    AuditSink,
    decision_event,
)
from jevqueue.audit._record import HASHED_FIELDS, canonical_record_bytes
from jevqueue.errors import AuditWriteError, ConfigurationError
from jevqueue.policy import Action, Verdict, generic_registry
from jevqueue.testing.recording_audit import RecordingAuditSink

Event = Callable[..., dict[str, Any]]


def test_public_surface_is_pinned() -> None:
    assert set(audit.__all__) == {
        "GENESIS_HASH",
        "AuditChain",
        "AuditProblem",
        "AuditRecord",
        "AuditSink",
        "ChainedAuditLog",
        "JsonlAuditLog",
        "PostgresAuditLog",
        "SQLiteAuditLog",
        "VerificationReport",
        "decision_event",
        "export_audit_log",
        "verify_audit_log",
        "default_audit_log_path",
    }
    for name in audit.__all__:
        assert getattr(audit, name) is not None


def _valid_chain(events: list[dict[str, Any]]) -> bool:
    previous = GENESIS_HASH
    for data in events:
        record = AuditRecord.from_dict(data)
        if record.prev_hash != previous or record.computed_hash() != record.record_hash:
            return False
        previous = record.record_hash
    return True


def test_records_are_chained_and_identical_actions_get_distinct_ids(event: Event) -> None:
    sink = RecordingAuditSink()
    chain = AuditChain(sink)
    first, second = chain.append(event()), chain.append(event())
    assert first.decision_id != second.decision_id
    assert first.prev_hash == GENESIS_HASH
    assert second.prev_hash == first.record_hash
    assert chain.head == second.record_hash
    assert [e["decision_id"] for e in sink.events] == [first.decision_id, second.decision_id]
    assert _valid_chain(sink.events)
    assert sink.results == ["ALLOW", "ALLOW"]


def test_record_shape_is_a_decision_log(event: Event) -> None:
    record = AuditChain(RecordingAuditSink()).append(event(result="DENY"))
    data = record.to_dict()
    assert set(data) == {
        "decision_id",
        "timestamp",
        "action_digest",
        "tool",
        "result",
        "reasons",
        "obligations",
        "rule_ids",
        "policy_revision",
        "task_id",
        "actor_id",
        "environment",
        "workspace",
        "git_sha",
        "allowed",
        "prev_hash",
        "record_hash",
    }
    assert data["timestamp"].endswith("Z")
    assert data["result"] == "DENY"
    assert data["allowed"] is False
    assert AuditRecord.from_dict(data) == record


def test_from_dict_refuses_keys_that_are_not_fields(event: Event) -> None:
    data: dict[str, Any] = AuditChain(RecordingAuditSink()).append(event()).to_dict()
    data["approved_by"] = "ciso@example.com"
    with pytest.raises(ValueError, match="'approved_by'") as caught:
        AuditRecord.from_dict(data)
    assert "ciso@example.com" not in str(caught.value)


def test_the_hash_covers_every_field(event: Event) -> None:
    record = AuditChain(RecordingAuditSink()).append(event())
    for name in HASHED_FIELDS:
        data = record.to_dict()
        value = data[name]
        if isinstance(value, bool):
            data[name] = not value
        elif isinstance(value, list):
            data[name] = [*value, "x"]
        else:
            data[name] = value + "x"
        assert AuditRecord.from_dict(data).computed_hash() != record.record_hash, name


_text = st.text(st.characters(exclude_categories=("Cs",)), max_size=30)


@settings(max_examples=200, deadline=None)
@given(
    texts=st.fixed_dictionaries({name: _text for name in HASHED_FIELDS[:12]}),
    allowed=st.booleans(),
    lists=st.lists(_text, max_size=4),
)
def test_canonical_bytes_are_exactly_rfc8785(
    texts: dict[str, str], lists: list[str], allowed: bool
) -> None:
    fields: dict[str, Any] = {**texts, "reasons": lists, "obligations": lists[:1]}
    fields.update(rule_ids=[], allowed=allowed)
    assert canonical_record_bytes(fields) == rfc8785.dumps(
        {name: fields[name] for name in HASHED_FIELDS}
    )


def test_the_seed_logger_shape_works() -> None:
    class AuditCollector:
        def __init__(self) -> None:
            self.events: list[Any] = []

        def log(self, event: Any) -> None:
            self.events.append(event)

    collector = AuditCollector()
    chain = AuditChain(collector)
    chain.append({"result": "ALLOW"})
    chain.log({"result": "DENY"})
    assert [e["result"] for e in collector.events] == ["ALLOW", "DENY"]
    assert _valid_chain(collector.events)


def test_wrapping_a_chain_reuses_its_sink() -> None:
    sink = RecordingAuditSink()
    assert AuditChain(AuditChain(sink)).sink is sink
    assert isinstance(sink, AuditSink)


def test_a_sink_without_append_or_log_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="append"):
        AuditChain(object())


def test_a_failing_sink_raises_audit_write_error_and_the_chain_does_not_move(
    event: Event,
) -> None:
    sink = RecordingAuditSink()
    chain = AuditChain(sink)
    chain.append(event())
    head = chain.head
    sink.fail_with(OSError("disk full"))
    with pytest.raises(AuditWriteError, match="denied"):
        chain.append(event())
    assert chain.head == head
    sink.fail_with(None)
    chain.append(event())
    assert len(sink) == 2
    assert _valid_chain(sink.events)


@pytest.mark.parametrize(
    "bad",
    [
        {"reasons": ["ok"]},
        {"result": 3},
        {"result": "ALLOW", "reasons": "a string"},
        {"result": "ALLOW", "tool": object()},
        {"result": "ALLOW", "reasons": ["\ud800 lone surrogate"]},
        "not a mapping",
    ],
    ids=["no-result", "int-result", "str-reasons", "object-tool", "surrogate", "str-event"],
)
def test_malformed_events_raise_audit_write_error(bad: Any) -> None:
    sink = RecordingAuditSink()
    with pytest.raises(AuditWriteError):
        AuditChain(sink).append(bad)
    assert len(sink) == 0


def test_threads_appending_at_once_form_one_chain(event: Event) -> None:
    sink = RecordingAuditSink()
    chain = AuditChain(sink)

    def work() -> None:
        for n in range(100):
            chain.append(event(n))

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(sink) == 800
    assert _valid_chain(sink.events)
    assert len({e["decision_id"] for e in sink.events}) == 800


def test_decision_event_takes_everything_from_verdict_and_action() -> None:
    action = Action.build(
        generic_registry(),
        "run_command",
        {"CommandLine": "make", "Cwd": "/workspace/p"},
        {
            "task_id": "t-1",
            "actor_id": "agent-7",
            "workspace": "/workspace/p",
            "git_sha": "abcdef0",
            "environment": "ci",
        },
    )
    verdict = Verdict.allow_with_obligations(["explicit_approval"], "shell", rule_ids=("r",))
    record = AuditChain(RecordingAuditSink()).record_decision(verdict, action)
    assert (record.tool, record.result) == ("run_command", "ALLOW_WITH_OBLIGATIONS")
    assert record.action_digest == action.digest
    assert (record.task_id, record.actor_id, record.environment) == ("t-1", "agent-7", "ci")
    assert record.obligations == ("explicit_approval",)
    assert record.rule_ids == ("r",)
    assert (record.workspace, record.git_sha, record.allowed) == ("/workspace/p", "abcdef0", False)
    assert decision_event(verdict)["tool"] == ""


class _Collector:
    """Seed 002's AuditCollector: a plain ``log(event)`` sink."""

    def __init__(self) -> None:
        self.events: list[Any] = []

    def log(self, event: Any) -> None:
        self.events.append(event)


_TEXT = st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=12)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["ALLOW", "DENY", "ALLOW_WITH_OBLIGATIONS"]),
            st.booleans(),
            st.lists(_TEXT, max_size=3),
            st.lists(_TEXT, max_size=2).map(tuple),
            _TEXT,
        ),
        min_size=1,
        max_size=4,
    )
)
def test_the_in_memory_field_route_gives_the_sink_what_append_gives_it(
    decisions: list[tuple[str, bool, list[str], tuple[str, ...], str]],
) -> None:
    fast_sink, slow_sink = _Collector(), _Collector()
    fast, slow = AuditChain(fast_sink), AuditChain(slow_sink)
    appender = fast._decision_appender()
    assert appender is not None
    for index, (result, allowed, reasons, obligations, text) in enumerate(decisions):
        fields = {
            "decision_id": f"id-{index}",
            "timestamp": "2026-01-02T03:04:05.000006Z",
            "action_digest": "sha256:" + "ab" * 32,
            "tool": text or "write_to_file",
            "result": result,
            "allowed": allowed,
            "reasons": reasons,
            "obligations": obligations,
            "rule_ids": ("jevqueue.workspace",),
            "policy_revision": "sha256:" + "cd" * 32,
            "task_id": "task-42",
            "actor_id": text,
            "environment": "local",
            "workspace": "/workspace/project",
            "git_sha": "0" * 40,
        }
        appender(*fields.values())
        slow.append(fields)
    assert fast_sink.events == slow_sink.events
    assert [list(event) for event in fast_sink.events] == [
        list(event) for event in slow_sink.events
    ]  # same keys, same order
    assert fast.head == slow.head == fast_sink.events[-1]["record_hash"]
    previous = GENESIS_HASH
    for event in fast_sink.events:
        record = AuditRecord.from_dict(event)
        assert record.prev_hash == previous and record.computed_hash() == record.record_hash
        previous = record.record_hash


def test_the_in_memory_field_route_takes_append_for_unusual_fields() -> None:
    sink = _Collector()
    chain = AuditChain(sink)
    appender = chain._decision_appender()
    assert appender is not None
    # a datetime-shaped timestamp that is not in the record's form: append normalises it
    appender(
        "id-1", "2026-01-02T03:04:05.000006+00:00", "sha256:" + "ab" * 32, "t", "ALLOW",
        True, [], [], [], "", "a", "b", "local", "/w", "",
    )  # fmt: skip
    assert sink.events[0]["timestamp"] == "2026-01-02T03:04:05.000006Z"
    with pytest.raises(AuditWriteError):
        appender(
            "id-2", "2026-01-02T03:04:05.000006Z", "d", "t", "", True, [], [], [], "", "a",
            "b", "local", "/w", "",
        )  # fmt: skip
    assert len(sink.events) == 1


def test_a_failing_sink_on_the_in_memory_field_route_denies() -> None:
    class Broken:
        def log(self, event: Any) -> None:
            raise OSError("disk full")

    chain = AuditChain(Broken())
    appender = chain._decision_appender()
    assert appender is not None
    with pytest.raises(AuditWriteError, match="Broken failed"):
        appender(
            "id-1", "2026-01-02T03:04:05.000006Z", "d", "t", "ALLOW", True, [], [], [], "",
            "a", "b", "local", "/w", "",
        )  # fmt: skip
    assert chain.head == GENESIS_HASH
