"""Redis down must not flood the log: one ERROR line per interval, and the next line says how
many refusals it held back. Driven by a fake clock; nothing sleeps."""

from __future__ import annotations

import logging
from collections import Counter

import pytest
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from rag_contract.web.ratelimit import Allowance, RateLimitMiddleware, StoreUnavailable
from rag_contract.web.ratelimit.middleware import UNAVAILABLE_LOG_INTERVAL_S
from rag_contract.web.ratelimit.throttled_log import ThrottledLog
from tests.support.clocks import FakeClock

LOGGER = "rag_contract.web.ratelimit.middleware"


def _lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER and r.levelno == logging.ERROR]


def test_one_line_per_interval_and_the_next_counts_what_was_held_back(caplog):
    clock = FakeClock(100.0)
    log = ThrottledLog(logging.getLogger(LOGGER), 10.0, clock)
    with caplog.at_level(logging.ERROR, logger=LOGGER):
        assert log.error("store down: %s", "refused") is True
        written = [log.error("store down: %s", "refused") for _ in range(999)]
        clock.advance(9.999)
        assert log.error("store down: %s", "refused") is False
        clock.advance(0.001)
        assert log.error("store down: %s", "again") is True
        clock.advance(10.0)
        assert log.error("store down: %s", "quiet since") is True
    assert not any(written)
    assert _lines(caplog) == [
        "store down: refused",
        "store down: again (1000 more like this in the last 10.0 s)",
        "store down: quiet since",  # nothing was held back in between: no count
    ]


def test_the_interval_must_be_positive():
    with pytest.raises(ValueError, match="interval_s must be > 0"):
        ThrottledLog(logging.getLogger(LOGGER), 0.0, FakeClock())


class DownStore:
    def take(self, key, now, allowance):
        raise StoreUnavailable("redis rate-limit store failed: ConnectionError: refused")


def test_thousands_of_refusals_while_redis_is_down_write_one_line_per_interval(caplog):
    # The probe that found this: 8 498 ERROR lines in 5 s. Every request is still refused.
    log_clock, calls = FakeClock(0.0), Counter()

    def answer(request):
        calls["answer"] += 1
        return JSONResponse({})

    app = Starlette(
        routes=[Route("/answer", answer)],
        middleware=[
            Middleware(
                RateLimitMiddleware,
                allowance=Allowance(per_minute=60, burst=5, trusted_proxy_hops=0),
                store=DownStore(),
                clock=FakeClock(0.0),  # the limiter's clock is frozen, as the probe's is
                log_clock=log_clock,
            )
        ],
    )
    client = TestClient(app)
    with caplog.at_level(logging.ERROR, logger=LOGGER):
        for _ in range(5):
            statuses = {client.get("/answer").status_code for _ in range(200)}
            assert statuses == {503}
            log_clock.advance(1.0)
        log_clock.advance(UNAVAILABLE_LOG_INTERVAL_S)
        client.get("/answer")
    lines = _lines(caplog)
    assert calls == Counter()
    assert len(lines) == 2, lines
    assert lines[1].endswith(f"(999 more like this in the last {UNAVAILABLE_LOG_INTERVAL_S:.1f} s)")
