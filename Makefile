# dfd — make test | make run | make lint | make bench
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: venv lock test test-fast test-js web-vendor lint checkov run bench clean

venv: $(STAMP)

## Installs exactly the versions in requirements/dev.lock (every dependency, dev included).
$(STAMP): pyproject.toml requirements/dev.lock
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c requirements/dev.lock -e '.[dev]'
	touch $(STAMP)

## Regenerates requirements/dev.lock from pyproject.toml's ranges (newest versions that fit), and from it the runtime's
## pins functions/requirements.txt (what `sam build` installs); then `make venv`.
lock:
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet 'pip-tools==7.6.2'
	$(BIN)/pip-compile --quiet --upgrade --extra dev --strip-extras --allow-unsafe --no-emit-index-url \
		--no-emit-find-links -o requirements/dev.lock pyproject.toml
	$(BIN)/pip-compile --quiet --strip-extras --allow-unsafe --no-emit-index-url --no-emit-find-links \
		-c requirements/dev.lock -o functions/requirements.txt pyproject.toml

## The whole suite: lint, types, unit, integration (moto), e2e (local stack over HTTP).
## Line coverage of functions/ is reported and must stay at 90 % or more (pyproject.toml [tool.coverage]).
test: lint test-js
	$(BIN)/pytest --cov --cov-report=term $(PYTEST_ARGS)

## npm packages, exactly as their lock files say: the Uppy plugin's (clients/uppy) and the pages' (web; it installs a
## copy of clients/uppy, so a change there reinstalls it).
UPPY_STAMP := clients/uppy/node_modules/.installed
WEB_STAMP := web/node_modules/.installed

$(UPPY_STAMP): clients/uppy/package.json clients/uppy/package-lock.json
	cd clients/uppy && npm ci --no-audit --no-fund
	touch $@

$(WEB_STAMP): web/package.json web/package-lock.json clients/uppy/package.json $(wildcard clients/uppy/src/*.js)
	cd web && npm ci --no-audit --no-fund
	touch $@

## Rebuilds web/vendor/uppy (Uppy, its Dashboard and Golden Retriever, and @dfd/uppy, bundled by esbuild).
web-vendor: $(WEB_STAMP)
	cd web && npm run vendor && npm run vendor-swagger-ui

## The plugin's tests (node's test runner with the real @uppy/core), then: the committed web/vendor is what
## `make web-vendor` makes from the locked packages.
test-js: $(UPPY_STAMP) web-vendor
	cd clients/uppy && npm test
	git diff --exit-code --stat -- web/vendor || { echo "web/vendor is not what make web-vendor makes: commit it" >&2; exit 1; }

## The local stack in the foreground until Ctrl-C: moto on :4566, HTTP API + web pages on :3000, Lambda Invoke
## API on :3001, the SQS poller; all from template.yaml, state in memory. Options: make run RUN_ARGS='--help'
run: $(STAMP)
	$(BIN)/python -m dfdlocal $(RUN_ARGS)

## The benchmark suite (docs/performance.md): the same as scripts/bench. Options: make bench BENCH_ARGS='--help'
bench: $(STAMP)
	$(BIN)/python -m dfdbench $(BENCH_ARGS)

test-fast: $(STAMP)
	$(BIN)/pytest tests/unit tests/integration $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check functions scripts tests
	$(BIN)/ruff format --check functions scripts tests
	$(BIN)/mypy
	$(MAKE) --no-print-directory checkov

## Security scan of template.yaml: checkov in its own venv (its pins conflict with ours), created once; fails on any
## failed check (a check that does not apply is skipped in the template itself, with its reason).
CHECKOV_VENV := .venv-checkov
CHECKOV_STAMP := $(CHECKOV_VENV)/.installed

$(CHECKOV_STAMP):
	test -x $(CHECKOV_VENV)/bin/python || $(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/python -m pip install --quiet 'checkov==3.3.30'
	touch $(CHECKOV_STAMP)

checkov: $(CHECKOV_STAMP)
	$(CHECKOV_VENV)/bin/checkov --quiet --compact --skip-download --framework cloudformation -f template.yaml

clean:
	rm -rf $(VENV) $(CHECKOV_VENV) .pytest_cache .mypy_cache .ruff_cache .coverage clients/uppy/node_modules web/node_modules
