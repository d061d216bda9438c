"""`forgetbench run`: the whole study in one command, whichever benchmark the config names. Data ->
base model -> finetuned -> retain models -> every method on every split, with a snapshot per
epoch -> every metric -> results folder and report. Each stage is cached by its inputs, so an
interrupted run resumes where it stopped and a finished one reruns in seconds.

`run_study` is the one place that decides which study a benchmark runs: a document benchmark
registered in `benchmarks/corpus.py` (MUSE, WMDP) runs the study its description makes
(`study/corpus.py`); the built-in miniature and a TOFU-layout folder run the TOFU-shaped study
(`study/tofu.py`). A benchmark with a study of its own is one more branch here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from forgetbench.benchmarks.corpus import corpus_benchmark
from forgetbench.config import RunConfig
from forgetbench.study.corpus import run_corpus_study
from forgetbench.study.pool import quiet_transformers
from forgetbench.study.tofu import run_tofu_study


def run_study(
    config: RunConfig,
    *,
    out: Path,
    progress: bool = True,
) -> dict[str, Any]:
    """`forgetbench run`: the study of the config's model and data (the built-in miniature's
    when it names none), written to `out` as results.json."""
    quiet_transformers()
    documents = corpus_benchmark(config.benchmark.name)
    if documents is not None:  # MUSE, WMDP: the study its description makes
        return run_corpus_study(config, documents, out=out, progress=progress)
    return run_tofu_study(config, out=out, progress=progress)
