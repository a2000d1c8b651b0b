# Two commands set everything up on a fresh machine: `make demo` and `make test`.
# Both create .venv on first use (idempotent: the stamp file records the installed pyproject).
PY ?= python3.11
VENV := .venv
STAMP := $(VENV)/.installed

.PHONY: demo test lint docs venv

$(STAMP): pyproject.toml
	test -x $(VENV)/bin/python || $(PY) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -e '.[test,docs]'
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	HF_HUB_OFFLINE=1 $(VENV)/bin/spotdiff demo

test: $(STAMP)
	HF_HUB_OFFLINE=1 $(VENV)/bin/python -m pytest -n 2 --dist loadscope -q

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/lint-imports

docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet
