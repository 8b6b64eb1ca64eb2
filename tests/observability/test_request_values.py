"""The values the request path makes without their frozen ``__init__`` are the ones it would make:
equal and as frozen, for every kind of outcome a request can end with."""

from __future__ import annotations

import dataclasses

import pytest
from starlette.testclient import TestClient

from rag_contract.observability.request import Observation, RequestFacts
from rag_contract.observability.settings import Settings
from rag_contract.web.ratelimit import client_identity
from tests.observability.apps import observed_app


def rebuilt(value):
    """``value`` made again through its class's own ``__init__``."""
    return type(value)(**{f.name: getattr(value, f.name) for f in dataclasses.fields(value)})


def test_facts_and_observations_made_on_the_request_path_equal_those_made_by_init(project, index, embedder):
    seen: list[RequestFacts] = []
    o = observed_app(project, index, embedder, Settings(access_log=True))
    o.observer.observe = seen.append  # type: ignore[method-assign]
    with TestClient(o.app) as client:
        for path in ("/answer/q11", "/answer/q11", "/answer/nope", "/health"):
            client.get(path, headers={"X-Forwarded-For": "10.1.2.3"})
        client.post("/ask", json={"question": "What does a 304 response mean?"})
    assert {f.route for f in seen} >= {"/answer/{qid}", "/ask"}
    observations = [f.observation for f in seen if f.observation is not None]
    assert len(observations) >= 3
    for value in [*seen, *observations]:
        again = rebuilt(value)
        assert value == again and repr(value) == repr(again)
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(value, "state", "x")  # noqa: B010 - a field of one, a property of the other
    # The client is the identity the limiter counted the request against, worked out as it does.
    hops = project.thresholds.rate_limit.trusted_proxy_hops
    assert {f.client for f in seen} == {client_identity("testclient", "10.1.2.3", hops)}


def test_facts_of_equals_facts():
    o = Observation("grounded", "v1", "q")
    assert RequestFacts.of("/ask", "POST", 200, 0.1, 1, "10.0.0.1", o, None) == RequestFacts(
        "/ask", "POST", 200, 0.1, 1, "10.0.0.1", o
    )
