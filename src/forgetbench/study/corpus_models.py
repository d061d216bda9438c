"""The models of a document benchmark's study (`forgetbench run --benchmark muse|wmdp|rwku`):
the finetuned and retain models trained over the miniature's base as the benchmark's
description says (`corpus_models`; RWKU's original and reference models, pretrained further), or
the user's model (`given_study`)."""

from __future__ import annotations

import time
from functools import partial
from pathlib import Path

from forgetbench.benchmarks.corpus import CorpusBenchmark
from forgetbench.benchmarks.mini.scales import get_scale
from forgetbench.config import RunConfig
from forgetbench.modeling.loading import load_tokenizer
from forgetbench.modeling.templates import resolve_template
from forgetbench.study.given import given_model
from forgetbench.study.inputs import Study, external_defaults
from forgetbench.study.miniature import Miniature
from forgetbench.train import corpus_stages
from forgetbench.train import mini as mini_training


def corpus_models(
    config: RunConfig, bench: CorpusBenchmark, data: Path, mini: Miniature, *, progress: bool
) -> Study:
    """The finetuned and retain models (cached stages over the miniature's base) and the study
    on them; every forget set of the benchmark shares the one retain model."""
    base = mini.base.model_dir
    stages = {}
    bases = {"finetune": base, "retain": base}
    if bench.pretrained is not None:
        # Pretraining knowledge (RWKU): the retain model starts from the base's pretraining
        # without the folder's targets; with no texts to pretrain on further, the two pretrained
        # models are the study's original and reference models themselves.
        started = time.perf_counter()
        without = mini_training.pretrain_base(
            mini.out, mini.data, scale=mini.scale, seed=mini.seed, progress=progress,
            without=bench.pretrained.unknown(data),
        )  # fmt: skip
        mini.timings[f"{bench.name}_pretrain_without"] = time.perf_counter() - started
        bases["retain"] = without.model_dir
        if not bench.finetune_texts(data):
            stages = {"finetune": mini.base, "retain": without}
    for role, texts in (("finetune", bench.finetune_texts), ("retain", bench.retain_model_texts)):
        if role in stages:
            continue
        started = time.perf_counter()
        # Pretraining knowledge is pretrained further as the corpus was; documents are finetuned.
        stage = (
            corpus_stages.finetune_corpus if bench.pretrained is None
            else corpus_stages.pretrain_further
        )  # fmt: skip
        stages[role] = stage(
            mini.out, bases[role], texts(data), name=f"{bench.name}-{role}", scale=mini.scale,
            seed=mini.seed, progress=progress, train=mini.train,
        )  # fmt: skip
        mini.timings[f"{bench.name}_{role}"] = time.perf_counter() - started
    layers = get_scale(mini.scale).model.layers
    # The recipe that trained both models above, not the TOFU-shaped finetuning's
    # (`mini.finetune_loop()`): what the rows and the relearning default read.
    loop = mini_training.mini_finetune_config(
        mini.scale, seed=mini.seed, train=mini.train, documents=bench.pretrained is None,
        knowledge=bench.pretrained is not None,
    )[0]  # fmt: skip
    return Study(
        data,
        stages["finetune"].model_dir,
        base,
        # Every forget set of the folder, and the run's own (an RWKU batch is one of them all).
        {
            split: stages["retain"].model_dir
            for split in {**bench.sets(data), **bench.chosen_sets(data, config)}
        },  # fmt: skip
        mini.template,
        mini.max_length,
        partial(mini_training.mini_unlearn_defaults, layers=layers, preset=bench.unlearn_preset),
        benchmark=bench.eval_layout,
        finetune_lr=loop.lr,
        finetune_loop=loop,
        unlearn_preset=bench.unlearn_preset,
        documents=bench.name,
    )


def given_study(config: RunConfig, bench: CorpusBenchmark, data: Path) -> Study:
    """The study of the user's finetuned model (`--model`) on their folder: no base and no
    retain model of ours; scored as `forgetbench eval` scores it (its template, train.max_length)
    and unlearnt with the settings the TOFU-shaped study gives a model of the user's (TOFU's
    recipe; `unlearn.preset` names another, e.g. the benchmark's)."""
    model = given_model(config)
    assert model is not None
    tokenizer = load_tokenizer(model, trust_remote_code=config.model.trust_remote_code)
    return Study(
        data,
        Path(model),
        None,
        {},
        resolve_template(config.model.template, tokenizer, model),
        config.train.max_length,
        external_defaults,
        benchmark=bench.eval_layout,
        finetune_lr=config.train.lr,
        documents=bench.name,
    )
