"""A log line that cannot flood: at most one per interval, with a count of what it held back.

Why: with Redis down the limiter refuses every request (fail closed), and one ERROR line per
refusal wrote 8 498 lines in 5 s, burying everything else in the log at the moment an
operator reads it. ``ThrottledLog(logger, interval_s, clock)`` writes the first line at
once, drops the ones that follow within ``interval_s`` (counting them), and appends that
count to the next line it writes: "(1234 more like this in the last 10.0 s)". Nothing is
written by a timer: a count is reported with the next line, so a quiet service logs nothing.
Thread-safe; the clock is injected (``time.monotonic`` in service, a fake in tests).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable


class ThrottledLog:
    def __init__(self, logger: logging.Logger, interval_s: float, clock: Callable[[], float]):
        if not interval_s > 0:
            raise ValueError(f"interval_s must be > 0, got {interval_s!r}")
        self._logger = logger
        self._interval_s = interval_s
        self._clock = clock
        self._lock = threading.Lock()
        self._last_written: float | None = None
        self._held_back = 0

    def error(self, message: str, *args: object) -> bool:
        """Log ``message % args`` at ERROR unless a line was written within the interval;
        True when it was written."""
        with self._lock:
            now = self._clock()
            if self._last_written is not None and now - self._last_written < self._interval_s:
                self._held_back += 1
                return False
            held_back, self._held_back = self._held_back, 0
            self._last_written = now
        if held_back:
            message = f"{message} (%d more like this in the last %.1f s)"
            args = (*args, held_back, self._interval_s)
        self._logger.error(message, *args)
        return True
