# Two commands on a fresh machine: `make demo` and `make test`. Both install first.
PYTHON ?= python3
VENV ?= .venv
# The CPU wheel is pinned here (not in pyproject) so `pip install forgetbench` on a GPU box keeps CUDA torch.
TORCH_SPEC ?= torch==2.13.0
SHARED ?= ../shared
BIN := $(VENV)/bin
STAMP := $(VENV)/.forgetbench-installed

.PHONY: install demo test lint clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "$(TORCH_SPEC)"
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

LOGS := $(SHARED)/data/tofu/reference-eval-logs

# Until `forgetbench run` exists, the demo is the most complete real thing: TOFU's forget quality
# and model utility of the published Llama-2 and Phi finetuned models, the LUME data counts, and
# the offline pipeline at tiny scale (generate, pretrain, finetune, unlearn with NPO).
demo: install
	@test -d "$(LOGS)" || { echo "make demo: needs the TOFU reference logs at $(LOGS) (set SHARED=...)"; exit 1; }
	@echo "forgetbench run is not built yet; the demo scores the TOFU authors' published logs and trains the tiny offline study."
	HF_HUB_OFFLINE=1 $(BIN)/forgetbench compare \
		--reference $(LOGS)/ft_epoch5_lr1e-05_llama2-7b_retain90_wd0 \
		--candidate $(LOGS)/ft_epoch5_lr1e-05_llama2-7b_full_wd0
	HF_HUB_OFFLINE=1 $(BIN)/forgetbench compare \
		--reference $(LOGS)/ft_epoch5_lr2e-05_phi_retain90_wd0 \
		--candidate $(LOGS)/ft_epoch5_lr2e-05_phi_full_wd0
	HF_HUB_OFFLINE=1 $(BIN)/forgetbench data stats --benchmark lume --path $(SHARED)/data/lume
	@echo "Offline pipeline at tiny scale (forgetbench run and the report are not built yet):"
	HF_HUB_OFFLINE=1 $(BIN)/forgetbench unlearn --scale tiny --method npo --split forget10 --out runs/demo

test: install
	@# The browser test renders the HTML report in Debian's Chromium; as root, install it if missing.
	@test -x /usr/bin/chromium || [ "$$(id -u)" != 0 ] || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; }
	HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 $(BIN)/python -m pytest -q

lint: install
	$(BIN)/ruff check src tests
	$(BIN)/ruff format --check src tests

clean:
	rm -rf $(VENV) build src/*.egg-info .pytest_cache
