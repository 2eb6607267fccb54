# The two commands: `make run` and `make test`. Everything else is set up on the way.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: run test test-all fuzz compiled lint bench clean catalog

$(STAMP): pyproject.toml Makefile
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/python -c 'import sys; sys.exit(sys.version_info < (3, 11))' || \
		{ echo "kb needs Python >= 3.11 (set PYTHON=python3.11)"; exit 1; }
	$(BIN)/python -m pip install --quiet --upgrade pip
	# --no-compile: pip would byte-compile every module of every package (transformers, scipy...) one at
	# a time, half the set-up's CPU; Python compiles the modules kb imports on first use instead
	$(BIN)/python -m pip install --quiet --no-compile -e '.[mlx,dev]'
	# mlx-whisper declares torch but only its weight converter uses it: install it without dependencies
	$(BIN)/python -m pip install --quiet --no-compile --no-deps 'mlx-whisper>=0.4.3'
	@touch $(STAMP)

run: $(STAMP)
	$(BIN)/kb run

# The suite in parallel, one file per worker: two workers a core (most tests wait on a daemon, a model
# server or a socket, so one a core leaves the cores idle half the time; on 2 cores, 4 workers took
# 3 m 48 s where 2 took 5 m 3 s and 6 took 3 m 50 s). TEST_WORKERS=N sets another number. kb's own
# modules are compiled first: the workers and the processes the tests start then import them from
# their cache, even where writing one is turned off.
# The libraries in the venv are installed uncompiled (see above), so the suite lets Python write their
# bytecode as it imports them, whatever PYTHONDONTWRITEBYTECODE says: with it set (as on many CI
# machines) each of the suite's hundreds of processes compiled every library module it imported again
# (4 m 47 s of wall and 430 CPU-seconds for the suite, against 4 m 3 s and 345 with the bytecode kept).
TEST_WORKERS ?= $(shell $(BIN)/python -c 'import os; print(2 * len(os.sched_getaffinity(0)))' 2>/dev/null || echo 4)
PYTEST := PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile

compiled: $(STAMP)
	@$(BIN)/python -m compileall -q -j 0 knowledge daemon bot cli mcpserver tests bench >/dev/null

# make test: everything but the soak tests, and a fixed share of each fuzz test's samples
test: compiled
	$(PYTEST) -m 'not soak'

# make fuzz: every sample of every fuzz test
fuzz: compiled
	$(PYTEST) -m fuzz --fuzz-full

# make test-all: the whole suite, soak tests and every fuzz sample included
test-all: compiled
	$(PYTEST) --fuzz-full

lint: $(STAMP)
	$(BIN)/ruff check knowledge daemon bot cli mcpserver tests bench
	$(BIN)/ruff format --check knowledge daemon bot cli mcpserver tests bench

# The message catalog: extract what kb writes to people, then bring each language's catalog up to date
# (new messages come in untranslated: translate them in knowledge/words/locale/*/LC_MESSAGES/kb.po)
catalog: $(STAMP)
	$(BIN)/pybabel extract -F babel.cfg -k tr -k ntr:1,2 -k N_ --no-default-keywords --no-location \
		--omit-header --sort-output -o knowledge/words/locale/kb.pot .
	$(BIN)/pybabel update -i knowledge/words/locale/kb.pot -d knowledge/words/locale -D kb --no-wrap \
		--omit-header --no-fuzzy-matching --ignore-obsolete

bench: $(STAMP)
	$(BIN)/python bench/retrieval.py
	$(BIN)/python bench/ingest.py

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
