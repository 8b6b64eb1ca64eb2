# rag-contract: the served contract in one image. Needs no API key and no volume: the
# corpus, the committed index and the recorded drafts are baked in, and the service
# writes nothing at run time.
#
#   docker build -t rag-contract .
#   docker run --rm --read-only --cap-drop ALL --security-opt no-new-privileges:true \
#     -p 127.0.0.1:8000:8000 rag-contract
#
# (the hardened run: README "Hardened container", compose.yaml). Without registry access,
# .ci/docker-image provides the base image and builds this file unchanged.
#
# Every input is copied BY NAME (no `COPY . .`): what the image serves is exactly what
# this file lists, and a stray file in the checkout (a spend ledger, a .env) cannot ride in.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PORT=8000 \
    ORT_DISABLE_TELEMETRY=1

WORKDIR /app

# The package first: its layer changes less often than the data below.
COPY pyproject.toml requirements.lock ./
COPY rag_contract/ rag_contract/
COPY pytest_ragcontract/ pytest_ragcontract/
RUN pip install -c requirements.lock .

# What is served: the corpus, the index built from it (and the embedder model it was built
# with, tuned on this corpus by `rag-contract adapt`), the question set, the bars, the
# prices, and the recorded drafts the fixed questions replay.
COPY corpus/ corpus/
COPY project.yaml ./
COPY index/ index/
COPY models/minilm-l6-adapted.onnx models/
COPY eval/questions.yaml eval/thresholds.yaml eval/prices.yaml eval/
COPY eval/fixtures/ eval/fixtures/

# Not root: the process needs to read /app and nothing else.
RUN useradd --system --uid 10001 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin app
USER app

EXPOSE 8000

# No HEALTHCHECK, on purpose. Every HTTP path sits behind the per-client rate limiter, and a
# probe is a client like any other: a probe every few seconds spends its own bucket and,
# behind a proxy (trusted_proxy_hops > 0), shares a bucket with real users from the same
# address. Let the orchestrator probe the TCP port (a connect never reaches the limiter),
# or add a path the limiter does not see; GET /health is for people and dashboards.
CMD ["rag-contract", "serve", "--host", "0.0.0.0"]
