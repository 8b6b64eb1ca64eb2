"""Which of traces, metrics and the access log are on, read once from the environment.

Every setting is off by default: no exporter configured means no span is built and nothing is
exported; no metrics port means no metric is recorded and no port is opened. A value that cannot
be used is ``ObservabilityConfigError``, one line naming the variable, before anything starts.

- ``RAG_CONTRACT_TRACES_ENDPOINT``: the OTLP/HTTP traces URL (``http(s)://host[:port]/v1/traces``).
  Headers (e.g. an auth header) come from the exporter's own ``OTEL_EXPORTER_OTLP_TRACES_HEADERS``.
- ``RAG_CONTRACT_TRACES_INCLUDE_TEXT``: ``1``/``true``/``yes``/``on`` exports question, passage and
  claim text in spans; anything else that is a boolean (or unset) keeps them out.
- ``RAG_CONTRACT_TRACES_TIMEOUT_S``: seconds one export may take (default 5, at most 60).
- ``RAG_CONTRACT_CLIENT_KEY_SALT``: the key the client identity is hashed with in traces; unset,
  each process draws its own, so hashed keys compare within a process only.
- ``RAG_CONTRACT_METRICS_PORT`` / ``RAG_CONTRACT_METRICS_HOST``: serve Prometheus metrics there
  (host default 127.0.0.1), never on the public port.
- ``RAG_CONTRACT_ACCESS_LOG``: a boolean; on, one JSON line per request on stdout.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

TRACES_ENDPOINT = "RAG_CONTRACT_TRACES_ENDPOINT"
TRACES_INCLUDE_TEXT = "RAG_CONTRACT_TRACES_INCLUDE_TEXT"
TRACES_TIMEOUT = "RAG_CONTRACT_TRACES_TIMEOUT_S"
CLIENT_KEY_SALT = "RAG_CONTRACT_CLIENT_KEY_SALT"
METRICS_PORT = "RAG_CONTRACT_METRICS_PORT"
METRICS_HOST = "RAG_CONTRACT_METRICS_HOST"
ACCESS_LOG = "RAG_CONTRACT_ACCESS_LOG"

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("", "0", "false", "no", "off")
MAX_TIMEOUT_S = 60.0


class ObservabilityConfigError(ValueError):
    """An observability setting that cannot be used, named."""


@dataclass(frozen=True)
class Settings:
    """What is on. The default is everything off."""

    traces_endpoint: str | None = None
    traces_include_text: bool = False
    traces_timeout_s: float = 5.0
    client_key_salt: bytes | None = None
    metrics_port: int | None = None
    metrics_host: str = "127.0.0.1"
    access_log: bool = False

    @property
    def tracing(self) -> bool:
        return self.traces_endpoint is not None

    @property
    def metrics(self) -> bool:
        return self.metrics_port is not None

    @property
    def anything(self) -> bool:
        return self.tracing or self.metrics or self.access_log


def flag(value: str, name: str) -> bool:
    """A boolean setting: 1/true/yes/on or 0/false/no/off (any case; empty is off)."""
    text = value.strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ObservabilityConfigError(f"{name}: {value[:40]!r} is not a boolean (1/true/yes/on or 0/false/no/off)")


def endpoint(value: str, name: str = TRACES_ENDPOINT) -> str:
    """An http(s) URL with a host, as the OTLP/HTTP exporter posts to it."""
    parts = urlsplit(value.strip())
    try:
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number in range
    except ValueError:
        raise ObservabilityConfigError(f"{name}: the port of {value[:80]!r} is not a port number") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ObservabilityConfigError(
            f"{name}: {value[:80]!r} is not an http(s) URL such as http://host:4318/v1/traces"
        )
    return value.strip()


def port(value: str, name: str) -> int:
    text = value.strip()
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise ObservabilityConfigError(f"{name}: {text[:40]!r} is not a port number (1-65535)")
    return int(text)


def seconds(value: str, name: str) -> float:
    try:
        s = float(value)
    except ValueError:
        raise ObservabilityConfigError(f"{name}: {value[:40]!r} is not a number of seconds") from None
    if not 0 < s <= MAX_TIMEOUT_S:
        raise ObservabilityConfigError(f"{name}: {s:g} is outside (0, {MAX_TIMEOUT_S:g}] seconds")
    return s


def settings_from(env: Mapping[str, str]) -> Settings:
    """The settings in ``env`` (``os.environ`` when serving); unset or empty means off/default."""

    def get(name: str) -> str | None:
        value = env.get(name)
        return value if value is not None and value.strip() else None

    raw_endpoint = get(TRACES_ENDPOINT)
    raw_port = get(METRICS_PORT)
    raw_timeout = get(TRACES_TIMEOUT)
    raw_salt = get(CLIENT_KEY_SALT)
    return Settings(
        traces_endpoint=endpoint(raw_endpoint) if raw_endpoint else None,
        traces_include_text=flag(env.get(TRACES_INCLUDE_TEXT, ""), TRACES_INCLUDE_TEXT),
        traces_timeout_s=seconds(raw_timeout, TRACES_TIMEOUT) if raw_timeout else Settings.traces_timeout_s,
        client_key_salt=raw_salt.encode("utf-8") if raw_salt else None,
        metrics_port=port(raw_port, METRICS_PORT) if raw_port else None,
        metrics_host=(get(METRICS_HOST) or Settings.metrics_host).strip(),
        access_log=flag(env.get(ACCESS_LOG, ""), ACCESS_LOG),
    )
