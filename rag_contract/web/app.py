"""The HTTP contract: a presenter over ``Service``, ``Registry`` and the index status.

Routes (JSON unless stated; every one sits behind the rate limiter):

- ``GET /health``: the served index version (or null), freshness and what changed (from the
  status callable), the load error when no index is served. 200 serving, 503 not serving.
- ``GET /health/live``: 200 while the process answers at all (liveness: nothing is checked).
- ``GET /health/ready``: 200 when a request would be answered in full (readiness): an index is
  served and the model that embeds free-text questions is in memory. While it loads, 503
  ``waiting_for: embedder`` with ``Retry-After``; the first such request starts the load, so
  an orchestrator's readiness probe warms the process before it is sent traffic. 503
  ``waiting_for: index`` while no index is served.
- ``GET /questions``: the fixed question set (id, question, answerable).
- ``GET /answer/{id}``: ``Service.answer`` for a fixed question (recorded drafts). Status
  from the outcome: grounded/partial/unsupported 200, no_context 503, abandoned 503, and
  draft_unavailable 503 when the drafter raises ``DraftError`` (no usable recorded draft),
  embedder_unavailable 503 when the query cannot be embedded (``EmbedderUnavailable``),
  embedder_loading 503 with ``Retry-After`` while its model loads (``EmbedderLoading``).
- ``POST /ask``: ``{"question": "..."}`` answered by the extractive drafter; bad input is
  refused by ``free_text`` (400/413/415/422, naming the reason) before any drafter. The
  content type is checked and the body read with a ceiling (``read_bounded``) before
  anything is buffered: an oversized body is refused on its ``Content-Length`` or as soon as
  the bytes received pass the limit, and the connection is closed. A valid question is then
  admitted (``admission.py``: an in-flight cap and a short queue) or shed: 503 ``overloaded``
  with ``Retry-After``, sent in its turn (``refusal_pacing.py``: at most
  ``admission.refusals_per_s`` a second, none held past its ``Retry-After``). ``GET /ask?q=``
  is screened, admitted and shed the same way.
  An abandoned answer's 503 carries ``Retry-After`` too (a deadline spent is load, not a fault).
  A body that has not all arrived within ``BODY_TIMEOUT_S`` is a 408 (``slow_clients.py``).
- ``GET /section/{ref}``: a section of the index this request acquired; HTML by default,
  JSON when the client prefers ``application/json``.
- ``GET /sections``: every section id of the acquired index with its title and parent, as
  HTML (``?grep=WORD``: those whose id or title holds it, any case); 503 without an index.
- ``GET /`` and ``GET /q/{id}``: the question list and one answer as HTML, same statuses.
  The list's states are computed once per installed index, by one build at a time on a
  thread of its own that every concurrent request awaits (``Listing``).
- ``GET /static/site.css``: the one stylesheet. Nothing is loaded from another host.

Section URLs: a section id holds ``#`` ("rfc9110#9.2.1"), which a URL would read as a
fragment. The path writes it with ``:`` instead (``/section/rfc9110:9.2.1``); the encoded
form ``/section/rfc9110%239.2.1`` is accepted too. A page in a sub-folder keeps its folders
as path segments (``/section/advanced/clients.md:timeouts``). ``section_href`` makes the links.

Validators (``validators.py``; RFC 9110 sections 8.8 and 13, RFC 9111 section 5.2.2.4): every
2xx of ``/answer/{id}``, ``/q/{id}``, ``/questions``, ``/section/...``, ``/sections`` and ``/`` carries an
``ETag`` and ``Cache-Control: no-cache``; an ``If-Match`` that names no current representation
(strong comparison) is a 412, and a matching ``If-None-Match`` is a 304 carrying the same
fields; a field sent on several lines is read as one list. ``/answer`` and ``/q`` tags are
weak (responses differ only in the budget) and come from ``FixedAnswers``, which keeps each
fixed answer per Index object, so a revalidation or a repeat does no answering work; the
others are strong. ``/section`` sends ``Vary: Accept``. A 404 or 503 ignores the fields
(section 13.2.1) and carries no tag. Pages also say ``Referrer-Policy: no-referrer`` (a page's
URL can hold a question), and a question too long for ``GET /ask?q=`` is 414. ``/health``,
``/health/live``, ``/health/ready`` and ``GET /ask`` are ``Cache-Control: no-store``: a status
of this instant, or a page holding the question asked, is for no cache to keep.

Every JSON response carries ``X-Content-Type-Options: nosniff``, and an id echoed in a 404
is cut to ``ECHO_MAX_CHARS`` characters: a reply never grows with what the client sent. A stray
trailing slash is a 307 to the route with a relative ``Location`` (``slash_redirect.py``),
never one built from the ``Host`` header.

Every response that carries an answer or a section from an index carries
``X-Index-Version``, equal to the body's ``index_version``; it is taken from the outcome
(the index the request acquired), never from the registry afterwards. The rate limiter is
the first middleware (inside only Starlette's error guard), so a 429 or a
limiter-unavailable 503 never runs a handler and never carries the header. What it admits for
``GET /answer/{id}`` goes from there straight to that route's ASGI endpoint
(``FixedAnswerEndpoint``, via ``direct_route.py``); every other request goes through the router.

Handlers translate: the state, status and version come from the core objects; the few
rules here (health status, page status, what /section answers, content negotiation) are
plain functions. The handlers are module-level endpoints that read their dependencies from
``request.app.state.web`` (a ``WebState``), which ``create_app`` sets once.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import threading
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import parse_qsl, quote

import jinja2
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.convertors import Convertor, register_url_convertor
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from rag_contract.answering.drafting import DraftError
from rag_contract.answering.free_text import (
    AskRejected,
    body_too_large,
    max_body_bytes,
    read_question,
    require_json,
    validate_question,
)
from rag_contract.answering.service import Abandoned, Answer, AnswerState, Service
from rag_contract.config.about import About
from rag_contract.config.questions import Question, QuestionSet
from rag_contract.config.thresholds import Thresholds
from rag_contract.corpus.section_list import section_rows
from rag_contract.embedders.base import EmbedderLoading, EmbedderUnavailable
from rag_contract.index.registry import Registry
from rag_contract.index.store import Index
from rag_contract.observability.observer import Observer
from rag_contract.web.admission import Admission, AdmissionLimits, Shed
from rag_contract.web.bounded_body import BodyAborted, BodyTimeout, BodyTooLarge, read_bounded
from rag_contract.web.content_coding import ACCEPTED, coding_refusal
from rag_contract.web.direct_route import DirectRoute
from rag_contract.web.display_safe import bidi_refusal, without_bidi
from rag_contract.web.fixed_answers import FixedAnswers, Served, encode
from rag_contract.web.methods import SERVER_WIDE, allowed, recognised
from rag_contract.web.observe import ObserveMiddleware, mark_shed, note
from rag_contract.web.ratelimit import Allowance, BucketStore, RateLimitMiddleware
from rag_contract.web.refusal_pacing import RefusalPacing
from rag_contract.web.single_flight import SingleFlight
from rag_contract.web.slash_redirect import relative_slash_redirects
from rag_contract.web.slow_clients import BODY_TIMEOUT_S
from rag_contract.web.validators import CACHE_CONTROL, conditional_status, entity_tag

TEMPLATES = Path(__file__).parent / "templates"
T = TypeVar("T")
VERSION_HEADER = "X-Index-Version"

# Pages load nothing from anywhere but this origin; the browser is told so as well.
_PAGE_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'self'; img-src 'self'; base-uri 'none'; "
        "form-action 'self'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    # A page's URL can hold a question (/ask?q=...): no link or form sends it on as a Referer.
    "Referrer-Policy": "no-referrer",
}
_JSON_HEADERS = {"X-Content-Type-Options": "nosniff"}
# What no cache may keep at all (RFC 9111 section 5.2.2.5): the process's state at this instant
# (health), and pages that hold the question someone typed (GET /ask?q=), which a shared cache
# would otherwise store under a URL anyone could ask for.
_NO_STORE = {"Cache-Control": "no-store"}
ECHO_MAX_CHARS = 80


# --- outcomes the core does not name --------------------------------------------------


@dataclass(frozen=True)
class ServiceFailed:
    """A part of the request path refused: the drafter raised ``DraftError`` (e.g. no
    recorded draft for this question: ``draft_unavailable``) or the query could not be
    embedded (``EmbedderUnavailable``: ``embedder_unavailable``).

    ``Service.answer`` lets both propagate; this is their translation: a service error (503)
    with no state and no version (the acquired index is not visible from outside). A model
    still loading (``EmbedderLoading``) is ``embedder_loading`` with ``retry_after_s``, sent
    as ``Retry-After`` (RFC 9110 section 10.2.3).
    """

    question_id: str | None
    question: str
    detail: str
    error: str = "draft_unavailable"
    index_version: None = None
    http_status: int = 503
    retry_after_s: int | None = None

    @property
    def headers(self) -> dict[str, str]:
        return {} if self.retry_after_s is None else {"Retry-After": str(self.retry_after_s)}

    def as_dict(self) -> dict:
        return {
            "question_id": self.question_id,
            "question": self.question,
            "error": self.error,
            "detail": self.detail,
            "index_version": None,
        }


Outcome = Answer | Abandoned | ServiceFailed


def run_answer(service: Service, question: str, question_id: str | None) -> Outcome:
    """``service.answer``, with a drafter or embedder failure as a value rather than a 500."""
    try:
        return service.answer(question, question_id)
    except DraftError as exc:
        return ServiceFailed(question_id, question, str(exc))
    except EmbedderLoading as exc:
        return ServiceFailed(question_id, question, str(exc), "embedder_loading", retry_after_s=exc.retry_after_s)
    except EmbedderUnavailable as exc:
        return ServiceFailed(question_id, question, str(exc), "embedder_unavailable")


def run_fixed(service: Service, index: Index | None, q: Question) -> Outcome:
    """A fixed question answered on the index the request acquired (``Service.answer_on``),
    with a drafter or embedder failure as a value (a question without a committed vector is
    embedded)."""
    try:
        return service.answer_on(index, q.question, q.id)
    except DraftError as exc:
        return ServiceFailed(q.id, q.question, str(exc))
    except EmbedderLoading as exc:
        return ServiceFailed(q.id, q.question, str(exc), "embedder_loading", retry_after_s=exc.retry_after_s)
    except EmbedderUnavailable as exc:
        return ServiceFailed(q.id, q.question, str(exc), "embedder_unavailable")


def state_of(outcome: Outcome) -> str:
    """What a page badge says: the state, or the error for outcomes without one."""
    return outcome.state.value if isinstance(outcome, Answer) else outcome.as_dict()["error"]


class Listing:
    """The question list's outcomes, computed once per installed index object, by one build
    at a time on a thread of its own.

    Listing runs every fixed question on the index acquired (``compute(index)``; ~0.7 s of CPU
    cold). Per request, that would let one client claim far more of the process than the rate
    limit assumes (about one deadline per request).
    Outcomes are reused while the registry holds the very Index object they were computed on
    and every one is an Answer from it; anything else (no index, an abandoned or undraftable
    question, a cutover during the listing) is recomputed on a later request. Recorded drafts
    are build artefacts: replacing them means a restart.

    Single flight: while a build for an index is running, every request for that index awaits
    the same build (holding no thread) instead of starting its own. Builds run on
    ``executor`` (by default one thread of the listing's own), never on the pool ``/health``
    and ``POST /ask`` use: a cold ``GET /`` stampede costs one build, and the rest of the
    service keeps its threads.
    """

    def __init__(self, registry: Registry, compute: Callable[[Any], list], executor: Executor | None = None):
        self._registry = registry
        self._compute = compute
        self._executor = executor or ThreadPoolExecutor(1, thread_name_prefix="listing")
        self._entry: tuple[Any, list] | None = None
        self._flight: tuple[Any, Future[list]] | None = None  # (index, its build), while it runs
        self._lock = threading.Lock()
        self._rendered: tuple[list, Any] | None = None

    async def get(self) -> list:
        index = self._registry.acquire()
        entry = self._entry
        if index is not None and entry is not None and entry[0] is index:
            return entry[1]
        with self._lock:
            flight = self._flight
            if flight is None or flight[0] is not index or flight[1].done():
                flight = (index, self._executor.submit(self._build, index))
                self._flight = flight
        # A concurrent future: any event loop may await it, and a waiter that goes away
        # (a client that disconnects) cancels only its own wait, never the build.
        return await asyncio.shield(asyncio.wrap_future(flight[1]))

    def rendered(self, rows: list, render: Callable[[list], T]) -> T:
        """``render(rows)``, kept for the last ``rows`` object rendered: every request served the
        same list (one build's waiters, or the kept entry) shares one rendering."""
        kept = self._rendered
        if kept is not None and kept[0] is rows:
            return kept[1]
        made = render(rows)
        self._rendered = (rows, made)
        return made

    def _build(self, index: Any) -> list:
        rows = self._compute(index)
        complete = all(isinstance(o, Answer) and o.index_version == getattr(index, "version", None) for _, o in rows)
        if index is not None and complete and self._registry.acquire() is index:
            self._entry = (index, rows)  # one rebinding: readers see the old entry or the new
        return rows


# --- rules ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Health:
    http_status: int
    body: Mapping[str, Any]


def health(served_version: str | None, load_error: str | None, status: Mapping[str, Any]) -> Health:
    """200 while an index is served, 503 while none is. ``status`` is the on-disk view
    (``IndexStatus.as_dict()``): whether the committed index still matches its inputs."""
    body = {
        "serving": served_version is not None,
        "index_version": served_version,
        "load_error": None if served_version is not None else (load_error or "no index is installed"),
        "fresh": bool(status.get("fresh")),
        "changes": list(status.get("changes") or []),
        "rebuild_version": status.get("rebuild_version"),
        # A rebuilt index on disk that this process has not installed yet shows up here.
        "disk_index_version": status.get("index_version"),
        "disk_error": status.get("error"),
    }
    return Health(200 if served_version is not None else 503, body)


def index_page_status(outcomes: Sequence[Outcome]) -> int:
    """The question list is a failure (503) only when nothing could be answered from an
    index: every outcome is no_context. One abandoned row does not fail the page."""
    if outcomes and all(isinstance(o, Answer) and o.state is AnswerState.NO_CONTEXT for o in outcomes):
        return 503
    return 200


@dataclass(frozen=True)
class SectionReply:
    """What ``/section`` answers for one section id, before content negotiation."""

    http_status: int
    body: Mapping[str, Any]
    index_version: str | None = None


def section_reply(index: Index | None, load_error: str | None, section_id: str) -> SectionReply:
    """503 without an index (no_context), 404 for an id the index lacks, else the section
    with the version of ``index``, the one index this request acquired."""
    if index is None:
        return SectionReply(503, {"error": "no_context", "detail": load_error or "no index is installed"})
    section = index.sections.get(section_id)
    if section is None:
        return SectionReply(404, _not_found("section", section_id))
    body = {"section_id": section.id, "title": section.title, "text": section.text, "index_version": index.version}
    return SectionReply(200, body, index.version)


@dataclass(frozen=True)
class ListingPage:
    """The question list page: its status, one row per question, the index versions seen."""

    http_status: int
    rows: list[dict[str, Any]]
    versions: list[str]


def listing_page(rows: Sequence[tuple[Question, Outcome]]) -> ListingPage:
    outcomes = [o for _, o in rows]
    versions = sorted({o.index_version for o in outcomes if o.index_version})
    shown = [{"id": q.id, "question": q.question, "answerable": q.answerable, "state": state_of(o)} for q, o in rows]
    return ListingPage(index_page_status(outcomes), shown, versions)


def section_href(section_id: str) -> str:
    """``rfc9110#9.2.1`` -> ``/section/rfc9110:9.2.1`` (``#`` would start a URL fragment); a
    page's folders stay readable: ``/section/advanced/clients.md:timeouts``."""
    return "/section/" + quote(section_id.replace("#", ":", 1), safe=":./")


def section_id_from_ref(ref: str) -> str:
    """The inverse of ``section_href``'s path segment; ``rfc9110#9.2.1`` (sent as %23) too."""
    return ref if "#" in ref else ref.replace(":", "#", 1)


def prefers_json(accept: str | None) -> bool:
    """True when ``Accept`` ranks application/json above text/html (absent or */* -> HTML)."""
    if not accept:
        return False
    best = {"application/json": 0.0, "text/html": 0.0}
    for part in accept.split(","):
        media, *params = (p.strip() for p in part.split(";"))
        q = 1.0
        for p in params:
            key, _, value = p.partition("=")
            if key.strip().lower() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        media = media.lower()
        for kind in best:
            if media == kind:
                best[kind] = max(best[kind], q)
        if media in ("*/*", "text/*"):
            best["text/html"] = max(best["text/html"], q)
    return best["application/json"] > 0 and best["application/json"] > best["text/html"]


# --- presentation ---------------------------------------------------------------------


def ask_example(questions: QuestionSet) -> str | None:
    """The question box's example: the project's first answerable question (None: no example)."""
    return next((q.question for q in questions.questions if q.answerable), None)


def _templates(about: About, example: str | None) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,  # a renamed key fails the page tests, not silently
    )
    env.globals["about"] = about  # the project's words for its corpus (project.yaml)
    env.globals["ask_example"] = example  # a question of this project, not of another corpus
    env.filters["section_href"] = section_href
    env.filters["ms"] = lambda v: f"{float(v):.1f}"
    return env


def _json(
    body: Mapping[str, Any], status: int, version: str | None = None, extra: Mapping[str, str] | None = None
) -> JSONResponse:
    return JSONResponse(dict(body), status_code=status, headers={**_JSON_HEADERS, **_headers(version, extra)})


def _headers(version: str | None, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    # Every answer, page and section is only as current as the served index: no cache may
    # reuse one without asking (validators.CACHE_CONTROL), errors included (a 404 is
    # heuristically cacheable, RFC 9111 section 4.2.2, and a cutover can end it).
    headers = {"Cache-Control": CACHE_CONTROL}
    if version:
        headers[VERSION_HEADER] = version
    headers.update(extra or {})
    return headers


def _validated(
    request: Request,
    tag: str,
    version: str | None,
    extra: Mapping[str, str] | None = None,
    page: WebState | None = None,
):
    """(headers, 412, 304 or None): the validator headers every 2xx of a route carries, and the
    412 when ``If-Match`` is false for ``tag``, else the 304 when ``If-None-Match`` is (RFC 9110
    sections 13.2.2, 15.4.5, 15.5.13). With ``page`` (a route that answers HTML) the 412 is a
    page too: a reader's browser shows it, and a JSON body where a page was asked is neither."""
    headers = _headers(version, {"ETag": tag, **(extra or {})})
    status = conditional_status(_field(request.scope, b"if-match"), _field(request.scope, b"if-none-match"), tag)
    if status == 412:
        if page is not None:
            return headers, _page(page, "precondition_failed.html", 412, headers=extra, detail=_PRECONDITION_DETAIL)
        return headers, _precondition_failed()
    if status == 304:
        return headers, Response(status_code=304, headers=headers)
    return headers, None


_PRECONDITION_DETAIL = "If-Match names no current representation of this resource (weak tags never match it)"


def _precondition_failed_body() -> dict[str, str]:
    return {"error": "precondition_failed", "detail": _PRECONDITION_DETAIL}


def _precondition_failed() -> JSONResponse:
    return _json(_precondition_failed_body(), 412)


_NOSNIFF = (b"x-content-type-options", b"nosniff")
_JSON_TYPE = (b"content-type", b"application/json")


def _validator_fields(version: str | None, tag: str) -> list[tuple[bytes, bytes]]:
    """``_headers(version, {"ETag": tag})`` as ASGI pairs."""
    fields = [(b"cache-control", CACHE_CONTROL.encode())]
    if version:
        fields.append((VERSION_HEADER.lower().encode(), version.encode("latin-1")))
    fields.append((b"etag", tag.encode("latin-1")))
    return fields


def _field(scope: Mapping[str, Any], name: bytes) -> str | None:
    """Header field ``name`` (lower-case), its lines joined with ", " as one list (RFC 9110
    section 5.3), or None when absent."""
    lines = [value.decode("latin-1") for key, value in scope["headers"] if key.lower() == name]
    return ", ".join(lines) if lines else None


def presentation_fingerprint(templates: Path, max_question_chars: int, about: About, example: str | None = None) -> str:
    """What every page depends on besides its data: the templates, this module (filters,
    headers, the shape of every JSON body), the question box's limit and example, and the
    corpus's words."""
    files = sorted(p for p in templates.iterdir() if p.is_file())
    parts: list[str | bytes] = [Path(__file__).read_bytes(), str(max_question_chars), about.name, about.description]
    parts.append(example or "")
    for p in files:
        parts += [p.name, p.read_bytes()]
    return entity_tag(parts, weak=False)


def utf8_query(query_string: bytes) -> bool:
    """Whether every name and value of ``query_string`` is UTF-8 once percent-decoded."""
    try:
        parse_qsl(query_string.decode("latin-1"), keep_blank_values=True, encoding="utf-8", errors="strict")
    except UnicodeDecodeError:
        return False
    return True


def echoed(key: str) -> str:
    """``key`` as a reply may repeat it: at most ``ECHO_MAX_CHARS`` characters, a longer one
    cut and marked with its length, bidirectional controls removed."""
    key = without_bidi(key)  # an echoed id is never a display spoof (display_safe.py)
    if len(key) <= ECHO_MAX_CHARS:
        return key
    return f"{key[:ECHO_MAX_CHARS]}... ({len(key)} characters)"


def _retry_after(seconds: int) -> dict[str, str]:
    return {"Retry-After": str(seconds)}


async def _refusing(request: Request, shed: Shed) -> None:
    """What precedes every 503 ``overloaded``, JSON or page: the shed noted for the observer,
    then held until its turn (``refusal_pacing.py``)."""
    mark_shed(request.scope, shed.reason)
    await _web(request).refusals.pace()


async def _shed(request: Request, shed: Shed, extra: dict[str, str] | None = None) -> Response:
    """The JSON 503 for a request admission control refused."""
    await _refusing(request, shed)
    return _json(shed.as_dict(), 503, extra=_retry_after(shed.retry_after_s) | (extra or {}))


def _retry(web: WebState, outcome: Outcome) -> dict[str, str] | None:
    """When a failed answer may be asked again, and the client is told when: an abandoned answer
    spent its deadline under load (the admission's wait); a service failure names its own (the
    model still loading)."""
    if isinstance(outcome, Abandoned):
        return _retry_after(web.admission.limits.retry_after_s)
    if isinstance(outcome, ServiceFailed):
        return outcome.headers or None
    return None


def _not_found(what: str, key: str) -> dict:
    return {"error": "not_found", "detail": f"no {what} {echoed(key)!r}"}


@dataclass(frozen=True)
class WebState:
    """What the endpoints read, set once by ``create_app`` as ``app.state.web``."""

    registry: Registry
    fixture_service: Service
    ask_service: Service
    questions: QuestionSet
    by_id: Mapping[str, Question]
    max_question_chars: int
    status: Callable[[], Mapping[str, Any]]
    listing: Listing
    templates: jinja2.Environment
    css: str
    css_tag: str  # strong: a digest of the stylesheet's bytes
    warmup: Callable[[], object] | None
    fixed: FixedAnswers[Outcome]
    presentation: str  # presentation_fingerprint: an input of every page's entity tag
    questions_body: bytes  # GET /questions: constant for the process, encoded once
    questions_tag: str
    admission: Admission  # free-text answers in flight and queued (POST /ask, GET /ask?q=)
    refusals: RefusalPacing  # when each refusal (admission's sheds, the limiter's 429s) is sent
    fixed_flights: SingleFlight[Served | Outcome]  # fixed answers computed one at a time on the loop, once per id
    body_timeout_s: float  # POST /ask: the whole body within this, else 408 (slow_clients.py)
    ask_ready: Callable[[Index], object]  # GET /health/ready: raises EmbedderLoading while it loads


def _web(request: Request) -> WebState:
    return request.app.state.web


def _page(
    web: WebState,
    name: str,
    status_code: int,
    version: str | None = None,
    headers: Mapping[str, str] | None = None,
    **context: Any,
) -> HTMLResponse:
    return _html(_render(web, name, **context), status_code, version, headers)


def _render(web: WebState, name: str, **context: Any) -> str:
    return web.templates.get_template(name).render(max_chars=web.max_question_chars, **context)


def _html(
    html: str, status_code: int, version: str | None = None, headers: Mapping[str, str] | None = None
) -> HTMLResponse:
    return HTMLResponse(html, status_code=status_code, headers={**_PAGE_HEADERS, **_headers(version, headers)})


def _not_found_page(web: WebState, what: str, key: str) -> HTMLResponse:
    return _page(web, "not_found.html", 404, what=what, key=echoed(key))


def answer_all(
    fixed: FixedAnswers[Outcome], questions: QuestionSet, index: Index | None
) -> list[tuple[Question, Outcome]]:
    """Every fixed question with its outcome on ``index``, in question-set order (what ``Listing``
    keeps). Each goes through the fixed-answer memo: a verdict reached once, by a list or by
    ``/answer``, is reused, so a list some of whose rows failed (abandoned under load) is
    completed by the next build rather than computed again whole."""
    return [(q, _outcome_of(fixed.serve(index, q))) for q in questions.questions]


async def serve_fixed(web: WebState, index: Index | None, q: Question) -> Served | Outcome:
    """A fixed question's answer on ``index``: a kept one inline (a lookup, far under a
    millisecond), else computed by the one worker that computes fixed answers on the loop, one
    at a time and once per id (``single_flight.py``): between any two answers the loop serves
    ``/health`` and everything else, so a cold stampede over distinct ids cannot hold it. A
    request that joined another's computation is served the kept answer with what it spent
    itself (``reused``). Handed another's abandonment instead, it was never given a deadline
    of its own (a deadline times a computation from its start, the queue's wait is not spent
    from it, for the request that started the computation as for one that joined it): it
    computes once more under its own, queued alone (``run_alone``), and is served what that
    gives, abandoned or not, never a third try. The kept answer, if another's retry has kept
    one meanwhile, is served at once (``FixedAnswers.serve`` looks it up first)."""
    if web.fixed.lookup(index, q.id) is not None:
        return web.fixed.serve(index, q)
    compute = functools.partial(web.fixed.serve, index, q)
    served, started = await web.fixed_flights.run(q.id, index, compute)
    if started:
        return served
    if isinstance(served, Served):
        return web.fixed.serve(index, q)
    if isinstance(served, Abandoned):
        return await web.fixed_flights.run_alone(compute)
    return served


def _outcome_of(served: Served | Outcome) -> Outcome:
    return served.entity.answer if isinstance(served, Served) else served


# --- endpoints: each reads app.state.web, asks the core, and translates the outcome ------


async def get_live(request: Request) -> Response:
    return _json({"live": True}, 200, extra=_NO_STORE)


async def get_ready(request: Request) -> Response:
    web = _web(request)
    index = web.registry.acquire()
    if index is None:
        detail = web.registry.load_error or "no index is installed"
        return _json({"ready": False, "waiting_for": "index", "detail": detail}, 503, extra=_NO_STORE)
    try:
        web.ask_ready(index)
    except EmbedderLoading as exc:
        body = {"ready": False, "waiting_for": "embedder", "detail": str(exc)}
        return _json(body, 503, extra=_retry_after(exc.retry_after_s) | _NO_STORE)
    return _json({"ready": True, "index_version": index.version}, 200, index.version, _NO_STORE)


async def get_health(request: Request) -> Response:
    web = _web(request)
    index = web.registry.acquire()
    # Inline: the status is cached on the inputs' sizes and mtimes (a few stat calls, ~0.2 ms),
    # so /health takes no thread: a storm that fills the shared pool cannot delay it, and no
    # hand-over between threads waits for the scheduler on a busy machine.
    on_disk = web.status()
    h = health(index.version if index else None, web.registry.load_error, on_disk)
    return _json(h.body, h.http_status, extra=_NO_STORE)


def questions_body(questions: QuestionSet) -> bytes:
    rows = [{"id": q.id, "question": q.question, "answerable": q.answerable} for q in questions.questions]
    return encode({"questions": rows})


async def get_questions(request: Request) -> Response:
    web = _web(request)
    # Strong: the body is fixed for the life of the process, byte for byte.
    headers, conditional_reply = _validated(request, web.questions_tag, None)
    return conditional_reply or Response(
        web.questions_body, media_type="application/json", headers={**_JSON_HEADERS, **headers}
    )


class FixedAnswerEndpoint:
    """``GET /answer/{id}`` as a pure ASGI endpoint, the route ``DirectRoute`` hands requests to
    straight from the rate limiter (``direct_route.py``): the one route that serves a kept
    answer per request, so it builds no ``Request`` and no ``Response`` object for one."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        web: WebState = scope["app"].state.web
        qid = scope["path_params"]["qid"]
        q = web.by_id.get(qid)
        if q is None:
            await _json(_not_found("question", qid), 404)(scope, receive, send)
            return
        served = await serve_fixed(web, web.registry.acquire(), q)  # the only acquire of this request
        if not isinstance(served, Served):
            note(scope, served)
            await _json(served.as_dict(), served.http_status, served.index_version, _retry(web, served))(
                scope, receive, send
            )
            return
        entity = served.entity
        note(scope, entity.answer, served.budget)
        # The fields _validated and _json would give, in their order, written as ASGI pairs at once.
        fields = _validator_fields(entity.answer.index_version, entity.etag)
        status = conditional_status(_field(scope, b"if-match"), _field(scope, b"if-none-match"), entity.etag)
        if status == 412:
            await _precondition_failed()(scope, receive, send)
            return
        if status == 304:
            await send({"type": "http.response.start", "status": 304, "headers": fields})
            await send({"type": "http.response.body", "body": b""})
            return
        body = entity.body(served.budget)
        length = (b"content-length", str(len(body)).encode())
        headers = [_NOSNIFF, *fields, length, _JSON_TYPE]
        await send({"type": "http.response.start", "status": entity.answer.http_status, "headers": headers})
        await send({"type": "http.response.body", "body": body})


async def post_ask(request: Request) -> Response:
    web = _web(request)
    max_chars = web.max_question_chars
    if (shed := web.admission.refusal_now()) is not None:
        # Overloaded: refuse before reading, parsing and screening a body that would be refused
        # anyway; the unread body means the connection closes.
        return await _shed(request, shed, {"Connection": "close"})
    try:
        require_json(request.headers.get("content-type"))
        if (coded := coding_refusal(request.headers.getlist("content-encoding"))) is not None:
            return _json(coded.as_dict(), coded.status, extra={**ACCEPTED, "Connection": "close"})
        if_match = _field(request.scope, b"if-match")
        if if_match is not None and if_match.strip() != "*":
            # RFC 9110 section 13.1.1: /ask has a representation (the question page) but no
            # entity tag, so no tag listed can match: 412 before the body is read (13.2.2).
            return _json(_precondition_failed_body(), 412, extra={"Connection": "close"})
        try:
            body = await read_bounded(request, max_body_bytes(max_chars), web.body_timeout_s)
        except BodyTooLarge as exc:
            raise body_too_large(exc.size, max_chars, exc.how) from None
        except BodyTimeout as exc:
            raise AskRejected(408, "body_timeout", str(exc)) from None
        except BodyAborted as exc:
            # No one is left to read this (the server drops it); it only keeps the log clean.
            raise AskRejected(400, "body_aborted", str(exc)) from None
        question = read_question(body, max_chars)
        if (spoof := bidi_refusal(question)) is not None:
            raise spoof
    except AskRejected as exc:
        # The rest of a refused body is never read: close rather than drain it for keep-alive.
        close = {"Connection": "close"} if exc.status in (408, 413, 415) or exc.reason == "body_aborted" else None
        return _json(exc.as_dict(), exc.status, extra=close)
    try:
        async with web.admission.slot():
            outcome = await run_in_threadpool(run_answer, web.ask_service, question, None)
    except Shed as exc:
        return await _shed(request, exc)
    note(request.scope, outcome)
    return _json(outcome.as_dict(), outcome.http_status, outcome.index_version, _retry(web, outcome))


async def get_ask_page(request: Request) -> Response:
    """The front page's question box: a plain GET form (answering is safe and repeatable, so a
    person can bookmark or share the answer), screened and answered exactly as ``POST /ask``.
    No cache may store it (``_NO_STORE``): it holds the question asked."""
    response = await _ask_page(request)
    response.headers.update(_NO_STORE)
    return response


async def _ask_page(request: Request) -> Response:
    web = _web(request)
    raw = request.query_params.get("q")
    if not utf8_query(request.scope["query_string"]):
        # POST /ask refuses a body that is not UTF-8; the same question in the URL is the same
        # input, not one to read with its bytes replaced by U+FFFD.
        error = AskRejected(400, "query_not_utf8", "the query string is not UTF-8 once percent-decoded")
        return _page(web, "ask.html", 400, asked=None, error=error.as_dict())
    if raw is None:
        return _page(web, "ask.html", 200, asked=None, error=None)
    try:
        question = validate_question({"question": raw}, web.max_question_chars)
        if (spoof := bidi_refusal(question)) is not None:
            raise spoof
    except AskRejected as exc:
        # The box is refilled with what was asked, up to the limit: a page never grows with the URL.
        # Here the question is the target: too long is 414 URI Too Long (RFC 9110 section 15.5.15).
        status = 414 if exc.status == 413 else exc.status
        asked = without_bidi(raw[: web.max_question_chars])
        return _page(web, "ask.html", status, asked=asked, error=exc.as_dict())
    try:
        async with web.admission.slot():
            outcome = await run_in_threadpool(run_answer, web.ask_service, question, None)
    except Shed as exc:
        await _refusing(request, exc)
        asked = question[: web.max_question_chars]
        return _page(web, "ask.html", 503, headers=_retry_after(exc.retry_after_s), asked=asked, error=exc.as_dict())
    note(request.scope, outcome)
    return _outcome_page(web, outcome, answerable=True, asked=question)


async def get_section(request: Request) -> Response:
    web = _web(request)
    as_json = prefers_json(request.headers.get("accept"))
    section_id = section_id_from_ref(request.path_params["ref"])
    # the only acquire of this request
    reply = section_reply(web.registry.acquire(), web.registry.load_error, section_id)
    # JSON or HTML by Accept, so a cache must key on it (RFC 9110 section 12.5.5), errors too.
    vary = {"Vary": "Accept"}
    if reply.http_status != 200:
        if as_json:
            return _json(reply.body, reply.http_status, reply.index_version, vary)
        if reply.http_status == 503:
            return _page(web, "unavailable.html", 503, headers=vary, detail=reply.body["detail"])
        return _page(web, "not_found.html", 404, headers=vary, what="section", key=echoed(section_id))
    # Strong: the version addresses the corpus the text comes from, and the presentation
    # fingerprint the code and templates that lay it out, so one tag is one byte sequence.
    kind = "json" if as_json else "html"
    assert reply.index_version is not None  # a 200 carries the acquired index's version
    tag = entity_tag(["section", kind, web.presentation, reply.index_version, section_id], weak=False)
    headers, conditional_reply = _validated(request, tag, reply.index_version, vary, None if as_json else web)
    if conditional_reply:
        return conditional_reply
    if as_json:
        return _json(reply.body, 200, extra=headers)
    return _page(web, "section.html", 200, headers=headers, section=reply.body)


async def get_sections_page(request: Request) -> Response:
    """Every section id of the acquired index with its title and parent (``?grep=``: those whose
    id or title holds the word, any case): the ids a question's ``expected`` names."""
    web = _web(request)
    grep = request.query_params.get("grep", "")
    index = web.registry.acquire()  # the only acquire of this request
    if index is None:
        return _page(web, "unavailable.html", 503, detail=web.registry.load_error or "no index is installed")
    # Strong: the rows are a function of the index version and the word; the layout of the presentation.
    tag = entity_tag(["sections", web.presentation, index.version, grep], weak=False)
    headers, conditional_reply = _validated(request, tag, index.version, page=web)
    if conditional_reply:
        return conditional_reply
    rows = section_rows(index.sections.values(), grep)
    # the box is refilled, up to a length (a page never grows with the URL) and never with a display spoof
    shown = without_bidi(grep.strip())[:ECHO_MAX_CHARS]
    return _page(
        web,
        "sections.html",
        200,
        headers=headers,
        rows=rows,
        grep=shown,
        total=len(index.sections),
        index_version=index.version,
    )


@dataclass(frozen=True)
class RenderedListing:
    """The question list page for one list of outcomes: status, strong tag (200 only), HTML."""

    http_status: int
    tag: str | None
    html: str


def render_listing(web: WebState, rows: list) -> RenderedListing:
    view = listing_page(rows)
    html = _render(web, "index.html", rows=view.rows, versions=view.versions)
    if view.http_status != 200:
        return RenderedListing(view.http_status, None, html)
    # Strong: the page is a function of its rows, the versions and the presentation.
    tag = entity_tag(["listing", web.presentation, encode({"rows": view.rows, "v": view.versions})], weak=False)
    return RenderedListing(200, tag, html)


async def get_index_page(request: Request) -> Response:
    web = _web(request)
    rows = await web.listing.get()
    # Rendered once per list: the requests that awaited one build share its page too.
    page = web.listing.rendered(rows, functools.partial(render_listing, web))
    if page.tag is None:
        return _html(page.html, page.http_status)
    headers, conditional_reply = _validated(request, page.tag, None, page=web)
    return conditional_reply or _html(page.html, 200, headers=headers)


def _outcome_page(web: WebState, outcome: Outcome, **context: Any) -> HTMLResponse:
    """The question page for an answer that is not served from the memo (a free-text answer, or
    a fixed one that failed), with the retry advice its status carries. While the model loads
    the page also asks again by itself after ``Retry-After`` (a refresh, which needs no script
    under the pages' CSP): the reader gets the answer without doing anything."""
    loading = isinstance(outcome, ServiceFailed) and outcome.error == "embedder_loading"
    refresh_s = outcome.retry_after_s if isinstance(outcome, ServiceFailed) and loading else None
    return _page(
        web,
        "question.html",
        outcome.http_status,
        outcome.index_version,
        headers=_retry(web, outcome),
        a=outcome.as_dict(),
        state=state_of(outcome),
        refresh_s=refresh_s,
        **context,
    )


async def get_question_page(request: Request) -> Response:
    web = _web(request)
    qid = request.path_params["qid"]
    q = web.by_id.get(qid)
    if q is None:
        return _not_found_page(web, "question", qid)
    served = await serve_fixed(web, web.registry.acquire(), q)  # the only acquire of this request
    if not isinstance(served, Served):
        note(request.scope, served)
        return _outcome_page(web, served, answerable=q.answerable)
    answer = served.entity.answer
    note(request.scope, answer, served.budget)
    # Weak, as the answer's: the page shows the budget of the request that rendered it.
    tag = entity_tag(["page", served.entity.etag, web.presentation, str(q.answerable)], weak=True)
    headers, conditional_reply = _validated(request, tag, answer.index_version, page=web)
    return conditional_reply or _page(
        web,
        "question.html",
        answer.http_status,
        headers=headers,
        a=served.entity.as_dict(served.budget),
        state=state_of(answer),
        answerable=q.answerable,
    )


async def get_css(request: Request) -> Response:
    """The stylesheet, fresh for 300 s, then revalidated by its strong tag (a digest of its bytes)."""
    web = _web(request)
    tag_headers = {"ETag": web.css_tag, **_JSON_HEADERS}  # nosniff: a stylesheet only as text/css
    headers = {"Cache-Control": "max-age=300", **tag_headers}
    status = conditional_status(
        _field(request.scope, b"if-match"), _field(request.scope, b"if-none-match"), web.css_tag
    )
    if status == 412:
        return _precondition_failed()
    if status == 304:
        return Response(status_code=304, headers=headers)
    return Response(web.css, media_type="text/css", headers=headers)


async def http_error(request: Request, exc: Exception) -> Response:
    """Unknown paths and wrong methods, in the same JSON error shape as the routes: a method
    the server does not recognise is 501 (RFC 9110 section 9.1), a known one the path does not
    allow 405 with every method the path's routes allow (section 10.2.1); ``OPTIONS *`` is
    told what the server supports (section 9.3.7)."""
    assert isinstance(exc, HTTPException)
    method = request.method
    if not recognised(method):
        detail = f"the method {echoed(method)} is not implemented here"
        return _json({"error": "not_implemented", "detail": detail}, 501)
    if request.scope["path"] == "*" and method == "OPTIONS":
        return Response(status_code=204, headers={"Allow": ", ".join(SERVER_WIDE)})
    error = "not_found" if exc.status_code == 404 else "http_error"
    # no-cache as on every error of the routes: a 404 and a 405 are heuristically cacheable
    # (RFC 9110 section 15.1), and a route or method added by a release would not be seen.
    headers = {**_JSON_HEADERS, "Cache-Control": CACHE_CONTROL, **(exc.headers or {})}
    if exc.status_code == 405:
        headers["Allow"] = ", ".join(allowed(request.app.router.routes, request.scope))
    return JSONResponse({"error": error, "detail": exc.detail}, status_code=exc.status_code, headers=headers)


@contextlib.asynccontextmanager
async def lifespan(app: Starlette) -> AsyncIterator[None]:
    warmup = app.state.web.warmup
    if warmup is not None:
        await run_in_threadpool(warmup)
    observer: Observer | None = app.state.observer
    if observer is not None:
        observer.started()
    yield
    if observer is not None:
        await run_in_threadpool(observer.close)  # queued spans go out before the process ends


ANSWER_ROUTE = Route("/answer/{qid}", FixedAnswerEndpoint(), methods=["GET"])


class SectionRef(Convertor[str]):
    """A section reference, folders included (``advanced/clients.md:timeouts``), that neither starts
    nor ends with a slash: a stray trailing slash is the slash redirect's to handle, not part of an id."""

    regex = r"[^/](?:.*[^/])?"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("section", SectionRef())


ROUTES = (
    Route("/health", get_health),
    Route("/health/live", get_live),
    Route("/health/ready", get_ready),
    Route("/questions", get_questions),
    ANSWER_ROUTE,
    Route("/ask", post_ask, methods=["POST"]),
    Route("/ask", get_ask_page, methods=["GET"]),
    Route("/section/{ref:section}", get_section),  # a page in a sub-folder: advanced/clients.md:timeouts
    Route("/sections", get_sections_page),
    Route("/", get_index_page),
    Route("/q/{qid}", get_question_page),
    Route("/static/site.css", get_css),
)


def create_app(
    *,
    registry: Registry,
    fixture_service: Service,
    ask_service: Service,
    questions: QuestionSet,
    thresholds: Thresholds,
    status: Callable[[], Mapping[str, Any]],
    clock: Callable[[], float],
    rate_store: BucketStore,
    about: About,
    warmup: Callable[[], object] | None = None,
    observer: Observer | None = None,
    ask_ready: Callable[[Index], object] | None = None,
) -> Starlette:
    """The served contract over explicit dependencies.

    ``registry``: what /health and /section acquire. ``fixture_service``: answers the fixed
    questions (recorded drafts, committed vectors). ``ask_service``: answers free text
    (extractive drafter, local embedder). ``status``: the on-disk index status as a dict
    (``IndexStatus.as_dict``), called by /health, so it must be cheap (``StatusCache``).
    ``clock`` and ``rate_store`` drive the rate limiter with the allowance in
    ``thresholds.rate_limit``; ``warmup`` (optional) runs once at lifespan startup (what it
    returns is unused). ``about``: the project's words for its corpus, shown by every page.
    ``observer`` (optional, ``observability.build_observer``) hears every
    request after its response, the limiter's refusals included: it wraps the limiter.
    ``ask_ready`` (optional; default: always ready) is what ``/health/ready`` asks of the
    served index: it raises ``EmbedderLoading`` while free text cannot be embedded yet.
    """
    rl, a = thresholds.rate_limit, thresholds.admission
    qbody = questions_body(questions)
    example = ask_example(questions)
    css = (TEMPLATES / "site.css").read_text(encoding="utf-8")
    allowance = Allowance(rl.max_requests_per_minute, rl.max_client_burst, rl.trusted_proxy_hops)
    # One pace for every refusal the worker sends, the limiter's 429s and admission's 503s:
    # at most refusals_per_s a second, so clients that ignore Retry-After cannot fill the loop.
    refusals = RefusalPacing(a.refusals_per_s, max_hold_s=a.retry_after_s)
    app = Starlette(
        routes=list(ROUTES),
        # First in the list = outermost of the user middleware: the observer sees every response,
        # then the limiter decides before any handler.
        middleware=[
            *([Middleware(ObserveMiddleware, observer, ROUTES, rl.trusted_proxy_hops)] if observer else []),
            Middleware(RateLimitMiddleware, allowance=allowance, store=rate_store, clock=clock, pace=refusals.pace),
            Middleware(DirectRoute, route=ANSWER_ROUTE),  # what the limiter admits for it: no router
        ],
        exception_handlers={HTTPException: http_error},
        lifespan=lifespan,
    )
    relative_slash_redirects(app.router)  # 307 Location from the path, never the Host header
    app.state.observer = observer
    fixed: FixedAnswers[Outcome] = FixedAnswers(
        functools.partial(run_fixed, fixture_service), thresholds.budget.request_deadline_ms, fixture_service.clock
    )
    flights: SingleFlight[Served | Outcome] = SingleFlight()
    app.state.web = WebState(
        registry=registry,
        fixture_service=fixture_service,
        ask_service=ask_service,
        questions=questions,
        by_id={q.id: q for q in questions.questions},
        max_question_chars=thresholds.ask.max_question_chars,
        status=status,
        listing=Listing(registry, functools.partial(answer_all, fixed, questions)),
        templates=_templates(about, example),
        css=css,
        css_tag=entity_tag([css], weak=False),
        warmup=warmup,
        fixed=fixed,
        presentation=presentation_fingerprint(TEMPLATES, thresholds.ask.max_question_chars, about, example),
        questions_body=qbody,
        questions_tag=entity_tag([qbody], weak=False),
        admission=Admission(AdmissionLimits(a.max_in_flight, a.max_queued, a.max_queue_wait_ms, a.retry_after_s)),
        refusals=refusals,
        fixed_flights=flights,
        body_timeout_s=BODY_TIMEOUT_S,
        ask_ready=ask_ready or (lambda index: None),
    )
    return app
