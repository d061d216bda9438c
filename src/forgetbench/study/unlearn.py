"""What `forgetbench unlearn` unlearns: the study's finetuned model (`resolve`), the forget split
and its retain split, and the method's options (the model's defaults, then the user's), run
through the engine."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from forgetbench.benchmarks.corpus import corpus_benchmark
from forgetbench.config import RunConfig
from forgetbench.config_names import retain_split_for
from forgetbench.data.chunks import text_chunks
from forgetbench.data.tofu import load_tofu
from forgetbench.errors import DataError
from forgetbench.eval.runner import tofu_root
from forgetbench.methods.base import (
    UnlearnMethod,
    build_method,
    get_method,
    method_options,
    trains,
)
from forgetbench.methods.plugins import method_source
from forgetbench.methods.refusals import load_refusals
from forgetbench.modeling.loading import load_tokenizer
from forgetbench.records import QARecord, TextRecord
from forgetbench.rows import SETTINGS
from forgetbench.study.format_data import format_texts, split_authors
from forgetbench.study.inputs import Study
from forgetbench.study.resolved import resolve
from forgetbench.train.items import ALTERNATE_FIELDS
from forgetbench.train.loop_config import LoopConfig
from forgetbench.train.presets import unlearn_preset
from forgetbench.train.unlearn import UnlearnResult, run_unlearning


def forget_records(tofu: str | Path, split: str, method: UnlearnMethod) -> list[QARecord]:
    """The forget split's records. A method that trains toward alternate answers (AltPO) gets
    TOFU's `{split}_perturbed` records instead: the same questions and answers in the same order
    (checked), with the perturbed answers it draws its alternates from."""
    plain = load_tofu(tofu, split)
    if not method.required_inputs() & ALTERNATE_FIELDS:
        return plain
    perturbed = load_tofu(tofu, f"{split}_perturbed")
    for index, (a, b) in enumerate(zip(plain, perturbed, strict=False)):
        if (a.question, a.answer) != (b.question, b.answer):
            raise DataError(
                f"{split}_perturbed row {index} is not {split} row {index} (question or answer "
                f"differs), so its perturbed answers cannot serve {method.name} as alternates",
                f"use the {split}_perturbed file that belongs to this {split}",
            )
    if len(plain) != len(perturbed):
        raise DataError(
            f"{split}_perturbed has {len(perturbed)} rows but {split} has {len(plain)}",
            f"use the {split}_perturbed file that belongs to this {split}",
        )
    return perturbed


def document_sets(
    study: Study, split: str, config: RunConfig, inputs: frozenset[str] = frozenset()
) -> tuple[list[Any], list[TextRecord], tuple[str, ...]]:
    """A document benchmark's forget set `split` and its retain set as text chunks, cut as its
    reference code cuts them (`CorpusBenchmark.chunk_tokens`, capped at the study's length less
    its BOS: the built-in model's positions, or train.max_length for the user's; and
    `chunk_mode`)."""
    bench = corpus_benchmark(study.documents or "")
    assert bench is not None  # the study was built from the registered description
    tokenizer = load_tokenizer(study.finetuned, trust_remote_code=config.model.trust_remote_code)
    length = min(bench.chunk_tokens, study.max_length - 1)

    def chunks(documents: list[str]) -> list[TextRecord]:
        return [
            TextRecord(text)
            for text in text_chunks(tokenizer, documents, length=length, mode=bench.chunk_mode)
        ]

    retain = chunks(bench.retain_texts(study.data))
    # The forget corpora the model wrote for this run (RWKU's generated one), else the data's.
    source = study.corpus or study.data
    # A method's own corpus where the benchmark has one for what it reads (`inputs`: RWKU's DPO
    # pairs, rejection tuning's questions and refusals), else the forget set's text chunks.
    own = bench.method_forget(source, split, inputs, config) if bench.method_forget else None
    if own is not None:
        return own[0], retain, own[1]
    # The split's texts as the run's config chooses them (RWKU's targets, one or a batch, and
    # rwku.corpus_model), else a request of a series.
    chosen = bench.chosen_sets(study.data, config)
    texts = chosen[split] if split in chosen else bench.forget_texts(split, study.data)
    return chunks(texts(source)), retain, ()


def resolve_method(
    config: RunConfig, name: str, loop: LoopConfig, method_options: dict[str, object]
) -> tuple[LoopConfig, UnlearnMethod]:
    """The method's loop and options: the model's defaults, then the user's `unlearn.*` and
    `method.*` settings on top. An `unlearn.preset` (a forgetbench/presets file) or a
    `method.preset` the user names replaces the model's tuned hyperparameters; only the options
    that describe the model itself (the method's `model_options`, e.g. RMU's steered layer, which
    must exist in it) are kept. `unlearn.loss_reduction` reaches every method that has the option,
    unless a preset sets it for the method and the user did not set it."""
    u = config.unlearn
    keep = getattr(get_method(name), "model_options", frozenset())
    if u.preset is not None:
        loop, own = unlearn_preset(u.preset, name)
        method_options = {**{k: v for k, v in method_options.items() if k in keep}, **own}
    batch_size = u.batch_size or loop.batch_size
    loop = replace(
        loop,
        lr=u.lr or loop.lr,
        epochs=u.epochs or loop.epochs,
        batch_size=batch_size,
        # The user's per-device size is kept (the loop refuses one that cannot divide the
        # batch); the preset's adapts to the processes, as accumulation does.
        per_device_batch_size=u.per_device_batch_size
        or min(loop.per_device_batch_size, batch_size),
        fit_per_device=not u.per_device_batch_size,
        seed=config.seed,
    )
    user = dict(config.method)
    if "preset" in user:
        method_options = {key: value for key, value in method_options.items() if key in keep}
    fields = {f.name for f in dataclasses.fields(get_method(name))}
    if "loss_reduction" in fields and (
        "loss_reduction" in u.model_fields_set or "loss_reduction" not in method_options
    ):
        method_options = {**method_options, "loss_reduction": u.loss_reduction}
    return loop, build_method(name, {**method_options, **user})


def unlearn_lora(config: RunConfig) -> dict[str, object] | None:
    """`apply_lora`'s options from `unlearn.lora*`, or None to train every weight."""
    u = config.unlearn
    if not u.lora:
        return None
    return {"rank": u.lora_rank, "alpha": u.lora_alpha, "target_modules": u.lora_targets}


def method_config(config: RunConfig, name: str, seed: int | None = None) -> RunConfig:
    """The config one method's run reads: the study's `method.*` options that the method has (a
    study's options are for each of its methods that has them), its `study.method_settings` over
    `unlearn.*` and those, and `seed` (a `study.seeds` entry) as the loop's seed."""
    settings = config.study.method_settings.get(name)
    update: dict[str, Any] = {}
    own = {k: v for k, v in config.method.items() if k in method_options(name)}
    if own != config.method:
        update["method"] = own
    if settings is not None:
        loop = {k: v for k in ("lr", "epochs") if (v := getattr(settings, k)) is not None}
        update["unlearn"] = config.unlearn.model_copy(update=loop)
        update["method"] = {**own, **settings.options}
    if seed is not None:
        update["seed"] = seed
    return config.model_copy(update=update) if update else config


def resolved_run(
    study: Study, config: RunConfig, name: str, seed: int | None = None
) -> tuple[RunConfig, LoopConfig, UnlearnMethod]:
    """One method's run as it will train: its config (`method_config`), loop and method with
    every option in force (the model's defaults, the preset, then the user's settings)."""
    config = method_config(config, name, seed)
    loop, method_options = study.unlearn_defaults(name)
    loop, method = resolve_method(config, name, loop, method_options)
    return config, loop, method


def finetune_settings(study: Study) -> dict[str, Any]:
    """The finetuned (and retain) models' training settings, when this study trained them: every
    row of a study starts from them. Empty for a model of the user's."""
    loop = study.finetune_loop
    if loop is None:
        return {}
    return {
        f"{SETTINGS}finetune_lr": loop.lr,
        f"{SETTINGS}finetune_epochs": loop.epochs,
        f"{SETTINGS}finetune_batch_size": loop.batch_size,
    }


def run_settings(
    study: Study, config: RunConfig, name: str, seed: int | None = None
) -> dict[str, Any]:
    """What one method's run trained with, as a results row records it (plain values, one
    results.csv column each): the unlearning preset, the loop's learning rate, epochs and
    batch size, every option of the method (`settings/method.<option>`) and, for a method of the
    user's file, a digest of that file. The config a study records holds what the user set
    (`unlearn.lr: null` when the preset's applies); these are the values in force. An instructed
    method (icu) trains nothing: its row records its own options, no loop's."""
    config, loop, method = resolved_run(study, config, name, seed)
    settings: dict[str, Any] = finetune_settings(study)
    if trains(method):
        settings.update(loop_settings(config, loop, study))
    for key, value in dataclasses.asdict(method).items():  # type: ignore[call-overload]
        plain = value is None or isinstance(value, str | int | float | bool)
        settings[f"{SETTINGS}method.{key}"] = value if plain else json.dumps(value)
    source = method_source(type(method))
    if source is not None:
        settings[f"{SETTINGS}plugin_digest"] = source
    return settings


def loop_settings(config: RunConfig, loop: LoopConfig, study: Study) -> dict[str, Any]:
    """The unlearning loop's settings in force, as a results row records them."""
    return {
        f"{SETTINGS}unlearn_preset": config.unlearn.preset or study.unlearn_preset,
        f"{SETTINGS}unlearn_lr": loop.lr,
        f"{SETTINGS}unlearn_epochs": loop.epochs,
        f"{SETTINGS}unlearn_batch_size": loop.batch_size,
        f"{SETTINGS}unlearn_lora": bool(config.unlearn.lora),
        # Only where set: a row of a run over every block keeps the settings it had.
        **(
            {f"{SETTINGS}unlearn_layers": json.dumps(config.unlearn.layers)}
            if config.unlearn.layers
            else {}
        ),
    }


def unlearn_split(
    study: Study,
    config: RunConfig,
    out: Path,
    split: str,
    name: str,
    seed: int | None = None,
    *,
    fmt: str = "qa",
    after: tuple[str, Path] | None = None,
    progress: bool = False,
) -> tuple[UnlearnResult, LoopConfig]:
    """One method's unlearning run on one split (at `seed`, with its `study.method_settings`): a
    cached stage, shared by the study's trajectory, the meta-evaluation's attacked models, the
    cross-format matrix and the sequences of requests. `fmt` other than qa presents the forget
    and retain sets as that format's training texts (study/transfer.py); `after` = (previous
    split, model unlearnt of it) makes the run a later request of a sequence: it starts from that
    model and forgets only the questions `split` adds to the previous one (a document
    benchmark's request is its own fold of documents: all of it)."""
    config, loop, method = resolved_run(study, config, name, seed)
    tofu = tofu_root(study.data)
    forget: list[Any]
    retain: list[Any]
    refusals = load_refusals(config.unlearn.refusals_file)
    if study.documents is not None:
        forget, retain, own = document_sets(study, split, config, method.required_inputs())
        # The corpus's own refusals (RWKU's reject.json), unless unlearn.refusals_file is set.
        refusals = own if own and config.unlearn.refusals_file is None else refusals
    else:
        forget = forget_records(tofu, split, method)
        retain = load_tofu(tofu, retain_split_for(split))
    start, label = study.finetuned, split
    if fmt != "qa":
        tokenizer = load_tokenizer(
            study.finetuned, trust_remote_code=config.model.trust_remote_code
        )
        forget = format_texts(
            study.data, fmt, "forget", study.template, tokenizer,
            authors=split_authors(tofu, split),
        )  # fmt: skip
        retain = format_texts(study.data, fmt, "retain", study.template, tokenizer)
        label = f"{split}-{fmt}"
    if after is not None:
        if study.documents is None:  # TOFU's nested splits: the questions this request adds
            earlier = {r.question for r in load_tofu(tofu, after[0])}
            forget = [r for r in forget if r.question not in earlier]
        start, label = after[1], f"{split}-after-{after[0]}"
    result = run_unlearning(
        out, model_dir=start, forget=forget, retain=retain, method=method, config=loop,
        template=study.template, refusals=refusals,
        split=label, max_length=study.max_length,
        snapshot_every=config.unlearn.snapshot_every, progress=progress,
        trust_remote_code=config.model.trust_remote_code, lora=unlearn_lora(config),
        layers=config.unlearn.layers,
    )  # fmt: skip
    return result, loop


def unlearn_command(
    config: RunConfig,
    *,
    split: str,
    out: str | Path,
    progress: bool = True,
) -> UnlearnResult:
    """`forgetbench unlearn`: the configured method's run on `split` from the finetuned model."""
    out = Path(out)
    study, _ = resolve(config, out, progress=progress, command="unlearn")
    return unlearn_split(study, config, out, split, config.unlearn.method, progress=progress)[0]
