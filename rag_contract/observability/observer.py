"""The one thing the web layer calls after each request: ``Observer.observe(facts)``.

``build_observer(settings, ...)`` returns None when nothing is on, so the default service adds
no middleware and imports neither OpenTelemetry nor prometheus_client. Each part is imported
only when its setting is on. ``observe`` never raises: a broken observer is logged, and the
response (already sent) is not affected.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, TextIO

from rag_contract.observability.access_log import AccessLog
from rag_contract.observability.request import RequestFacts
from rag_contract.observability.settings import Settings

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from rag_contract.observability.export_process import ExportFailures
    from rag_contract.observability.metrics import Metrics

logger = logging.getLogger(__name__)


class Tracer(Protocol):
    def record(self, facts: RequestFacts) -> str | None: ...
    def flush(self, timeout_s: float = 10.0) -> bool: ...
    def close(self) -> None: ...


class Observer:
    """Traces, metrics and the access log of one process; any of them may be absent."""

    def __init__(
        self,
        *,
        served_version: Callable[[], str | None],
        tracer: Tracer | None = None,
        metrics: Metrics | None = None,
        access: AccessLog | None = None,
        export_failures: ExportFailures | None = None,
    ):
        self._served_version = served_version
        self.tracer = tracer
        self.metrics = metrics
        self._access = access
        self.export_failures = export_failures

    def observe(self, facts: RequestFacts) -> None:
        try:
            trace_id = None
            if self.tracer is not None:
                trace_id = self.tracer.record(facts)  # queued: built and exported by another process
            if self.metrics is not None:
                self.metrics.served(self._served_version())
                self.metrics.record(facts)
            if self._access is not None:
                self._access.write(facts, trace_id)
        except Exception:  # noqa: BLE001 - observing must never fail a request or the server
            logger.exception("observing a request failed")

    def started(self) -> None:
        """At startup: the served index version, before the first request."""
        if self.metrics is not None:
            self.metrics.served(self._served_version())

    def close(self) -> None:
        """At shutdown: spans still queued are exported (bounded by the exporter's timeout)."""
        if self.tracer is not None:
            self.tracer.close()


def build_observer(
    settings: Settings,
    served_version: Callable[[], str | None],
    *,
    metrics_registry: CollectorRegistry | None = None,
    access_stream: TextIO | None = None,
) -> Observer | None:
    """The observer ``settings`` ask for, or None when they ask for nothing.

    ``metrics_registry``: where metrics register (None when serving: the multiprocess
    collector reads every process's files). ``access_stream``: where access lines go (stdout).
    """
    if not settings.anything:
        return None
    metrics = None
    if settings.metrics:
        from rag_contract.observability.metrics import Metrics  # noqa: PLC0415 - prometheus_client only when on

        metrics = Metrics(metrics_registry)
    tracer = failures = None
    if settings.traces_endpoint is not None:
        from rag_contract.observability.export_process import (  # noqa: PLC0415 - starts a process: only when on
            ExportFailures,
            process_tracer,
        )

        failures = ExportFailures(metrics.export_failed if metrics is not None else None)
        tracer = process_tracer(
            settings.traces_endpoint,
            settings.traces_include_text,
            settings.traces_timeout_s,
            failures,
            settings.client_key_salt or os.urandom(32),
        )
    return Observer(
        served_version=served_version,
        tracer=tracer,
        metrics=metrics,
        access=AccessLog(access_stream) if settings.access_log else None,
        export_failures=failures,
    )
