# The two commands: `make run` starts everything offline; `make test` runs every test.
VENV := .venv
PY := $(VENV)/bin/python
PORT ?= 8000
HITL_BIND ?= 127.0.0.1
# The address people open: by name, for passkeys refuse an IP address (daphne still binds HITL_BIND).
HITL_SHOWN_HOST := $(if $(filter 127.0.0.1 0.0.0.0 :: ::1 localhost,$(HITL_BIND)),localhost,$(HITL_BIND))
# honcho hands each process its own $PORT, so the web port travels as HITL_PORT.
HITL_PORT := $(PORT)
export HITL_PORT HITL_BIND
# Settings fail closed (DEBUG off, SECRET_KEY required); on a developer's machine make turns debug on.
DEBUG ?= 1
export DEBUG
# Worker processes: one per core (each runs HITL_WORKER_CONCURRENCY conversations at once in threads).
HITL_WORKERS ?= 2
# Without REDIS_URL, `make run` starts a redis-server of this checkout's own too, on a unix socket in
# var/ (bin/local-redis; hitl/settings.py points REDIS_URL there): never one another checkout started.
PROCESSES := $(if $(REDIS_URL),web worker beat,redis web worker beat)
# With a Telegram bot token and no webhook URL, the bot's poller too (telegramlink).
PROCESSES += $(if $(TELEGRAM_BOT_TOKEN),$(if $(TELEGRAM_WEBHOOK_URL),,telegram))

.PHONY: run test setup check screens system-packages test-system-packages
# What does not depend on each other is installed at once (the app's packages, the git tool server's,
# Debian's): a first `make run` waits for the longest, not for their sum.
MAKEFLAGS += --jobs=3

$(VENV)/bin/activate:
	python3 -m venv $(VENV)

$(VENV)/.run-deps: requirements.txt | $(VENV)/bin/activate
	$(VENV)/bin/pip install -q -r requirements.txt
	touch $@

# The reference MCP git server, in a virtualenv of its own: its pinned packages never meet the app's.
GIT_MCP := .tool-venvs/git
$(GIT_MCP)/.installed: toolservers/requirements-git.txt
	python3 -m venv $(GIT_MCP)
	$(GIT_MCP)/bin/pip install -q -r toolservers/requirements-git.txt
	touch $@

$(VENV)/.test-deps: requirements.txt requirements-dev.txt | $(VENV)/bin/activate
	$(VENV)/bin/pip install -q -r requirements-dev.txt
	touch $@ $(VENV)/.run-deps

system-packages:
	bin/ensure-system-packages

test-system-packages:
	bin/ensure-system-packages --test

setup: $(VENV)/.run-deps $(GIT_MCP)/.installed system-packages
	@mkdir -p var && printf '# Written by make: the defaults manage.py uses in this checkout (delete it to run as in production).\nDEBUG=%s\nHITL_PORT=%s\n' "$(DEBUG)" "$(PORT)" > var/development.env
	$(PY) manage.py prepare_run

run: setup
	@echo "hitl starts at http://$(HITL_SHOWN_HOST):$(PORT)/ ; log in as demo (password: demo, or HITL_DEMO_PASSWORD). Ctrl-C stops everything."
	$(VENV)/bin/honcho start -c worker=$(HITL_WORKERS) $(PROCESSES)

# Every test twice, on SQLite and on a throwaway PostgreSQL server, the unit tests and the end-to-end
# tests side by side (bin/run-tests says how). PYTEST_ARGS go to each pytest.
PYTEST_ARGS ?= --durations=25
test: $(VENV)/.test-deps $(GIT_MCP)/.installed test-system-packages
	PY=$(PY) bin/run-tests $(PYTEST_ARGS)

# Screenshots of the pages, taken from a real stack of their own (bench/screens.py, about a minute):
# docs/screens/<scene>-<width>.png and the README's docs/screenshot.png. `bin/screens chat-pending` takes one.
screens: $(VENV)/.test-deps
	bin/ensure-system-packages --test
	bin/screens

check: $(VENV)/.run-deps
	$(PY) manage.py check
