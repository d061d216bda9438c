# Two commands on a fresh machine: `make demo` and `make test`. Both install first.
PYTHON ?= python3
VENV ?= .venv
# The CPU wheel is pinned here (not in pyproject) so `pip install forgetbench` on a GPU box keeps CUDA torch.
TORCH_SPEC ?= torch==2.13.0
SHARED ?= ../shared
# The suite runs in this many pytest-xdist processes (one torch thread each; whole files stay on one
# worker so a module's trained fixture is built once), handed out in the order tests/conftest.py
# sorts them (--no-loadscope-reorder: xdist's default puts the files with most tests first). 0 runs
# it in this process.
TEST_WORKERS ?= 2
BIN := $(VENV)/bin
# uv resolves and installs torch (TORCH_SPEC) and the package in one go, in a fraction of pip's time.
# It does not read pip's configuration, so the wheel folder pip is pointed at (where a machine keeps
# its CPU torch build) is passed on.
UV := $(BIN)/uv pip install --quiet --python $(BIN)/python
# Python caches each module's bytecode as it first imports it, unless PYTHONDONTWRITEBYTECODE is set
# (as on CI machines and in many Docker images): then every test subprocess compiled transformers
# & co again from source (300 CPU-s more). Compiling the whole install instead (pip's default,
# uv's --compile-bytecode) takes 37 CPU-s for some 19,000 files, most never imported (Ray's
# dashboard, pandas, sympy, transformers' other models). So our own commands cache what they
# import, once, into the virtual environment (and src/'s and tests/' ignored __pycache__).
unexport PYTHONDONTWRITEBYTECODE
# The package alone (what the demo needs), then the development extras (tests, lint, lm-eval, Ray).
CORE_STAMP := $(VENV)/.forgetbench-core-installed
STAMP := $(VENV)/.forgetbench-installed

.PHONY: install demo test test-study lint clean

FIND_LINKS := $(foreach d,$(shell $(PYTHON) -m pip config get global.find-links 2>/dev/null),--find-links $(d))

define VENV_WITH_UV
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	test -x $(BIN)/uv || $(BIN)/python -m pip install --quiet uv
endef

$(CORE_STAMP): pyproject.toml
	$(VENV_WITH_UV)
	$(UV) $(FIND_LINKS) "$(TORCH_SPEC)" -e .
	touch $(CORE_STAMP)

# One resolution of the package with its extras, not the core's and then the extras' (~10 s less).
$(STAMP): pyproject.toml
	$(VENV_WITH_UV)
	$(UV) $(FIND_LINKS) "$(TORCH_SPEC)" -e '.[dev]'
	touch $(CORE_STAMP) $(STAMP)

install: $(STAMP)

LOGS := $(SHARED)/data/tofu/reference-eval-logs

# The demo: TOFU's forget quality and model utility of the published Llama-2 finetuned model
# (from the TOFU authors' logs), then a short built-in study into runs/demo with its report: the
# tiny miniature on forget10, every method with a snapshot per epoch, every metric family and
# attack, two shadow models for LiRA/RMIA (the headline study has four). A few minutes cold on 2
# cores (docs/speed.md), seconds warm: stages come from the shared cache when an earlier run made
# them (FORGETBENCH_CACHE, default ~/.cache/forgetbench).
DEMO_STUDY := run --scale tiny --splits forget10 --out runs/demo eval.mia_shadows=2

demo: $(CORE_STAMP)
	@test -d "$(LOGS)" || { echo "make demo: needs the TOFU reference logs at $(LOGS) (set SHARED=...)"; exit 1; }
	HF_HUB_OFFLINE=1 $(BIN)/forgetbench compare \
		--reference $(LOGS)/ft_epoch5_lr1e-05_llama2-7b_retain90_wd0 \
		--candidate $(LOGS)/ft_epoch5_lr1e-05_llama2-7b_full_wd0
	HF_HUB_OFFLINE=1 $(BIN)/forgetbench $(DEMO_STUDY)
	@echo
	@echo "The report: runs/demo/report.html (open it in a browser)."
	@echo "Next: the headline study, 50 authors (about 25 min on 2 cores, minutes on a GPU):"
	@echo "  $(BIN)/forgetbench run --scale small --splits forget10 --out runs/small"
	@echo "Your own Hugging Face model on TOFU: docs/your-model.md"

# The browser test renders the HTML report in Debian's Chromium; as root, it is installed if missing,
# beside the Python install rather than after it (both mostly wait on downloads and disks). A
# failed Chromium install only skips the browser test, which names what to install.
CHROMIUM_INSTALL := test -x /usr/bin/chromium || [ "$$(id -u)" != 0 ] || { apt-get update -qq \
	&& DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }

test:
	@{ $(CHROMIUM_INSTALL); } & chromium=$$!; $(MAKE) --no-print-directory install; installed=$$?; \
		wait $$chromium || echo "Chromium was not installed: the browser test will skip"; \
		exit $$installed
	HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 $(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=40

# Only the whole tiny study through `forgetbench run` (every method, every metric, report).
test-study: install
	HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 $(BIN)/python -m pytest -q -m study

lint: install
	$(BIN)/ruff check src tests
	$(BIN)/ruff format --check src tests

clean:
	rm -rf $(VENV) build src/*.egg-info .pytest_cache
