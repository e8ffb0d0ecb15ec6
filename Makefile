# The two commands of the README. Everything else is set up by them, in .venv, on a fresh machine.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip --disable-pip-version-check --quiet
TEST_POSTGRES_URL ?= postgresql://127.0.0.1:5432/test
PYTEST_ARGS ?=
# Test workers: the suite waits on processes, sockets and a browser more than it computes, so more workers than
# cores pays (measured in docs/development.md). The slowest tests are printed at the end of every run.
TEST_WORKERS ?= 4
# The PostgreSQL pass's workers, while the SQLite pass runs beside it.
TEST_POSTGRES_WORKERS ?= 2
# pytest keeps the test modules it rewrites (for its assertion messages) as bytecode in __pycache__: with
# PYTHONDONTWRITEBYTECODE set, every worker of every run would rewrite them all again (seconds of CPU each).
PYTEST := PYTHONDONTWRITEBYTECODE= $(BIN)/pytest -n $(TEST_WORKERS) --dist worksteal --durations=30 --durations-min=1

.PHONY: install install-test run test test-sqlite test-postgres test-postgres-marked bench lint clean screenshot

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --upgrade pip

# What the installed package is built from (pyproject.toml's packages, by folder, and what it reads). An install
# is stamped, and done again only when one of these changed since: a file edited, added or removed (a folder's
# own time moves then), so `make run` with nothing changed starts at once. tests/test_packaging.py holds the folders
# to pyproject.toml's packages.
PACKAGE_FOLDERS := svc clients api jobs domain integrations storage machines contracts examples
PACKAGE_SOURCES := pyproject.toml README.md $(shell find $(PACKAGE_FOLDERS) -not -path '*/__pycache__*')
INSTALLED := $(VENV)/.installed
INSTALLED_TEST := $(VENV)/.installed-test

# Installs the project itself (not editable), so tests and `svc` run what a wheel would ship.
install: $(INSTALLED)

install-test: $(INSTALLED_TEST)

# setuptools builds in ./build and copies what it finds there: a module removed (or left by another branch) would be
# installed again from it, so every install starts without it.
$(INSTALLED): $(BIN)/python $(PACKAGE_SOURCES)
	rm -rf build
	$(PIP) install .
	@touch $@

# The test extra is the package and more: its install stands for the plain one too.
$(INSTALLED_TEST): $(BIN)/python $(PACKAGE_SOURCES)
	rm -rf build
	$(PIP) install '.[test]'
	@touch $@ $(INSTALLED)

run: install
	$(BIN)/svc run

# The two backends run side by side: the SQLite pass waits on processes, sockets and a browser more than it computes,
# and the PostgreSQL pass fills those waits (measured in docs/development.md). SQLite's output streams; PostgreSQL's is
# kept in .venv/test-postgres.log and printed after it.
test: install-test
	@if $(BIN)/python scripts/postgres_reachable.py "$(TEST_POSTGRES_URL)"; then \
		echo "make test: SQLite (every test) and PostgreSQL (the tests marked both_backends) side by side"; \
		$(MAKE) --no-print-directory test-postgres-marked TEST_WORKERS=$(TEST_POSTGRES_WORKERS) > $(VENV)/test-postgres.log 2>&1 & \
		postgres=$$!; \
		$(MAKE) --no-print-directory test-sqlite; sqlite=$$?; \
		wait $$postgres; postgres=$$?; \
		cat $(VENV)/test-postgres.log; \
		echo "make test: SQLite $$( [ $$sqlite = 0 ] && echo passed || echo FAILED ), PostgreSQL ($(TEST_POSTGRES_URL)) $$( [ $$postgres = 0 ] && echo passed || echo FAILED )"; \
		[ $$sqlite = 0 ] && [ $$postgres = 0 ]; \
	else \
		echo "make test: PostgreSQL is not reachable at $(TEST_POSTGRES_URL); the suite runs on SQLite only"; \
		$(MAKE) --no-print-directory test-sqlite; \
	fi

test-sqlite:
	@echo "== test suite on SQLite"
	SVC_TEST_DATABASE=sqlite SVC_TEST_INSTALLED=1 $(PYTEST) $(PYTEST_ARGS)

test-postgres:
	@echo "== test suite on PostgreSQL"
	SVC_TEST_DATABASE="$(TEST_POSTGRES_URL)" SVC_TEST_INSTALLED=1 $(PYTEST) $(PYTEST_ARGS)

# The second backend of `make test`: the tests marked both_backends, whose result depends on the database (every
# test ran on SQLite just before). docs/development.md says which those are.
test-postgres-marked:
	@echo "== test suite on PostgreSQL: the tests marked both_backends"
	SVC_TEST_DATABASE="$(TEST_POSTGRES_URL)" SVC_TEST_INSTALLED=1 SVC_TEST_BOTH_BACKENDS_ONLY=1 $(PYTEST) $(PYTEST_ARGS)

# The README's pictures of the web board: a fresh demo database, `svc serve` on a free port, headless Chromium.
screenshot: install-test
	$(BIN)/python scripts/screenshot.py --out docs

# Figures and ratios, printed; never asserted in tests (the machines are shared and noisy). wrk is used when
# installed (Debian: apt-get install wrk), else a Python load generator; the output says which.
bench: install
	$(BIN)/python bench/run.py $(BENCH_ARGS)

lint: install-test
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

clean:
	rm -rf $(VENV) build *.egg-info
