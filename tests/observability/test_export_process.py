"""The exporting process: what the serving process hands it (no text unless the operator's flag
is on), and a child that is killed is counted, replaced, and costs no answer."""

from __future__ import annotations

import gc
import hashlib
import os
import pickle
import signal
import time
from types import MappingProxyType

from starlette.testclient import TestClient

from rag_contract.observability import redaction
from rag_contract.observability.export_process import EXPORTER_DIED, Packer, ProcessTracer, unpack
from rag_contract.observability.request import Observation, RequestFacts
from rag_contract.observability.settings import Settings
from rag_contract.observability.trace_queue import TraceRecord
from rag_contract.observability.tracing import span_plan
from tests.observability.apps import observed_app
from tests.observability.collector import collector

MARK = "zebracorn"
QUESTION = f"Does a {MARK} cache keep a 304?"
OBSERVATION = Observation(
    "grounded",
    "v1",
    QUESTION,
    "fixture",
    MappingProxyType({"retrieval": 1.5, "drafting": 0.5}),
    150.0,
    2.0,
    (f"a {MARK} claim", "another claim"),
    (f"a withdrawn {MARK} claim",),
    ("unsupported",),
    ("rfc9111#4.3.2", "rfc9110#15.4.5"),
    (f"The {MARK} title", "Another title"),
)
RECORD = TraceRecord(7, RequestFacts("/ask", "POST", 200, 0.01, 10**18, "10.0.0.1", OBSERVATION))


def test_without_the_text_flag_no_text_reaches_the_exporting_process():
    packed = Packer(include_text=False).pack(RECORD.trace_id, RECORD.facts)
    assert MARK.encode() not in pickle.dumps([packed])
    back = unpack(packed)
    assert back.question_sha256 == hashlib.sha256(QUESTION.encode()).hexdigest()
    o = back.facts.observation
    assert o is not None and (len(o.kept), len(o.withdrawn), len(o.passage_titles)) == (2, 1, 2)
    # what may leave is what a plan of the full record says: the counts, the digest, the rest
    hidden = span_plan(back.facts, "key", None, back.question_sha256).attributes
    full = span_plan(RECORD.facts, "key").attributes
    assert redaction.redact(hidden, False) == redaction.redact(full, False)


def test_with_the_text_flag_the_record_arrives_whole():
    assert unpack(Packer(include_text=True).pack(RECORD.trace_id, RECORD.facts)) == RECORD


def plain(value: object) -> bool:
    """Tuples of text and numbers all the way down: what the garbage collector stops tracking."""
    if isinstance(value, tuple):
        return all(plain(v) for v in value)
    return value is None or type(value) in (str, int, float, bool)


def test_a_queued_entry_is_plain_values_the_collector_stops_tracking():
    # A queue holds up to a batch of these for up to a second; objects it must track, held that
    # long, are moved up its generations and set off collections that walk the whole heap.
    for include_text in (False, True):
        entry = Packer(include_text).pack(RECORD.trace_id, RECORD.facts)
        assert plain(entry)
        for _ in range(4):  # a tuple is untracked once what it holds is: a pass per level of nesting
            gc.collect()
        assert not gc.is_tracked(entry)


def wait_for(condition, timeout_s: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def test_a_killed_exporter_is_counted_replaced_and_answers_are_unaffected(project, index, embedder):
    with collector() as c:
        settings = Settings(traces_endpoint=c.url, traces_timeout_s=2.0, metrics_port=9)
        o = observed_app(project, index, embedder, settings)
        tracer, failures = o.observer.tracer, o.observer.export_failures
        assert isinstance(tracer, ProcessTracer) and failures is not None
        with TestClient(o.app) as client:
            assert client.get("/answer/q11").status_code == 200
            assert tracer.flush()
            first = tracer.process.pid
            assert first is not None and first != os.getpid()
            os.kill(first, signal.SIGKILL)
            assert wait_for(lambda: failures.counts().get(EXPORTER_DIED) == 1)
            statuses = [client.get("/answer/q11").status_code for _ in range(3)]
            assert tracer.flush()  # exported by the process started in its place
            assert tracer.process.pid not in (None, first) and tracer.process.started == 2
    assert statuses == [200] * 3
    assert failures.counts() == {EXPORTER_DIED: 1}
    assert o.metric("rag_contract_trace_export_failures_total", error_type=EXPORTER_DIED) == 1
    assert len([s for s in c.spans() if not s.parent_span_id]) == 4  # the one before, the three after


def test_with_no_exporter_configured_no_process_is_started(project, index, embedder):
    o = observed_app(project, index, embedder, Settings(metrics_port=9, access_log=True))
    assert o.observer.tracer is None and o.observer.export_failures is None
