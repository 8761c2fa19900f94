# The two commands of README's Quick start. Each sets up a fresh machine by itself (.ci/setup).
.PHONY: demo test setup bench lint

setup:
	@bash .ci/setup

# the demo also serves the live view (port 0: a free one; the URL is printed first)
WEB ?= 127.0.0.1:0
DURATION ?= 30

demo: setup
	.venv/bin/streamkit monitor --web $(WEB) --duration $(DURATION)

test: setup
	.venv/bin/python -m pytest -n auto --dist loadfile tests

bench: setup
	.venv/bin/python benchmarks/engine_overhead.py

lint: setup
	.venv/bin/python -m pip install -q -e ".[dev]"
	.venv/bin/python -m ruff check streamkit tests benchmarks examples
	.venv/bin/python -m mypy --strict streamkit/core streamkit/protocols
