"""What one unlearning step sees: each forget sample with its retain partner, refusal and (for
a method that reads them) alternate answer, encoded once, redrawn every epoch from (seed, epoch),
with the start model's reference log-probs where the method needs them, and collated into a
batch (`collate_items`). A preference pair as the forget record fixes both answers: its
rejected answer is the one to forget, its chosen answer takes the refusal's place (RWKU's DPO on
a made-up text against the model's own). Pure data: the method's forward passes are
`train/method_loss.py`'s."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from forgetbench.device import to_model_device
from forgetbench.methods._terms import answer_token_logprobs
from forgetbench.modeling.encoding import Encoded, collate, encode_chunk, encode_prompt_answer
from forgetbench.modeling.forward import forward_logits
from forgetbench.modeling.templates import PromptTemplate
from forgetbench.records import PreferenceRecord, PromptRecord, QARecord, TextRecord

REFERENCE_FIELDS = {"ref_forget_logps", "ref_refusal_logps", "ref_alternate_logps"}
# Answer kinds the engine encodes per item and scores once under the start model when asked.
SCORED_KINDS = ("forget", "refusal", "alternate")
ALTERNATE_FIELDS = frozenset({"alternate_logps", "alternate_mask", "ref_alternate_logps"})
# Inputs read off the retain batch: a method that needs one needs a retain set.
RETAIN_FIELDS = frozenset(
    {"retain_logps", "retain_mask", "retain_logits", "ref_retain_logits", "retain_label_mask",
     "retain_attention_mask", "retain_hidden", "ref_retain_hidden", "retain_hidden_mask"}
)  # fmt: skip
# What the engine trains on: a question and answer the template lays out, a text laid out by
# its format already, a document chunk (every token scored), or a preference pair (a forget
# record only: its prompt laid out as a question, the rejected answer forgotten, the chosen one
# in the refusal's place).
TrainingRecord = QARecord | PromptRecord | TextRecord | PreferenceRecord


@dataclass(frozen=True)
class UnlearnItem:
    forget: Encoded
    retain: Encoded | None  # None without a retain set (RWKU gives none): no retain batch
    refusal: Encoded
    ref_forget_logps: tuple[float, ...] = ()  # (len(forget) - 1,) start model, precomputed
    ref_refusal_logps: tuple[float, ...] = ()
    alternate: Encoded | None = None  # only for methods that read alternate answers (AltPO)
    ref_alternate_logps: tuple[float, ...] = ()


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
    # Without a retain set (RWKU) nothing is drawn for it: -1 stands for "no partner".
    partners = [rng.randrange(n_retain) if n_retain else -1 for _ in range(n_forget)]
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
        elif isinstance(record, PreferenceRecord):
            prompt = template.prompt(record.prompt, tokenizer)
            text = template.answer(record.rejected if answer is None else answer)
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
            if r >= 0 and r not in retain_encoded:
                retain_encoded[r] = encode(retain[r])
            if isinstance(forget[i], PreferenceRecord):
                k = -1  # its own chosen answer, every epoch: no refusal is drawn for it
            if (i, k) not in refusal_encoded:
                chosen = forget[i].chosen if k < 0 else refusals[k]  # type: ignore[union-attr]
                refusal_encoded[i, k] = encode(forget[i], chosen)
            if a is not None and (i, a) not in alternate_encoded:
                record = forget[i]
                assert isinstance(record, QARecord)  # run_unlearning checked the alternates
                alternate_encoded[i, a] = encode(record, record.perturbed_answers[a])
            items.append(
                UnlearnItem(
                    forget_encoded[i],
                    retain_encoded.get(r),
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
    for kind in SCORED_KINDS:
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
    batch: dict[str, Any] = {"forget": collate([i.forget for i in items], pad_id=pad_id)}
    retain = [i.retain for i in items]
    if all(r is not None for r in retain):
        batch["retain"] = collate(retain, pad_id=pad_id)  # type: ignore[arg-type]
    batch["refusal"] = collate([i.refusal for i in items], pad_id=pad_id)
    alternates = [i.alternate for i in items]
    if all(a is not None for a in alternates):
        batch["alternate"] = collate(alternates, pad_id=pad_id)
    for kind in SCORED_KINDS:
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
