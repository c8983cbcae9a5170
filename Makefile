# Two commands on a fresh machine: `make run` and `make test`. Both create .venv from uv.lock.
UV_VERSION := 0.13.9
UV := .tools/bin/uv
PORT ?= 8501

.PHONY: run test bench samples sync clean

$(UV):
	python3 -m venv .tools
	.tools/bin/pip install --quiet --disable-pip-version-check "uv==$(UV_VERSION)"

sync: $(UV)
	$(UV) sync --locked --quiet

run: sync
	$(UV) run --locked --no-sync python -m pages._shared.serve run app.py --server.headless true \
	  --server.address 127.0.0.1 --server.port $(PORT) --browser.gatherUsageStats false

# Lint, types and layers first (fast, and a red CI says which): ruff's rule set and mypy's
# configuration are in pyproject.toml, the import-linter contracts in .importlinter.
test: sync
	$(UV) run --locked --no-sync ruff check .
	$(UV) run --locked --no-sync mypy
	$(UV) run --locked --no-sync lint-imports
	$(UV) run --locked --no-sync pytest $(PYTEST_ARGS)

bench: sync
	$(UV) run --locked --no-sync python benches/run_all.py

samples: sync
	$(UV) run --locked --no-sync python sample_runs/generate.py

clean:
	rm -rf .venv .tools .pytest_cache
