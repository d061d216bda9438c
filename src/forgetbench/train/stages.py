"""Stages — pretrain -> finetune -> retain — each cached under the run folder by a hash of its
inputs (the exact token ids it trains on, the loop config, the parent model), so re-running a
study skips finished work and an interrupted stage resumes from its checkpoint.

Layout: `{run}/models/{stage}-{key}/model/` (save_pretrained) and `stage.json` (inputs, loss
curve, timings, and the size and sha256 of every file the stage wrote), written last: its
presence is what "finished" means. A cached stage is checked against it before reuse; a damaged
one is set aside as `{stage}-{key}.corrupt-<timestamp>` and recomputed (`train.integrity`).
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from forgetbench import __version__
from forgetbench.cache import shared_entry
from forgetbench.config import RunConfig
from forgetbench.data.tofu import load_tofu
from forgetbench.device import place_model, precision, process_state, stage_cost
from forgetbench.errors import DataError
from forgetbench.io import atomic_write_json
from forgetbench.methods._terms import per_sample_nll
from forgetbench.modeling.encoding import Encoded, collate, encode_prompt_answer
from forgetbench.modeling.forward import forward_logits
from forgetbench.modeling.limits import position_limit
from forgetbench.modeling.loading import load_model, load_tokenizer, save_model
from forgetbench.modeling.lora import apply_lora, merge_lora
from forgetbench.modeling.templates import PromptTemplate, resolve_template
from forgetbench.records import QARecord
from forgetbench.train.checkpoint import CHECKPOINT_DIR
from forgetbench.train.integrity import FILES_KEY, file_manifest, read_record, reuse_finished
from forgetbench.train.loop import train_loop
from forgetbench.train.loop_config import LoopConfig, config_key, length_grouping_default
from forgetbench.train.sharding import whole_model

STAGE_FILE = "stage.json"
# Bump when the training code changes what a stage produces, so old caches are not reused.
TRAINING_CODE_VERSION = 2


@dataclass(frozen=True)
class StageResult:
    name: str
    model_dir: Path
    cached: bool
    losses: list[float]
    seconds: float
    peak_gpu_mib: float | None = None  # peak GPU memory while it trained; None on the CPU


def stage_key(
    *,
    name: str,
    examples: Sequence[Encoded],
    config: LoopConfig,
    parent: str,
    lora: dict[str, Any] | None = None,
) -> str:
    header = {
        "stage": name,
        "config": config_key(config),
        "parent": parent,
        "lora": lora,
        "code": TRAINING_CODE_VERSION,
    }
    return inputs_key(header, ([e.input_ids, e.labels] for e in examples))


def inputs_key(header: dict[str, Any], rows: Iterable[list[list[int]]]) -> str:
    """The cache key of a training run: its settings, then the exact token ids it trains on."""
    digest = hashlib.sha256(json.dumps(header, sort_keys=True, default=str).encode())
    for row in rows:
        digest.update(json.dumps(row).encode())
    return digest.hexdigest()[:16]


def publish_model(
    folder: Path, model: Any, tokenizer: Any, *, record: Path, payload: dict[str, Any]
) -> None:
    """Finish a run: save the model, drop the resume checkpoint it supersedes, and write the record
    whose presence means "finished" last, with the size and sha256 of every file in `folder`
    (the model, an unlearning run's snapshots) but `work/` (the log and scratch: never reused).
    Under `accelerate launch` only the main process writes; every process waits for it (and
    gives its shards of a sharded model)."""
    state = process_state()
    whole = whole_model(model)
    if state.is_main_process:
        save_model(whole, tokenizer, folder / "model")
        shutil.rmtree(folder / "work" / CHECKPOINT_DIR, ignore_errors=True)
        files = file_manifest(folder, skip=(record.name, "work/"))
        atomic_write_json(record, {**payload, FILES_KEY: files})
    state.wait_for_everyone()


def model_fingerprint(model_dir: Path) -> str:
    """What a child stage hashes as its parent: the parent's own stage key when forgetbench made it
    (cheap, exact), an unlearning run's name and snapshot, else the path (an external model is
    identified by its name)."""
    stage_file = model_dir.parent / STAGE_FILE
    if stage_file.is_file():
        # Parsed, not hashed: the stage that made this folder checked its files when it was
        # reused; a record that does not even parse is named here rather than guessed around.
        record, problem = read_record(stage_file)
        if record is None or not isinstance(record.get("key"), str):
            raise DataError(
                f"model folder {model_dir} belongs to a damaged cached stage "
                f"({problem or 'stage.json has no key'})",
                f"re-run the command that made it, or move {model_dir.parent} aside",
            )
        return record["key"]
    # An unlearning run's model or snapshot: its run folder's name carries the run's key
    # (train/unlearn.py), the same in every output folder linking to it; the path would not be.
    for run in (model_dir.parent, model_dir.parent.parent):
        if (run / "unlearn.json").is_file():
            return f"{run.name}/{model_dir.relative_to(run)}"
    return external_fingerprint(model_dir)


def external_fingerprint(model_dir: Path) -> str:
    """A model folder forgetbench did not make, identified by its path and what is in it: the
    bytes of its config and the name, size and modification time of every other file (weights
    are not read: a 7B model's 14 GB would cost a minute per command). A user who saves another
    model to the same folder gets new stages, not the old model's cached finetuning. A Hub id
    (no such folder) is its name: the Hub's cache folders already name the revision."""
    model_dir = Path(model_dir)
    if not model_dir.is_dir():
        return str(model_dir)
    digest = hashlib.sha256(str(model_dir).encode())
    for path in sorted(p for p in model_dir.rglob("*") if p.is_file()):
        name = str(path.relative_to(model_dir))
        if name == "config.json":
            digest.update(path.read_bytes())
        else:
            info = path.stat()
            digest.update(f"{name}:{info.st_size}:{info.st_mtime_ns}".encode())
    return f"{model_dir}@{digest.hexdigest()[:16]}"


def run_stage(
    run_dir: str | Path,
    *,
    name: str,
    parent: str | Path,
    examples: Sequence[Encoded],
    config: LoopConfig,
    lora: dict[str, Any] | None = None,
    progress: bool = True,
    parent_model: Any = None,
    trust_remote_code: bool = False,
) -> StageResult:
    """Train `parent` (a model folder or Hugging Face id) on `examples` with the answer-token NLL
    and save it. `parent_model`, a (model, tokenizer) pair, is used instead of loading `parent`
    when given (a freshly built model; `parent` then names it for the cache key)."""
    parent_id = model_fingerprint(Path(parent)) if Path(parent).exists() else str(parent)
    key = stage_key(name=name, examples=examples, config=config, parent=parent_id, lora=lora)
    folder = Path(run_dir) / "models" / f"{name}-{key}"
    with shared_entry(folder, kind="models", name=folder.name):
        record = folder / STAGE_FILE
        info = reuse_finished(folder, STAGE_FILE, required=("losses", "seconds"))
        if info is not None:
            return StageResult(
                name, folder / "model", True, info["losses"], info["seconds"],
                info.get("peak_gpu_mib"),
            )  # fmt: skip

        if parent_model is not None:
            model, tokenizer = parent_model
            model = place_model(model, dtype=precision().dtype)
        else:
            model, tokenizer = load_model(parent, trust_remote_code=trust_remote_code)
        limit = position_limit(model)
        if limit is not None:  # a text longer than a learned position table would index past it
            examples = [
                replace(e, input_ids=e.input_ids[:limit], labels=e.labels[:limit]) for e in examples
            ]
        if lora:
            model = apply_lora(model, **lora)

        with stage_cost() as cost:
            result = train_loop(
                model,
                examples,
                loss_fn=answer_nll,
                collate_fn=lambda batch: collate(batch, pad_id=tokenizer.pad_token_id),
                config=config,
                out_dir=folder / "work",
                progress=progress,
            )
            if lora:
                model = merge_lora(model)
        publish_model(
            folder,
            model,
            tokenizer,
            record=record,
            payload={
                "stage": name,
                "key": key,
                "parent": str(parent),
                "parent_fingerprint": parent_id,
                "examples": len(examples),
                "config": config_key(config),
                "lora": lora,
                "losses": result.losses,
                **cost.record(),
                "forgetbench": __version__,
            },
        )
        return StageResult(
            name, folder / "model", False, result.losses, cost.seconds, cost.peak_gpu_mib
        )


def answer_nll(model: Any, batch: dict) -> Any:
    """TOFU's finetuning loss: mean NLL over each sample's answer tokens, then the batch mean."""
    return per_sample_nll(forward_logits(model, batch), batch["labels"]).mean()


def loop_config(config: RunConfig) -> LoopConfig:
    t = config.train
    return LoopConfig(
        lr=t.lr,
        epochs=t.epochs,
        batch_size=t.batch_size,
        per_device_batch_size=t.per_device_batch_size,
        weight_decay=t.weight_decay,
        warmup_epochs=t.warmup_epochs,
        seed=config.seed,
        checkpoint_every=t.checkpoint_every,
        group_by_length=length_grouping_default(t.group_by_length),
    )


def encode_qa(
    records: Sequence[QARecord], tokenizer: Any, template: PromptTemplate, *, max_length: int
) -> list[Encoded]:
    return [
        encode_prompt_answer(
            tokenizer,
            template.prompt(r.question, tokenizer),
            template.answer(r.answer),
            max_length=max_length,
        )
        for r in records
    ]


def finetune_split(
    config: RunConfig, *, model: str, data: str, split: str, out: str | Path, progress: bool = True
) -> StageResult:
    """`forgetbench finetune`: train `model` on one TOFU-layout split (`full` -> the finetuned
    model; a retain split -> a retain model)."""
    records = load_tofu(data, split)
    tokenizer = load_tokenizer(model, trust_remote_code=config.model.trust_remote_code)
    template = resolve_template(config.model.template, tokenizer, model)
    examples = encode_qa(records, tokenizer, template, max_length=config.train.max_length)
    lora = (
        {"rank": config.train.lora_rank, "alpha": config.train.lora_alpha}
        if config.train.lora
        else None
    )
    name = "finetune" if split == "full" else f"retain-{split}"
    return run_stage(
        out,
        name=name,
        parent=model,
        examples=examples,
        config=loop_config(config),
        lora=lora,
        progress=progress,
        trust_remote_code=config.model.trust_remote_code,
    )
