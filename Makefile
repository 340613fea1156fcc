# Ombre Brain — the two commands: `make demo` (seed a demo persona and serve it) and `make test`.
# Both set up .venv themselves. torch is pinned to the CPU build on disk (pyproject.toml).

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
HOST   ?= 127.0.0.1
PORT   ?= 8765
DATA   ?= ./demo-data
PYTEST_ARGS ?=

export HF_HUB_OFFLINE=1
export TRANSFORMERS_OFFLINE=1
export ANONYMIZED_TELEMETRY=False
export PIP_DISABLE_PIP_VERSION_CHECK=1

# `make e2e-openwebui`: the real Open WebUI (installed once into its own virtualenv under E2E_CACHE, 7.5 GB with torch) in
# front of `ombre-brain serve` and the stand-in upstream, two chats driven in headless Chromium (tests/e2e/). Not part
# of `make test`. E2E_ARGS passes options on, e.g. E2E_ARGS="--screenshots docs/screenshots".
E2E_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/ombre-brain/e2e-openwebui
OPENWEBUI_VERSION ?= 0.12.4
E2E_ARGS ?=

.PHONY: venv test demo lint bench eval clean browser e2e-openwebui

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "torch==2.13.0"
	$(PY) -m pip install -q -e ".[dev]"
	touch $(STAMP)

venv: $(STAMP)

# Debian's Chromium for the debug-page browser tests; the tests skip with a reason if it cannot be had.
browser:
	@command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
	  (apt-get update -qq >/dev/null 2>&1; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium fonts-wqy-microhei >/dev/null 2>&1) \
	  || echo "chromium not installed: browser tests will be skipped"; }

# The whole suite in embedded Chroma mode with the SQLite ledger (tests marked with `store_mode` also cover a
# real `chroma run`; tests/test_postgres.py runs several servers on a real PostgreSQL), then the recall,
# gateway and purge tests again with every Brain in Chroma server mode, then the store, recall, gateway,
# facts and forgetting tests again with every ledger in PostgreSQL (pgserver).
HTTP_MODE_TESTS = tests/test_turn.py tests/test_gateway_budgets.py tests/test_sessions_restart.py tests/test_forget.py
PG_MODE_TESTS = tests/test_store.py tests/test_turn.py tests/test_gateway_budgets.py tests/test_sessions_restart.py \
	tests/test_forget.py tests/test_forget_residue.py tests/test_facts.py tests/test_facts_restore.py \
	tests/test_facts_turn.py tests/test_ingest.py tests/test_dream.py tests/test_concurrency.py tests/test_crash.py \
	tests/test_server_kill.py tests/test_portability.py tests/test_migration.py tests/test_isolation.py \
	tests/test_provenance.py

test: venv browser
	$(PY) -m pytest -q $(PYTEST_ARGS)
	OMBRE_TEST_CHROMA=http $(PY) -m pytest -q $(PYTEST_ARGS) $(HTTP_MODE_TESTS)
	OMBRE_TEST_LEDGER=postgres $(PY) -m pytest -q $(PYTEST_ARGS) $(PG_MODE_TESTS)

e2e-openwebui: venv browser
	$(PY) -m tests.e2e.openwebui --cache "$(E2E_CACHE)" --version $(OPENWEBUI_VERSION) $(E2E_ARGS)

demo: venv
	$(VENV)/bin/ombre-brain demo --data $(DATA) --host $(HOST) --port $(PORT)

lint: venv
	$(VENV)/bin/ruff check ombre_brain tests

bench: venv
	$(VENV)/bin/ombre-brain bench --buckets 10000

eval: venv
	$(VENV)/bin/ombre-brain eval locomo --data ../shared/data/locomo
	$(VENV)/bin/ombre-brain eval recall --data ../shared/data/zh_recall/companion_zh.yaml

clean:
	rm -rf $(VENV) $(DATA) .pytest_cache
