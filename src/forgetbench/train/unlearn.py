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
steps through the loop's stateful loss, `StatefulMethodLoss`), never by name.
"""

from __future__ import annotations

import copy
import dataclasses
import random
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from forgetbench import __version__
from forgetbench.cache import shared_entry
from forgetbench.device import process_state, stage_cost, to_model_device
from forgetbench.errors import ConfigError, DataError
from forgetbench.methods._terms import answer_token_logprobs
from forgetbench.methods.base import (
    HiddenStateMethod,
    PreparedMethod,
    SelectiveMethod,
    StatefulMethod,
    TwoTaskMethod,
    UnlearnInputs,
    UnlearnMethod,
)
from forgetbench.methods.plugins import method_source
from forgetbench.modeling import (
    AdaptersDisabled,
    Encoded,
    PromptTemplate,
    apply_lora,
    collate,
    encode_chunk,
    encode_prompt_answer,
    forward_logits,
    hidden_states_at,
    is_lora,
    load_model,
    merge_lora,
    position_limit,
    save_model,
)
from forgetbench.records import PromptRecord, QARecord, TextRecord
from forgetbench.train.checkpoint import CHECKPOINT_DIR
from forgetbench.train.integrity import reuse_finished
from forgetbench.train.loop import LoopConfig, NonFiniteLoss, config_key, train_loop
from forgetbench.train.sharding import shard_model, sharding_requested, whole_model
from forgetbench.train.stages import (
    TRAINING_CODE_VERSION,
    inputs_key,
    model_fingerprint,
    publish_model,
)
from forgetbench.train.two_task import TwoTaskStep

UNLEARN_FILE = "unlearn.json"
_REFERENCE_FIELDS = {"ref_forget_logps", "ref_refusal_logps", "ref_alternate_logps"}
_FROZEN_MODEL_FIELDS = {"ref_retain_logits", "ref_retain_hidden", "ref_forget_logits"}
# Answer kinds the engine encodes per item and scores once under the start model when asked.
_SCORED_KINDS = ("forget", "refusal", "alternate")
ALTERNATE_FIELDS = frozenset({"alternate_logps", "alternate_mask", "ref_alternate_logps"})
# What the engine trains on: a question and answer the template lays out, a text laid out by
# its format already, or a document chunk (every token scored).
TrainingRecord = QARecord | PromptRecord | TextRecord


@dataclass(frozen=True)
class UnlearnItem:
    forget: Encoded
    retain: Encoded
    refusal: Encoded
    ref_forget_logps: tuple[float, ...] = ()  # (len(forget) - 1,) start model, precomputed
    ref_refusal_logps: tuple[float, ...] = ()
    alternate: Encoded | None = None  # only for methods that read alternate answers (AltPO)
    ref_alternate_logps: tuple[float, ...] = ()


@dataclass(frozen=True)
class UnlearnResult:
    model_dir: Path
    snapshots: list[tuple[int, Path]]  # (optimizer step, model folder), including step 0
    losses: list[float]
    seconds: float
    cached: bool
    peak_gpu_mib: float | None = None  # peak GPU memory while it trained; None on the CPU


def draw_pairings(
    n_forget: int, n_retain: int, n_refusals: int, *, seed: int, epoch: int
) -> tuple[list[int], list[int]]:
    """Epoch `epoch`'s retain partner and refusal (as indices) for each forget sample.

    Redrawn every epoch, as TOFU's `TextForgetDatasetQA.__getitem__` draws a random retain index
    and a random `idontknow.txt` line on every access, and open-unlearning's `ForgetRetainDataset`
    a random retain index per item; but a pure function of (seed, epoch), so a rerun, a resumed run
    and the start model's reference log-probs all see the same draws.
    """
    rng = random.Random(f"forgetbench-unlearn:{seed}:{epoch}")
    partners = [rng.randrange(n_retain) for _ in range(n_forget)]
    refusals = [rng.randrange(n_refusals) for _ in range(n_forget)]
    return partners, refusals


def draw_alternates(counts: Sequence[int], *, seed: int, epoch: int) -> list[int]:
    """Epoch `epoch`'s alternate answer (an index into its record's `perturbed_answers`, of which
    sample i has `counts[i]`) for each forget sample. A stream of its own, so methods without
    alternates draw exactly the partners and refusals they drew before AltPO existed."""
    rng = random.Random(f"forgetbench-unlearn-alternate:{seed}:{epoch}")
    return [rng.randrange(n) for n in counts]


def build_items(
    forget: Sequence[TrainingRecord],
    retain: Sequence[TrainingRecord],
    tokenizer: Any,
    template: PromptTemplate,
    *,
    refusals: tuple[str, ...],
    seed: int,
    max_length: int,
    epochs: int = 1,
    alternates: bool = False,
) -> list[list[UnlearnItem]]:
    """One list of items per epoch (the forget set in its order, with that epoch's retain partners
    and refusals from `draw_pairings`, and with `alternates` an alternate answer from
    `draw_alternates`). Each distinct text is encoded once and shared."""

    def encode(record: TrainingRecord, answer: str | None = None) -> Encoded:
        """`record` laid out by the template (a `PromptRecord` is laid out already), with
        `answer` (a refusal, an alternate) in place of its own."""
        if isinstance(record, TextRecord):
            # Every item carries a refusal, read only by methods that answer with one, which
            # are refused on documents (`study.corpus.refuse_document_methods`).
            text = record.text if answer is None else answer
            return encode_chunk(tokenizer, text, max_length=max_length)
        if isinstance(record, PromptRecord):
            prompt = record.prompt
            text = record.answer if answer is None else template.answer(answer)
        else:
            prompt = template.prompt(record.question, tokenizer)
            text = template.answer(record.answer if answer is None else answer)
        return encode_prompt_answer(tokenizer, prompt, text, max_length=max_length)

    forget_encoded = [encode(f) for f in forget]
    retain_encoded: dict[int, Encoded] = {}
    refusal_encoded: dict[tuple[int, int], Encoded] = {}
    alternate_encoded: dict[tuple[int, int], Encoded] = {}
    plan = []
    for epoch in range(epochs):
        partners, answers = draw_pairings(
            len(forget), len(retain), len(refusals), seed=seed, epoch=epoch
        )
        picks: list[int | None] = [None] * len(forget)
        if alternates:
            picks = list(
                draw_alternates([len(f.perturbed_answers) for f in forget], seed=seed, epoch=epoch)
            )
        items = []
        for i, (r, k, a) in enumerate(zip(partners, answers, picks, strict=True)):
            if r not in retain_encoded:
                retain_encoded[r] = encode(retain[r])
            if (i, k) not in refusal_encoded:
                refusal_encoded[i, k] = encode(forget[i], refusals[k])
            if a is not None and (i, a) not in alternate_encoded:
                record = forget[i]
                assert isinstance(record, QARecord)  # run_unlearning checked the alternates
                alternate_encoded[i, a] = encode(record, record.perturbed_answers[a])
            items.append(
                UnlearnItem(
                    forget_encoded[i],
                    retain_encoded[r],
                    refusal_encoded[i, k],
                    alternate=None if a is None else alternate_encoded[i, a],
                )
            )
        plan.append(items)
    return plan


@torch.no_grad()
def with_reference_logps(
    model: Any,
    plan: list[list[UnlearnItem]],
    *,
    pad_id: int,
    fields: set[str],
    batch_size: int = 16,
) -> list[list[UnlearnItem]]:
    """Score every distinct forget answer (and every refusal or alternate answer some epoch uses)
    once under the start model, so each epoch's items carry the reference log-probs of exactly
    their own texts."""
    model.eval()
    tables: dict[str, dict[int, tuple[float, ...]]] = {}
    for kind in _SCORED_KINDS:
        if f"ref_{kind}_logps" not in fields:
            continue
        # Items share their Encoded objects (build_items encodes each text once): key by identity.
        unique = list({id(getattr(i, kind)): getattr(i, kind) for e in plan for i in e}.items())
        table: dict[int, tuple[float, ...]] = {}
        for start in range(0, len(unique), batch_size):
            chunk = unique[start : start + batch_size]
            batch = to_model_device(collate([e for _, e in chunk], pad_id=pad_id), model)
            logps, _ = answer_token_logprobs(forward_logits(model, batch), batch["labels"])
            for row, (key, encoded) in enumerate(chunk):
                table[key] = tuple(logps[row, : len(encoded.input_ids) - 1].tolist())
        tables[kind] = table
    return [
        [
            dataclasses.replace(
                item,
                **{f"ref_{kind}_logps": t[id(getattr(item, kind))] for kind, t in tables.items()},
            )
            for item in items
        ]
        for items in plan
    ]


def collate_items(items: list[UnlearnItem], *, pad_id: int) -> dict[str, Any]:
    batch: dict[str, Any] = {
        "forget": collate([i.forget for i in items], pad_id=pad_id),
        "retain": collate([i.retain for i in items], pad_id=pad_id),
        "refusal": collate([i.refusal for i in items], pad_id=pad_id),
    }
    alternates = [i.alternate for i in items]
    if all(a is not None for a in alternates):
        batch["alternate"] = collate(alternates, pad_id=pad_id)
    for kind in _SCORED_KINDS:
        if kind not in batch:
            continue
        width = batch[kind]["input_ids"].shape[1] - 1
        values = [getattr(i, f"ref_{kind}_logps") for i in items]
        if all(values):
            ref = torch.zeros(len(items), width)
            for row, v in enumerate(values):
                ref[row, : len(v)] = torch.tensor(v)
            batch[f"ref_{kind}_logps"] = ref  # (B, T-1), aligned with answer_token_logprobs
    return batch


class MethodLoss:
    """`loss_fn(model, batch)` for the training loop: runs exactly the forward passes the method's
    inputs need and returns (loss, named parts). `constants` are the method's `prepare` fields,
    the same at every step."""

    def __init__(
        self,
        method: UnlearnMethod,
        *,
        frozen: Any = None,
        constants: dict[str, torch.Tensor] | None = None,
    ) -> None:
        self.method = method
        self.needs = set(method.required_inputs())
        self.frozen = frozen
        self.constants = constants or {}

    def inputs(self, model: Any, batch: dict[str, Any]) -> UnlearnInputs:
        # The loop's data loader already sends batches to the accelerator's device; a caller
        # outside it (a two-task step, a test) may not, and every field must be on the model's.
        batch = to_model_device(batch, model)
        fields: dict[str, Any] = {}
        needs = self.needs
        if needs & {"forget_logps", "forget_mask", "forget_logits", "forget_targets"}:
            logits = forward_logits(model, batch["forget"])
            labels = batch["forget"]["labels"]
            fields["forget_logps"], fields["forget_mask"] = answer_token_logprobs(logits, labels)
            # Shifted like forget_logps: row t predicts token t+1.
            fields["forget_logits"] = logits[:, :-1, :]
            fields["forget_targets"] = labels[:, 1:].masked_fill(~fields["forget_mask"], 0)
        if "ref_forget_logits" in needs:
            with torch.no_grad():
                ref = forward_logits(self.frozen, batch["forget"])
            fields["ref_forget_logits"] = ref[:, :-1, :]
        if needs & {"retain_logps", "retain_mask", "retain_logits"}:
            logits = forward_logits(model, batch["retain"])
            fields["retain_logps"], fields["retain_mask"] = answer_token_logprobs(
                logits, batch["retain"]["labels"]
            )
            fields["retain_logits"] = logits
            fields["retain_label_mask"] = batch["retain"]["labels"] != -100
            fields["retain_attention_mask"] = batch["retain"]["attention_mask"].bool()
        if "ref_retain_logits" in needs:
            with torch.no_grad():
                fields["ref_retain_logits"] = forward_logits(self.frozen, batch["retain"])
        if needs & {"refusal_logps", "refusal_mask"}:
            fields["refusal_logps"], fields["refusal_mask"] = answer_token_logprobs(
                forward_logits(model, batch["refusal"]), batch["refusal"]["labels"]
            )
        if needs & {"alternate_logps", "alternate_mask"}:
            fields["alternate_logps"], fields["alternate_mask"] = answer_token_logprobs(
                forward_logits(model, batch["alternate"]), batch["alternate"]["labels"]
            )
        for kind in _SCORED_KINDS:
            if f"ref_{kind}_logps" in needs:
                fields[f"ref_{kind}_logps"] = batch[f"ref_{kind}_logps"]
        if "forget_hidden" in needs:
            if not isinstance(self.method, HiddenStateMethod):
                raise TypeError(f"{self.method.name} needs hidden states but names no layer")
            layer = self.method.hidden_layer
            answer_only = self.method.hidden_tokens == "answer"

            def token_mask(part: dict[str, Any]) -> torch.Tensor:
                return part["labels"] != -100 if answer_only else part["attention_mask"].bool()

            fields["forget_hidden"] = hidden_states_at(model, batch["forget"], layer)
            fields["forget_hidden_mask"] = token_mask(batch["forget"])
            fields["retain_hidden"] = hidden_states_at(model, batch["retain"], layer)
            fields["retain_hidden_mask"] = token_mask(batch["retain"])
            with torch.no_grad():
                fields["ref_retain_hidden"] = hidden_states_at(self.frozen, batch["retain"], layer)
        fields.update(self.constants)
        return UnlearnInputs(
            **{k: v for k, v in fields.items() if k in needs or k.endswith("_mask")}
        )

    def __call__(self, model: Any, batch: dict[str, Any]) -> tuple[torch.Tensor, dict[str, float]]:
        return self.method.loss(self.inputs(model, batch))


class StatefulMethodLoss(MethodLoss):
    """`MethodLoss` for a `StatefulMethod`: holds the method's state (a dict of floats), passes it
    to every step, and updates it after each optimizer step from the step's micro-batch numbers
    (the loop's `StatefulLoss`, which checkpoints and restores it)."""

    def __init__(self, method: StatefulMethod, **kwargs: Any) -> None:
        super().__init__(method, **kwargs)  # type: ignore[arg-type]
        self.state = dict(method.initial_state())
        self._observed: list[dict[str, torch.Tensor]] = []

    def __call__(self, model: Any, batch: dict[str, Any]) -> tuple[torch.Tensor, dict[str, float]]:
        loss, parts, observed = self.method.stateful_loss(  # type: ignore[attr-defined]
            self.inputs(model, batch), self.state
        )
        self._observed.append({k: v.detach().float() for k, v in observed.items()})
        return loss, {**parts, **self.state}  # the state this step used, in the log

    def end_step(self, reduce: Any, *, epoch: int) -> None:
        observed = {
            k: float(reduce(torch.stack([o[k] for o in self._observed]).mean()))
            for k in self._observed[0]
        }
        self._observed = []
        self.state = dict(
            self.method.next_state(self.state, observed, epoch=epoch)  # type: ignore[attr-defined]
        )

    def state_dict(self) -> dict[str, Any]:
        return {"method_state": dict(self.state)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        # Every checkpoint of this run folder has one (the folder's key covers the method and
        # its options); a missing one leaves the initial state rather than failing the resume.
        saved = state.get("method_state")
        if saved is not None:
            self.state = {k: float(v) for k, v in saved.items()}


def method_loss(method: UnlearnMethod, model: Any) -> tuple[MethodLoss, TwoTaskStep | None]:
    """What the loop trains `model` with for `method`: the loss (with a frozen reference copy of
    the start model on the model's own device, when the method reads its full outputs, and the
    method's constants on that device) and, for a two-task method, its step hook."""
    needs = set(method.required_inputs())
    frozen = None
    if needs & _FROZEN_MODEL_FIELDS and is_lora(model):
        frozen = AdaptersDisabled(model)  # the start model is the base weights: no second copy
    elif needs & _FROZEN_MODEL_FIELDS:
        frozen = copy.deepcopy(model).eval()  # a copy of a placed model sits on its device
        frozen.requires_grad_(False)
        if sharding_requested():  # sharded as the trained model is: never a full copy each
            shard_model(frozen, role="reference model")
    constants = (
        to_model_device(method.prepare(model), model) if isinstance(method, PreparedMethod) else {}
    )
    if isinstance(method, SelectiveMethod):
        method.select_trainable(model)
        if is_lora(model):
            _keep_adapters_only(method, model)
    loss = (
        StatefulMethodLoss(method, frozen=frozen, constants=constants)
        if isinstance(method, StatefulMethod)
        else MethodLoss(method, frozen=frozen, constants=constants)
    )
    # A two-task update is not the gradient of one loss: the loop calls the two-gradient step
    # hook instead of backward/step, with the same AdamW, schedule, clipping and checkpoints.
    hook = TwoTaskStep(method, loss.inputs) if isinstance(method, TwoTaskMethod) else None
    return loss, hook


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


def _keep_adapters_only(method: UnlearnMethod, model: Any) -> None:
    """With LoRA only adapters may train (the base weights are also the reference model): of the
    parameters a selective method chose, keep the adapters'."""
    chosen = 0
    for name, parameter in model.named_parameters():
        parameter.requires_grad = parameter.requires_grad and "lora_" in name
        chosen += parameter.requires_grad
    if not chosen:
        raise ConfigError(
            f"{method.name} trains only some modules, and with unlearn.lora none of them carries "
            "an adapter",
            f"put the adapters on them (unlearn.lora_targets, e.g. the module names {method.name} "
            "updates), or unlearn without LoRA",
        )


def unlearn_key(
    method: UnlearnMethod,
    config: LoopConfig,
    parent: str,
    items: Iterable[UnlearnItem],
    *,
    lora: dict[str, Any] | None = None,
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
        # A plugin method's code is not named by the version: its file's hash is (absent for a
        # built-in, so no built-in run's key changed).
        **({"source": source} if source else {}),
    }
    # Alternate answers count only where a method reads them, so no other method's key changed.
    return inputs_key(
        header,
        (
            [i.forget.input_ids, i.retain.input_ids, i.refusal.input_ids]
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
) -> UnlearnResult:
    """Unlearn `forget` from the model at `model_dir`; snapshots every `snapshot_every` steps
    (0 = each epoch) become `snapshots/step-N/` model folders for trajectory evaluation. With
    `lora` (`apply_lora`'s options) only adapters train, a reference model is the same weights
    with the adapters off, and every saved model has the adapters merged in."""
    _require_alternates(method, forget, split)
    model, tokenizer = load_model(model_dir, trust_remote_code=trust_remote_code)
    plan = plan_items(
        model, tokenizer, forget=forget, retain=retain, method=method, config=config,
        template=template, refusals=refusals, max_length=max_length,
    )  # fmt: skip
    key = unlearn_key(
        method, config, model_fingerprint(Path(model_dir)), (i for e in plan for i in e),
        lora=lora,
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


def _require_alternates(
    method: UnlearnMethod, forget: Sequence[TrainingRecord], split: str
) -> None:
    """A method that trains toward alternate answers needs them on every forget record."""
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
) -> tuple[Any, Any, Any]:
    """Unlearn `model` in place on `plan`: the start model's reference log-probs, the method's
    loss (or two-gradient step) through the training loop, checkpoints in `work_dir`. Returns
    (the model, adapters merged; the loop's result; the stage's cost)."""
    needs = set(method.required_inputs())
    plan = with_reference_logps(
        model, plan, pad_id=tokenizer.pad_token_id, fields=needs & _REFERENCE_FIELDS
    )
    if lora:
        model = apply_lora(model, **lora_for_method(method, model, lora))
    loss, hook = method_loss(method, model)
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
) -> tuple[Any, list[float], float]:
    """`run_unlearning` on a model object the caller holds, trained in place, no cache: the same
    items, reference log-probs and loop, so the same losses. Returns (model, losses, seconds)."""
    _require_alternates(method, forget, split)
    plan = plan_items(
        model, tokenizer, forget=forget, retain=retain, method=method, config=config,
        template=template, refusals=refusals, max_length=max_length,
    )  # fmt: skip
    model, result, cost = train_method(
        model, tokenizer, plan, method=method, config=config, split=split,
        work_dir=work_dir, progress=progress, lora=lora,
    )  # fmt: skip
    return model, result.losses, cost.seconds
