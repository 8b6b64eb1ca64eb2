"""The served app, assembled from the project on disk, and ``serve`` (uvicorn).

Contract: ``build_served_app(root, clock, rate_store)`` loads the project (a broken corpus,
question set or thresholds file raises here: a broken checkout does not start), then the
index with ``Registry.at_startup``: a missing or unloadable index does NOT stop the process;
answers are then no_context (503, no version) and ``/health`` says what is wrong. Two
services share the one registry:

- the fixed questions: ``FixtureDrafter`` over ``eval/fixtures/drafts`` and the committed
  question vector (``committed_or_embedded``);
- free text (``POST /ask``): ``ExtractiveDrafter`` with the thresholds' confidence and claim
  count, and a query vector from the embedder the acquired index was built with
  (``index_embedder_vector``: a vector is only comparable with vectors of its own model).
  A local model is loaded on the first question, on a background thread
  (``loaded_on_demand``): nothing waits for it at start, no request pays the load (~0.5 s)
  against a 150 ms deadline, and a question that arrives while it loads is
  ``EmbedderLoading``, a 503 with ``Retry-After``. An embedder that fails (an unknown name,
  a remote one without its key) is ``EmbedderUnavailable``: a 503 naming it, not a 500.

``/health`` reads a ``StatusCache``, seeded from the project just loaded (the inputs are
read once per start): it re-hashes the corpus only when an input file's size or mtime moved.
The rate limiter uses ``rate_store`` (an in-process ``MemoryStore`` unless one is passed:
with several workers or instances, pass a shared ``RedisStore`` or each one limits on its
own). ``app_for_probe`` is the same assembly for the gate's limiter probe; ``serve`` runs it
with uvicorn (``rag-contract serve``), from the project at the ``root`` it is given
(``--root``), in every worker too (``WORKER_APP`` rebuilds it from ``ROOT_ENV``).
``port_from`` and ``redis_url_from`` read ``PORT`` and ``REDIS_URL``: a value that cannot be
one is ``ServeConfigError``, one line naming the setting, before anything starts.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import uvicorn
from starlette.applications import Starlette
from uvicorn.supervisors import Multiprocess

from rag_contract.answering.batching import BatchedVectors, EmbeddingBatcher
from rag_contract.answering.drafting import Drafter, ExtractiveDrafter, FixtureDrafter
from rag_contract.answering.service import QueryVector, Service
from rag_contract.config.thresholds import BatchingConfig, Thresholds
from rag_contract.embedders import make_embedder
from rag_contract.embedders.base import Embedder, EmbedderLoading, EmbedderUnavailable
from rag_contract.embedders.local import LocalEmbedder
from rag_contract.index.registry import Registry
from rag_contract.index.status import StatusCache, status_against
from rag_contract.index.store import Index
from rag_contract.observability.observer import Observer, build_observer
from rag_contract.observability.settings import Settings, settings_from
from rag_contract.project import Paths, Project, find_root, load_project
from rag_contract.web.app import create_app
from rag_contract.web.heap import release_freed_memory
from rag_contract.web.ratelimit import BucketStore, MemoryStore
from rag_contract.web.slow_clients import HeaderDeadlineH11Protocol

# Set by ``serve`` for its worker processes only; not settings anyone else reads.
ROOT_ENV = "RAG_CONTRACT_ROOT"
REDIS_ENV = "RAG_CONTRACT_WORKER_REDIS_URL"
DEFAULT_PORT = 8000
# The app each worker process builds (an import string: workers import it afresh).
WORKER_APP = "rag_contract.web.serving:served_app_from_env"
_REDIS_SCHEMES = ("redis", "rediss", "unix")
# What an /ask that finds the model loading is told to wait: the load takes ~0.5 s on 2 cores.
EMBEDDER_RETRY_AFTER_S = 1
# uvicorn's event loop; under a flood of clients asyncio's own loop took the answers' share (ADR 0001)
EVENT_LOOP = "uvloop"
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"


class ServeConfigError(ValueError):
    """A serve setting (``PORT``, ``REDIS_URL``, their flags) that cannot be used, named."""


def port_from(value: str | int, source: str = "PORT") -> int:
    """``value`` as a TCP port (0-65535; 0 asks for any free port), else ``ServeConfigError``."""
    text = str(value).strip()
    if not text.isdigit() or int(text) > 65535:
        raise ServeConfigError(f"{source}: {text[:40]!r} is not a port number (0-65535)")
    return int(text)


def redis_url_from(value: str, source: str = "REDIS_URL") -> str:
    """``value`` when it is a redis URL (redis://, rediss://, unix://), else ``ServeConfigError``."""
    scheme, sep, rest = value.strip().partition("://")
    if not sep or scheme.lower() not in _REDIS_SCHEMES or not rest:
        shown = f"{scheme[:20]}://..." if sep else "no scheme"
        raise ServeConfigError(f"{source}: not a redis URL ({shown}); expected redis://host:port[/db]")
    return value.strip()


logger = logging.getLogger(__name__)

EmbedderFor = Callable[[str], Embedder]


def embedder_for(make: Callable[[str], Embedder] = make_embedder) -> EmbedderFor:
    """name -> the embedder of that name, made on first use and kept (making one loads no
    model and makes no call; the model loads on the first vector). Safe across threads."""
    made: dict[str, Embedder] = {}
    lock = threading.Lock()

    def get(name: str) -> Embedder:
        with lock:
            if name not in made:
                made[name] = make(name)
            return made[name]

    return get


def embedded_vector(embedder: Embedder) -> QueryVector:
    """Free text embedded by ``embedder``, whatever the index (for callers that know they match)."""

    def query_vector(index: Index, text: str) -> np.ndarray:
        return embedder.embed([text])[0]

    return query_vector


def index_embedder_vector(embedders: EmbedderFor) -> QueryVector:
    """Free text embedded by the embedder the acquired index was built with
    (``index.embedder_name``), so the query and the index vectors share a space. Any failure
    to embed is ``EmbedderUnavailable`` naming the embedder (logged with its cause)."""

    def query_vector(index: Index, text: str) -> np.ndarray:
        name = index.embedder_name
        with _unavailable_on_failure(name):
            return embedders(name).embed([text])[0]

    return query_vector


@contextlib.contextmanager
def _unavailable_on_failure(name: str) -> Iterator[None]:
    """Any failure to embed inside the block is ``EmbedderUnavailable`` naming ``name``
    (logged with its cause); ``EmbedderLoading`` passes as it is."""
    try:
        yield
    except EmbedderLoading:
        raise  # not a failure: the model is on its way (503 with Retry-After)
    except Exception as exc:
        # A remote embedder can fail in many ways (no key, the ledger, the network); each
        # is a service error for this request, not a crash of it.
        logger.warning("embedder %s failed: %s: %s", name, type(exc).__name__, exc)
        raise EmbedderUnavailable(f"embedder {name!r} could not embed the question ({type(exc).__name__})") from exc


def batched_index_vector(embedders: EmbedderFor, batching: BatchingConfig) -> BatchedVectors:
    """``index_embedder_vector`` through one ``EmbeddingBatcher`` per embedder: questions that
    arrive while it is busy share a call (``thresholds.batching``). A local embedder embeds a
    batch with ``embed_together`` (each row equal to its vector alone); any other with
    ``embed``. Failures are translated as ``index_embedder_vector`` translates them."""
    batchers: dict[str, EmbeddingBatcher] = {}
    lock = threading.Lock()

    def batcher_for(name: str) -> EmbeddingBatcher:
        with _unavailable_on_failure(name):
            embedder = embedders(name)  # EmbedderLoading while its model loads: nothing queued
        with lock:
            if name not in batchers:
                many = embedder.embed_together if isinstance(embedder, LocalEmbedder) else embedder.embed

                def embed(texts: Sequence[str], many: Callable[[Sequence[str]], np.ndarray] = many) -> np.ndarray:
                    with _unavailable_on_failure(name):
                        return many(texts)

                batchers[name] = EmbeddingBatcher(embed, batching.max_batch, batching.max_wait_ms)
            return batchers[name]

    return BatchedVectors(batcher_for)


def committed_or_embedded(embedders: EmbedderFor) -> QueryVector:
    """A fixed question: its committed vector, else (a question added after the build) the
    index's own embedder (``index_embedder_vector``)."""
    embedded = index_embedder_vector(embedders)

    def query_vector(index: Index, text: str) -> np.ndarray:
        vec = index.question_vectors.get(text)
        return vec if vec is not None else embedded(index, text)

    return query_vector


def loaded_on_demand(
    embedders: EmbedderFor,
    retry_after_s: int = EMBEDDER_RETRY_AFTER_S,
    start: Callable[[Callable[[], None]], object] | None = None,
) -> EmbedderFor:
    """``embedders``, where a local model is loaded on first use off the request path.

    A local embedder whose model is not in memory is not returned: the first call for it
    starts loading the model on a background thread (``start``, default a daemon thread) and
    raises ``EmbedderLoading`` (503, ``Retry-After: retry_after_s``), as does every call
    until the load has ended. So the model's ~180 MB and ~0.5 s are paid only once someone
    asks, and never inside a request's deadline. A load that fails is not retried here: the
    next request embeds itself and fails as ``EmbedderUnavailable``, naming the embedder.
    Remote embedders (nothing to load) and non-local stand-ins pass straight through."""
    launch = start or (lambda job: threading.Thread(target=job, name="embedder-load", daemon=True).start())
    lock = threading.Lock()
    loading: set[str] = set()
    ended: set[str] = set()

    def load(name: str, embedder: LocalEmbedder) -> None:
        try:
            embedder.embed(["warm up"])
        except Exception as exc:  # noqa: BLE001 - the requests that follow report it, per request
            logger.warning("embedder %s could not load: %s: %s", name, type(exc).__name__, exc)
        finally:
            with lock:
                loading.discard(name)
                ended.add(name)

    def get(name: str) -> Embedder:
        embedder = embedders(name)
        if not isinstance(embedder, LocalEmbedder) or embedder.loaded:
            return embedder
        with lock:
            if name in ended:
                return embedder
            begin = name not in loading
            loading.add(name)
        if begin:
            launch(lambda: load(name, embedder))
        raise EmbedderLoading(name, retry_after_s)

    return get


def ask_readiness(embedders: EmbedderFor) -> Callable[[Index], None]:
    """What ``/health/ready`` asks of an index: raises ``EmbedderLoading`` while the model of
    the index's embedder loads, starting the load when nothing has (``loaded_on_demand``).
    An embedder that cannot be made or load is not waited for: each ``/ask`` names it (503
    ``embedder_unavailable``) while the fixed answers are served, so the process is ready."""

    def ready(index: Index) -> None:
        try:
            embedders(index.embedder_name)
        except EmbedderLoading:
            raise
        except Exception as exc:  # noqa: BLE001 - reported per request by /ask, not a readiness wait
            logger.debug("readiness: embedder %s: %s", index.embedder_name, type(exc).__name__)

    return ready


def build_services(
    registry: Registry,
    thresholds: Thresholds,
    *,
    fixture_drafter: Drafter,
    ask_drafter: Drafter,
    embedders: EmbedderFor,
    clock: Callable[[], float],
) -> tuple[Service, Service]:
    """(fixed-question service, free-text service), both over ``registry``, each query
    embedded (when it must be) by the embedder of the index the request acquired; free-text
    questions in shared calls (``batched_index_vector``, ``thresholds.batching``)."""
    fixed = Service(registry, thresholds, fixture_drafter, clock, committed_or_embedded(embedders))
    free = Service(registry, thresholds, ask_drafter, clock, batched_index_vector(embedders, thresholds.batching))
    return fixed, free


def assemble(
    project: Project,
    registry: Registry,
    *,
    clock: Callable[[], float],
    rate_clock: Callable[[], float],
    rate_store: BucketStore,
    status: Callable[[], Mapping[str, Any]],
    embedders: EmbedderFor | None = None,
    observer: Observer | None = None,
) -> Starlette:
    """The served app over an already loaded project and registry (no I/O beyond that).

    ``embedders`` (default ``embedder_for(make_embedder)``, as the CLI) gives each request
    the embedder its index was built with, ``loaded_on_demand``: nothing is loaded at start,
    so the socket is bound and the fixed answers served before any model is in memory.
    ``observer``: traces, metrics and the access log (``served_observer``), none when None."""
    made = embedder_for(functools.partial(make_embedder, models=project.paths.models))
    embedders = loaded_on_demand(embedders or made)
    fixed, free = build_services(
        registry,
        project.thresholds,
        fixture_drafter=FixtureDrafter(project.paths.drafts),
        ask_drafter=ExtractiveDrafter.committed(project.thresholds.drafting),
        embedders=embedders,
        clock=clock,
    )
    return create_app(
        registry=registry,
        fixture_service=fixed,
        ask_service=free,
        questions=project.questions,
        thresholds=project.thresholds,
        status=status,
        clock=rate_clock,
        rate_store=rate_store,
        about=project.about,
        observer=observer,
        ask_ready=ask_readiness(embedders),
    )


def served_version(registry: Registry) -> Callable[[], str | None]:
    def version() -> str | None:
        index = registry.acquire()
        return index.version if index is not None else None

    return version


def served_observer(settings: Settings, registry: Registry, metrics_registry: Any = None) -> Observer | None:
    """What ``settings`` turn on, observing ``registry``'s served version; None when nothing."""
    return build_observer(settings, served_version(registry), metrics_registry=metrics_registry)


def build_served_app(
    root: Path,
    clock: Callable[[], float] = time.perf_counter,
    rate_store: BucketStore | None = None,
    rate_clock: Callable[[], float] | None = None,
    observability: Settings | None = None,
    metrics_registry: Any = None,
) -> Starlette:
    """The app ``rag-contract serve`` runs, from the project at ``root``.

    ``observability`` (default: all off) says which of traces, metrics and the access log
    are on; ``serve`` reads it from the environment (``observability.settings``). Metrics
    register in ``metrics_registry`` (a prometheus ``CollectorRegistry``) when given, else in
    the multiprocess files (``metrics_endpoint``).

    ``clock`` times requests against the deadline and, unless ``rate_clock`` is given,
    drives the rate limiter too. A store shared between processes (``RedisStore``) needs
    a clock they share: pass ``rate_clock=time.time`` with it.
    """
    cache = StatusCache(Paths(Path(root)))
    stamp = cache.stamp()  # before the inputs are read: an edit while they load is seen later
    project = load_project(Path(root))
    registry = Registry.at_startup(project.paths.index)
    cache.seed(stamp, status_against(project.paths, lambda: (project.thresholds, project.corpus, project.questions)))
    return assemble(
        project,
        registry,
        clock=clock,
        rate_clock=rate_clock or clock,
        rate_store=rate_store if rate_store is not None else MemoryStore(),
        status=lambda: cache.get().as_dict(),
        observer=served_observer(observability or Settings(), registry, metrics_registry),
    )


def app_for_probe(project: Project, index: Index | None, clock: Callable[[], float]) -> Starlette:
    """The served app for ``ratelimit.probe`` (the gate): the same assembly and middleware,
    with the probe's frozen ``clock`` driving the limiter over a fresh in-memory store."""
    cache = StatusCache(project.paths)
    return assemble(
        project,
        Registry(index),
        clock=time.perf_counter,
        rate_clock=clock,
        rate_store=MemoryStore(),
        status=lambda: cache.get().as_dict(),
    )


def _store(redis_url: str | None) -> tuple[BucketStore, Callable[[], float]]:
    # Buckets shared through redis are compared across processes: wall-clock time, which they
    # share; in memory, the monotonic clock.
    if redis_url:
        from rag_contract.web.ratelimit.redis_store import RedisStore  # noqa: PLC0415 - the redis client only when shared

        return RedisStore.from_url(redis_url), time.time
    return MemoryStore(), time.monotonic


def served_app_from_env() -> Starlette:
    """uvicorn factory for worker processes: the root and redis URL ``serve`` was given."""
    release_freed_memory()  # each worker is a process of its own (heap.py)
    root = os.environ.get(ROOT_ENV)
    store, rate_clock = _store(os.environ.get(REDIS_ENV))
    return build_served_app(
        Path(root) if root else find_root(),
        rate_store=store,
        rate_clock=rate_clock,
        observability=settings_from(os.environ),
    )


def serve(
    host: str = "127.0.0.1",
    port: int | None = None,
    workers: int = 1,
    redis_url: str | None = None,
    root: Path | None = None,
) -> None:
    """Run the served app with uvicorn until interrupted. ``port`` defaults to $PORT, else 8000.

    Rate-limit buckets live in redis when ``redis_url`` is given (shared by every worker and
    instance), else in memory, per process: with ``workers > 1`` and no redis, each worker
    grants the full allowance on its own. ``proxy_headers`` is off: uvicorn would otherwise
    rewrite the client address from X-Forwarded-For, and the rate limiter alone decides
    which of those entries to trust (``rate_limit.trusted_proxy_hops``). The event loop is
    uvloop's, in every worker.

    Traces, metrics and the access log are read from the environment here
    (``observability.settings``: a malformed value stops the start, naming it) and in every
    worker. uvicorn's own access line is always off: it prints the path with its query string,
    and ``GET /ask?q=...`` carries the question. The project's access log
    (``RAG_CONTRACT_ACCESS_LOG=1``) logs the route, never the query.
    """

    if port is None:
        port = port_from(os.environ.get("PORT") or DEFAULT_PORT)
    release_freed_memory()  # before anything large is allocated (heap.py)
    root = Path(root) if root else find_root()
    settings = settings_from(os.environ)
    if settings.metrics_port == port:
        raise ServeConfigError(f"RAG_CONTRACT_METRICS_PORT: {port} is the public port; metrics are served apart")
    common: dict[str, Any] = dict(
        host=host,
        port=port,
        proxy_headers=False,
        server_header=False,
        access_log=False,  # never the question text in a log line (see above)
        http=HeaderDeadlineH11Protocol,  # a deadline on each request's headers (slow_clients.py)
        loop=EVENT_LOOP,
    )
    with metrics_endpoint(settings, workers) as metrics_registry:
        if workers <= 1:
            store, rate_clock = _store(redis_url)
            app = build_served_app(
                root, rate_store=store, rate_clock=rate_clock, observability=settings, metrics_registry=metrics_registry
            )
            uvicorn.run(app, **common)
            return
        _serve_workers(host, port, workers, redis_url, root, common)


def _serve_workers(
    host: str, port: int, workers: int, redis_url: str | None, root: Path, common: dict[str, Any]
) -> None:
    # Several workers need an import string; each worker builds its own app from these.
    os.environ[ROOT_ENV] = str(root)
    if redis_url:
        os.environ[REDIS_ENV] = redis_url

    config = uvicorn.Config(WORKER_APP, factory=True, workers=workers, **common)
    # uvicorn.run would bind with config.bind_socket(), whose listener leaves proto at 0:
    # asyncio then never sets TCP_NODELAY on accepted connections, and every keep-alive
    # response waits ~40 ms for the client's delayed ACK (uvicorn issue #3149). The
    # workers inherit this listener, proto included.
    listener = tcp_listener(host, port)
    logging.getLogger("uvicorn.error").info("Uvicorn running on http://%s:%d, %d workers", host, port, workers)
    with contextlib.suppress(KeyboardInterrupt):
        Multiprocess(config, sockets=[listener]).run()


@contextlib.contextmanager
def metrics_endpoint(settings: Settings, workers: int = 1) -> Iterator[Any]:
    """While open, metrics are served on the metrics port (when configured). One worker: it
    yields the registry the app registers its metrics in (values in memory). Several: it
    yields None and serves the sum over the workers, each writing under a fresh
    ``PROMETHEUS_MULTIPROC_DIR`` (in $TMPDIR; set here, before prometheus_client is imported,
    and inherited by the workers), removed on exit."""
    if settings.metrics_port is None:
        yield None
        return
    directory = tempfile.mkdtemp(prefix="rag-contract-metrics-") if workers > 1 else None
    if directory is not None:
        os.environ[MULTIPROC_ENV] = directory
    from rag_contract.observability.metrics import own_registry, serve_metrics  # noqa: PLC0415 - only when on

    registry = own_registry() if directory is None else None
    server, _ = serve_metrics(settings.metrics_host, settings.metrics_port, registry)
    logging.getLogger("uvicorn.error").info(
        "Metrics on http://%s:%d/metrics", settings.metrics_host, settings.metrics_port
    )
    try:
        yield registry
    finally:
        server.shutdown()
        server.server_close()
        if directory is not None:
            shutil.rmtree(directory, ignore_errors=True)


def tcp_listener(host: str, port: int) -> socket.socket:
    """A listening-ready TCP socket bound to (host, port) whose ``proto`` is IPPROTO_TCP,
    inheritable by worker processes (what uvicorn's ``Config.bind_socket`` does, plus proto)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.set_inheritable(True)
    return sock
