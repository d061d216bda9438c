"""Shared fixtures. The real benchmark files live in ../shared/data beside the repository (CI puts
them there); they are read in place, never copied into the project."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# Hermetic by default: every stage stays in its test's folder, never in the user's shared cache
# (set before any fixture or worker process starts). tests/test_cache.py turns it on in tmp.
os.environ["FORGETBENCH_CACHE"] = "off"


def _shared_data() -> Path:
    configured = os.environ.get("FORGETBENCH_SHARED_DATA")
    return Path(configured) if configured else REPO.parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    path = _shared_data()
    if not path.is_dir():
        if os.environ.get("CI"):
            pytest.fail(f"CI must provide the real benchmark data at {path}")
        pytest.skip(f"real benchmark data not found at {path} (set FORGETBENCH_SHARED_DATA)")
    return path


@pytest.fixture(scope="session")
def tofu_logs(shared_data: Path) -> Path:
    return shared_data / "tofu" / "reference-eval-logs"


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    # Tests never touch the network, and never write into the user's Hugging Face cache.
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path_factory.getbasetemp() / "hf-home"))


@pytest.fixture(scope="session")
def tiny_study(tmp_path_factory: pytest.TempPathFactory):
    """The default study's models at tiny scale, trained once per session (about 45 s):
    (run_dir, data_dir, base, finetuned, retain90) with StageResults for the models."""
    from forgetbench.benchmarks.mini import generate_mini
    from forgetbench.train.mini import finetune_mini, pretrain_base

    run = tmp_path_factory.mktemp("tiny-study")
    data = run / "data"
    generate_mini(data, scale="tiny", seed=0)
    base = pretrain_base(run, data, scale="tiny", progress=False)
    finetuned = finetune_mini(run, data, base.model_dir, split="full", scale="tiny", progress=False)
    retain = finetune_mini(
        run, data, base.model_dir, split="retain90", scale="tiny", progress=False
    )
    return run, data, base, finetuned, retain
