"""The served app with an observer the test can read: metrics in a registry of its own, the
access log in a buffer."""

from __future__ import annotations

import io
from dataclasses import dataclass

from prometheus_client import CollectorRegistry
from starlette.applications import Starlette

from rag_contract.index.registry import Registry
from rag_contract.observability.observer import Observer, build_observer
from rag_contract.observability.settings import Settings
from rag_contract.web.serving import served_version
from tests.support.apps import make_app
from tests.support.clocks import tick_clock


@dataclass
class Observed:
    app: Starlette
    observer: Observer
    registry: CollectorRegistry
    access: io.StringIO

    def metric(self, name: str, **labels: str) -> float:
        return self.registry.get_sample_value(name, labels) or 0.0

    def access_lines(self) -> list[str]:
        return self.access.getvalue().splitlines()


def observed_app(project, index, embedder, settings: Settings, **make) -> Observed:
    registry = Registry(index)
    metrics = CollectorRegistry()
    access = io.StringIO()
    observer = build_observer(settings, served_version(registry), metrics_registry=metrics, access_stream=access)
    assert observer is not None
    make.setdefault("service_clock", tick_clock())
    app = make_app(project, registry, drafts=project.paths.drafts, embedder=embedder, observer=observer, **make)
    return Observed(app, observer, metrics, access)
