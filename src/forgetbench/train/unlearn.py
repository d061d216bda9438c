"""The unlearning engine: turns a method's `required_inputs()` into forward passes and runs the
method's loss through the shared training loop.

Compute is O(|forget set|): an epoch is one pass over the forget set, each forget sample paired
with one retain sample and one refusal string (and, for a method that reads them, one alternate
answer), all redrawn every epoch from (seed, epoch) as TOFU's and open-unlearning's datasets
redraw them on every access. Reference quantities preference methods need (sequence log-probs of
the start model, for every text some epoch uses) are computed once before training; a frozen model
copy is kept only for methods that need its full outputs during training (an exact KL, retain
activations, forget-batch logits). The engine asks a method for its optional parts by
protocol (methods/base.py: constants it prepares, the parameters it trains, the hidden layer it
reads, a two-gradient update through the loop's step hook, train/two_task.py, state across
steps through the loop's stateful loss, `StatefulMethodLoss`), never by name. A method that
trains nothing (an instructed one, `methods.base.trains`) gets the start model back, at step 0.
Partial-layer unlearning (`layers`) trains only the named decoder blocks (train/layers.py).

Its parts: `train/items.py` what a step sees (the draws, the encoded items, their reference
log-probs, the batch), `train/method_loss.py` the method's forward passes and loss; here the
cached stage (`run_unlearning`), its key, LoRA and the loop around them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from forgetbench import __version__
from forgetbench.cache import shared_entry
from forgetbench.device import process_state, stage_cost
from forgetbench.errors import DataError
from forgetbench.methods.base import (
    SelectiveMethod,
    UnlearnMethod,
    trains,
)
from forgetbench.methods.plugins import method_source
from forgetbench.modeling.limits import position_limit
from forgetbench.modeling.loading import load_model, save_model
from forgetbench.modeling.lora import apply_lora, merge_lora
from forgetbench.modeling.templates import PromptTemplate
from forgetbench.records import QARecord
from forgetbench.train.checkpoint import CHECKPOINT_DIR
from forgetbench.train.integrity import reuse_finished
from forgetbench.train.items import (
    ALTERNATE_FIELDS,
    REFERENCE_FIELDS,
    RETAIN_FIELDS,
    TrainingRecord,
    UnlearnItem,
    build_items,
    collate_items,
    with_reference_logps,
)
from forgetbench.train.layers import checked_layers, train_only_layers
from forgetbench.train.loop import NonFiniteLoss, train_loop
from forgetbench.train.loop_config import LoopConfig, config_key
from forgetbench.train.method_loss import method_loss
from forgetbench.train.sharding import whole_model
from forgetbench.train.stages import (
    TRAINING_CODE_VERSION,
    inputs_key,
    model_fingerprint,
    publish_model,
)

UNLEARN_FILE = "unlearn.json"


@dataclass(frozen=True)
class UnlearnResult:
    model_dir: Path
    snapshots: list[tuple[int, Path]]  # (optimizer step, model folder), including step 0
    losses: list[float]
    seconds: float
    cached: bool
    peak_gpu_mib: float | None = None  # peak GPU memory while it trained; None on the CPU


def lora_for_method(method: UnlearnMethod, model: Any, lora: dict[str, Any]) -> dict[str, Any]:
    """`lora` with, when it names no targets and `method` trains only some modules (RMU's
    down-projections of three blocks), adapters on exactly those modules: the architecture's
    default targets (attention projections) would leave the method nothing to train."""
    if lora.get("target_modules") or not isinstance(method, SelectiveMethod):
        return lora
    before = {name: p.requires_grad for name, p in model.named_parameters()}
    try:
        method.select_trainable(model)
        chosen = [name for name, p in model.named_parameters() if p.requires_grad]
    finally:
        for name, parameter in model.named_parameters():
            parameter.requires_grad = before[name]
    if len(chosen) == len(before):
        return lora  # the method trains everything: the architecture's defaults
    linear = {name for name, m in model.named_modules() if isinstance(m, torch.nn.Linear)}
    modules = sorted({name.rsplit(".", 1)[0] for name in chosen} & linear)
    return {**lora, "target_modules": modules} if modules else lora


def unlearn_key(
    method: UnlearnMethod,
    config: LoopConfig,
    parent: str,
    items: Iterable[UnlearnItem],
    *,
    lora: dict[str, Any] | None = None,
    layers: Sequence[int] | None = None,
) -> str:
    source = method_source(type(method))
    header = {
        "method": method.name,
        "options": asdict(method),  # type: ignore[call-overload]
        "config": config_key(config),
        "parent": parent,
        "version": __version__,
        "code": TRAINING_CODE_VERSION,  # the loss arithmetic, as for finetuning stages
        **({"lora": lora} if lora else {}),  # absent without LoRA: earlier runs keep their keys
        **({"layers": sorted(set(layers))} if layers else {}),  # likewise without unlearn.layers
        # A plugin method's code is not named by the version: its file's hash is (absent for a
        # built-in, so no built-in run's key changed).
        **({"source": source} if source else {}),
    }
    # Alternate answers count only where a method reads them, so no other method's key changed.
    return inputs_key(
        header,
        (
            [i.forget.input_ids]
            + ([] if i.retain is None else [i.retain.input_ids])
            + [i.refusal.input_ids]
            + ([] if i.alternate is None else [i.alternate.input_ids])
            for i in items
        ),
    )


def run_unlearning(
    run_dir: str | Path,
    *,
    model_dir: str | Path,
    forget: Sequence[TrainingRecord],
    retain: Sequence[TrainingRecord],
    method: UnlearnMethod,
    config: LoopConfig,
    template: PromptTemplate,
    refusals: tuple[str, ...],
    split: str,
    max_length: int = 512,
    snapshot_every: int = 0,
    progress: bool = True,
    trust_remote_code: bool = False,
    lora: dict[str, Any] | None = None,
    layers: Sequence[int] | None = None,
) -> UnlearnResult:
    """Unlearn `forget` from the model at `model_dir`; snapshots every `snapshot_every` steps
    (0 = each epoch) become `snapshots/step-N/` model folders for trajectory evaluation. With
    `lora` (`apply_lora`'s options) only adapters train, a reference model is the same weights
    with the adapters off, and every saved model has the adapters merged in. With `layers` only
    those decoder blocks train (with LoRA: only they carry adapters). A method that trains
    nothing returns the start model as it is: no folder, no step."""
    if not trains(method):
        return UnlearnResult(Path(model_dir), [(0, Path(model_dir))], [], 0.0, False)
    _require_inputs(method, forget, retain, split)
    model, tokenizer = load_model(model_dir, trust_remote_code=trust_remote_code)
    plan = plan_items(
        model, tokenizer, forget=forget, retain=retain, method=method, config=config,
        template=template, refusals=refusals, max_length=max_length,
    )  # fmt: skip
    key = unlearn_key(
        method, config, model_fingerprint(Path(model_dir)), (i for e in plan for i in e),
        lora=lora, layers=layers,
    )  # fmt: skip
    folder = Path(run_dir) / "unlearn" / f"{method.name}-{split}-{key}"
    # The start model's snapshot is whatever folder this run was given, not the one recorded.
    start = (0, Path(model_dir))
    with shared_entry(folder, kind="unlearn", name=folder.name):
        record = folder / UNLEARN_FILE
        info = reuse_finished(folder, UNLEARN_FILE, required=("snapshots", "losses", "seconds"))
        if info is not None:
            snapshots = [start] + [(s, folder / p) for s, p in info["snapshots"] if s != 0]
            return UnlearnResult(
                folder / "model", snapshots, info["losses"], info["seconds"], True,
                info.get("peak_gpu_mib"),
            )  # fmt: skip

        state = process_state()
        steps_per_epoch = -(-len(plan[0]) // config.batch_size)
        every = snapshot_every or steps_per_epoch

        def snapshot(step: int, current: Any) -> None:
            if step % every:
                return
            whole = whole_model(current)  # every process: a sharded model is gathered
            if state.is_main_process:
                save_model(whole, tokenizer, folder / "snapshots" / f"step-{step}")

        model, result, cost = train_method(
            model, tokenizer, plan, method=method, config=config, split=split,
            work_dir=folder / "work", progress=progress, lora=lora, on_step=snapshot,
            layers=layers,
        )  # fmt: skip
        # Read the snapshots back from disk: after a resume, steps saved before the kill count too.
        snapshots = [start] + sorted(
            (int(p.name.removeprefix("step-")), p) for p in (folder / "snapshots").glob("step-*")
        )
        if snapshots[-1][0] != result.steps:
            snapshots.append((result.steps, folder / "model"))
        publish_model(
            folder,
            model,
            tokenizer,
            record=record,
            payload={
                "method": method.name,
                "options": asdict(method),  # type: ignore[call-overload]
                "split": split,
                **({"layers": sorted(set(layers))} if layers else {}),
                "parent": str(model_dir),
                "config": config_key(config),
                "losses": result.losses,
                "snapshots": [
                    (s, str(p.relative_to(folder)) if p.is_relative_to(folder) else str(p))
                    for s, p in snapshots
                ],
                **cost.record(),
                "forgetbench": __version__,
            },
        )
        return UnlearnResult(
            folder / "model", snapshots, result.losses, cost.seconds, False, cost.peak_gpu_mib
        )


def _require_inputs(
    method: UnlearnMethod,
    forget: Sequence[TrainingRecord],
    retain: Sequence[TrainingRecord],
    split: str,
) -> None:
    """A method that reads a retain batch needs a retain set (RWKU gives none); one that trains
    toward alternate answers needs them on every forget record."""
    if not retain and set(method.required_inputs()) & RETAIN_FIELDS:
        raise DataError(
            f"{method.name} reads a retain batch, and {split} comes with no retain set",
            f"give a retain set, or set {method.name}'s retain weight to 0 where it has one "
            "(method.retain_weight=0), or choose a method with no retain term",
        )
    if not set(method.required_inputs()) & ALTERNATE_FIELDS:
        return
    lacking = [
        f.index if isinstance(f, QARecord) else i
        for i, f in enumerate(forget)
        if not getattr(f, "perturbed_answers", ())
    ]
    if lacking:
        raise DataError(
            f"{method.name} trains toward alternate answers, but {len(lacking)} of the "
            f"{len(forget)} forget questions of {split} have none (first: row {lacking[0]})",
            f"give the forget records perturbed answers (TOFU's {split}_perturbed split)",
        )


def plan_items(
    model: Any,
    tokenizer: Any,
    *,
    forget: Sequence[TrainingRecord],
    retain: Sequence[TrainingRecord],
    method: UnlearnMethod,
    config: LoopConfig,
    template: PromptTemplate,
    refusals: tuple[str, ...],
    max_length: int,
) -> list[list[UnlearnItem]]:
    """Every epoch's items (`build_items`), texts cut to what the model's positions allow."""
    # A text longer than a learned position table would index past it.
    max_length = min(max_length, position_limit(model) or max_length)
    return build_items(
        forget,
        retain,
        tokenizer,
        template,
        refusals=refusals,
        seed=config.seed,
        max_length=max_length,
        epochs=config.epochs,
        alternates=bool(set(method.required_inputs()) & ALTERNATE_FIELDS),
    )


def train_method(
    model: Any,
    tokenizer: Any,
    plan: list[list[UnlearnItem]],
    *,
    method: UnlearnMethod,
    config: LoopConfig,
    split: str,
    work_dir: Path,
    progress: bool,
    lora: dict[str, Any] | None = None,
    on_step: Any = None,
    layers: Sequence[int] | None = None,
) -> tuple[Any, Any, Any]:
    """Unlearn `model` in place on `plan`: the start model's reference log-probs, the method's
    loss (or two-gradient step) through the training loop, checkpoints in `work_dir`. Returns
    (the model, adapters merged; the loop's result; the stage's cost)."""
    needs = set(method.required_inputs())
    if layers:
        layers = checked_layers(model, layers)  # refused before any forward pass
    plan = with_reference_logps(
        model, plan, pad_id=tokenizer.pad_token_id, fields=needs & REFERENCE_FIELDS
    )
    if lora:
        model = apply_lora(model, **lora_for_method(method, model, lora), layers=layers)
    loss, hook = method_loss(method, model)
    if layers and not lora:  # with LoRA the adapters sit in those blocks only already
        train_only_layers(model, layers)
    with stage_cost() as cost:
        try:
            result = train_loop(
                model,
                lambda epoch: plan[epoch],
                loss_fn=None if hook else loss,
                step_hook=hook,
                collate_fn=lambda batch: collate_items(batch, pad_id=tokenizer.pad_token_id),
                config=config,
                out_dir=work_dir,
                progress=progress,
                on_step=on_step,
            )
        except NonFiniteLoss as exc:
            checkpoint = work_dir / CHECKPOINT_DIR
            last = (
                f"the last good checkpoint is {checkpoint}"
                if checkpoint.is_dir()
                else "no checkpoint was written yet"
            )
            raise NonFiniteLoss(
                f"{method.name} on {split}: {exc.what}", f"{exc.hint}; {last}"
            ) from None
    if lora:
        model = merge_lora(model)
    model.requires_grad_(True)
    return model, result, cost


def unlearn_model(
    model: Any,
    tokenizer: Any,
    *,
    forget: Sequence[TrainingRecord],
    retain: Sequence[TrainingRecord],
    method: UnlearnMethod,
    config: LoopConfig,
    template: PromptTemplate,
    refusals: tuple[str, ...],
    split: str,
    work_dir: Path,
    max_length: int = 512,
    progress: bool = False,
    lora: dict[str, Any] | None = None,
    layers: Sequence[int] | None = None,
) -> tuple[Any, list[float], float]:
    """`run_unlearning` on a model object the caller holds, trained in place, no cache: the same
    items, reference log-probs and loop, so the same losses. Returns (model, losses, seconds)."""
    if not trains(method):
        return model, [], 0.0
    _require_inputs(method, forget, retain, split)
    plan = plan_items(
        model, tokenizer, forget=forget, retain=retain, method=method, config=config,
        template=template, refusals=refusals, max_length=max_length,
    )  # fmt: skip
    model, result, cost = train_method(
        model, tokenizer, plan, method=method, config=config, split=split,
        work_dir=work_dir, progress=progress, lora=lora, layers=layers,
    )  # fmt: skip
    return model, result.losses, cost.seconds
