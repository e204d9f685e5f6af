# `make demo` and `make test` work from a clean clone: each creates .venv when it is missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-dev
RUN_STAMP := $(VENV)/.installed-run

.PHONY: demo test lint constraints docs audit bench bench-peers soak soak-ha install install-dev clean image image-test

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# Two stamps: `demo` and `install` need only what the product runs on (`pip install -e .`);
# `test`, `bench` and `soak` add the dev toolchain (pytest, mypy, schemathesis, psycopg, ...).
# The dev stamp implies the run stamp, so `make demo` after `make test` installs nothing.
# Both install the versions pinned in constraints.txt (`make constraints`), so CI gets the same every time.
$(RUN_STAMP): $(BIN)/python pyproject.toml constraints.txt
	$(BIN)/pip install --quiet -c constraints.txt -e .
	touch $(RUN_STAMP)

$(STAMP): $(BIN)/python pyproject.toml constraints.txt
	$(BIN)/pip install --quiet -c constraints.txt -e '.[dev]'
	touch $(RUN_STAMP) $(STAMP)

# constraints.txt again, from the newest versions pyproject.toml allows: a throwaway venv gets
# `.[dev]` (which includes the runtime dependencies and the extras), and pip freeze pins the lot.
CONSTRAINTS_VENV := .venv-constraints
constraints:
	rm -rf $(CONSTRAINTS_VENV)
	$(PYTHON) -m venv $(CONSTRAINTS_VENV)
	$(CONSTRAINTS_VENV)/bin/pip install --quiet --upgrade pip
	$(CONSTRAINTS_VENV)/bin/pip install --quiet -e '.[dev]'
	{ echo '# Every package `.[dev]` installs, pinned: `make install`, `make install-dev` and the Containerfile'; \
	  echo '# install with -c constraints.txt. Regenerate (newest versions pyproject.toml allows): make constraints'; \
	  $(CONSTRAINTS_VENV)/bin/pip freeze --all --exclude-editable; } > constraints.txt
	rm -rf $(CONSTRAINTS_VENV)

# The command is then .venv/bin/capture-sync: put .venv/bin on the PATH, or `pipx install .` (README).
install: $(RUN_STAMP)

install-dev: $(STAMP)

demo: $(RUN_STAMP)
	$(BIN)/capture-sync demo

# ruff first (lint, then the formatter's check: [tool.ruff] in pyproject.toml), then mypy (connector and
# sources, from [tool.mypy]): a finding, an unformatted file or a type error fails the target; then the
# suite, then the example plugin's own tests (its folder is its pytest root).
test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/python -m pytest
	$(BIN)/python -m pytest -q examples/capture-sync-example-source

# For developers: apply ruff's safe fixes, then format the tree (what `make test` checks).
lint: $(STAMP)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

# The documentation site (mkdocs.yml) into site/; --strict: a broken link or anchor, or a page left
# out of the nav, is an error. `make test` runs the same build (tests/docs/test_site.py).
docs: $(STAMP)
	$(BIN)/python -m mkdocs build --strict --site-dir site

# The container image (Containerfile, docs/container.md). `make image`: FROM python:3.12-slim, as a
# user builds it (docker or podman, a registry to pull from). `make image-test`: FROM a Debian base
# made here by debootstrap (no registry needed; root, podman, buildah, debootstrap), then
# tests/image runs `capture-sync --help` and `demo` inside it. CI runs it after `make test`.
CONTAINER ?= $(shell command -v podman || command -v docker)
VERSION = $(shell sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)
# podman writes OCI images by default, which have no HEALTHCHECK; docker's format keeps it
IMAGE_FORMAT = $(if $(findstring podman,$(CONTAINER)),--format docker)
# more build options, e.g. IMAGE_ARGS="--build-arg EXTRAS=postgres" (docs/container.md lists them)
IMAGE_ARGS ?=

image:
	$(CONTAINER) build $(IMAGE_FORMAT) --build-arg VERSION=$(VERSION) $(IMAGE_ARGS) -f Containerfile -t capture-sync:$(VERSION) .

image-test: $(STAMP)
	$(BIN)/python -m pytest -m image tests/image

# Known vulnerabilities in the installed packages: pip-audit against PyPI's advisory data. Offline,
# or behind a mirror without that data, pip-audit would report "no known vulnerabilities" having
# audited nothing; tools/audit.py then says NOT A FULL AUDIT, names what was skipped, and checks only
# the advisories vendored in tools/advisories.toml (those our floors were raised past). Not in
# `make test`, whose offline part of it is tests/test_dependency_floors.py.
audit: $(STAMP)
	$(BIN)/python tools/audit.py

bench: $(STAMP)
	$(BIN)/python benchmarks/run_all.py

# dlt and the Singer SDK in a venv of their own (pinned in benchmarks/peers/requirements.txt), never in
# the product's; then capture-sync, dlt, Singer and a plain httpx loop on one CSV, alternating rounds
# (~15 min at the defaults). Smaller: make bench-peers PEERS_ARGS="--rounds 1 --records 10000".
PEERS_VENV := .venv-peers
PEERS_STAMP := $(PEERS_VENV)/.installed
PEERS_ARGS ?=

$(PEERS_STAMP): benchmarks/peers/requirements.txt
	$(PYTHON) -m venv $(PEERS_VENV)
	$(PEERS_VENV)/bin/pip install --quiet -r benchmarks/peers/requirements.txt
	touch $(PEERS_STAMP)

bench-peers: $(STAMP) $(PEERS_STAMP)
	$(BIN)/python benchmarks/peers/run.py $(PEERS_ARGS)

# The reliability suite's chaos test at 20,000 records (edited and added to as it runs) and 50 kills,
# and a 30 s API outage; prints kills survived, records, versions, captured once, refused, lost,
# doubled, stale (~5 min).
soak: $(STAMP)
	SOAK_RECORDS=20000 SOAK_KILLS=50 SOAK_OUTAGE_S=30 $(BIN)/python -m pytest tests/reliability/test_chaos.py tests/reliability/test_outage.py -s -q -p no:cacheprovider

# The failover test at 24 kills of a leading daemon (two integrations, three daemons each, one
# PostgreSQL ledger) with 1,000 records each; prints the failover times (median, max).
soak-ha: $(STAMP)
	HA_KILLS=24 HA_RECORDS=1000 $(BIN)/python -m pytest tests/reliability/test_failover.py -s -q -p no:cacheprovider

clean:
	rm -rf $(VENV) $(PEERS_VENV) $(CONSTRAINTS_VENV) capture-sync-demo .pytest_cache .hypothesis site
