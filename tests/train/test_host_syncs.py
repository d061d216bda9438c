"""The training loop reads numbers off the device once per optimizer step, not per micro-batch.

On a GPU every `.item()`, `float(t)`, `int(t)`, `.tolist()` or `if t:` makes the host wait for
the device. The CPU cannot show the wait, but it can count the calls: every such conversion made
by forgetbench's own code while a run trains is counted (torch's and transformers' internals,
which convert CPU-side numbers such as AdamW's step count, are not ours and not counted).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from forgetbench.device import configure
from forgetbench.methods.base import build_method
from forgetbench.methods.refusals import REFUSALS
from forgetbench.modeling import packing
from forgetbench.modeling.builtin import build_tiny_model
from forgetbench.modeling.templates import PromptTemplate
from forgetbench.records import QARecord
from forgetbench.train import loop
from forgetbench.train.items import build_items, collate_items, with_reference_logps
from forgetbench.train.loop import NonFiniteLoss, train_loop
from forgetbench.train.loop_config import LoopConfig
from forgetbench.train.method_loss import method_loss
from forgetbench.train.schedule import build_optimizer
from host_syncs import SyncCounter
from toy import toy_qa, toy_tokenizer


def _train(method_name: str, out: Path, counter: SyncCounter | None, **options):
    tokenizer = toy_tokenizer()
    model = build_tiny_model(tokenizer, scale="tiny", seed=0)
    method = build_method(method_name, options)
    records = [QARecord(q, a) for q, a in toy_qa()]
    plan = build_items(
        records[:6], records[6:], tokenizer, PromptTemplate("question_answer"),
        refusals=REFUSALS, seed=0, max_length=128, epochs=2,
    )  # fmt: skip
    needs = set(method.required_inputs())
    plan = with_reference_logps(
        model,
        plan,
        pad_id=tokenizer.pad_token_id,
        fields={f for f in needs if f.startswith("ref_")},
    )
    loss, _ = method_loss(method, model)
    steps: list[int] = []

    def count_step(step, _model):
        if counter is not None:
            steps.append(len(counter.calls))

    if counter is not None:
        counter.on = True
    try:
        result = train_loop(
            model,
            lambda epoch: plan[epoch],
            loss_fn=loss,
            collate_fn=lambda b: collate_items(b, pad_id=tokenizer.pad_token_id),
            # 3 micro-batches of 2 per optimizer step; a checkpoint after every step
            config=LoopConfig(
                lr=3e-3, epochs=2, batch_size=6, per_device_batch_size=2, checkpoint_every=1
            ),
            out_dir=out,
            progress=False,
            on_step=count_step,
        )
    finally:
        if counter is not None:
            counter.on = False
    return result, steps


PACKED_BATCHES: list[bool] = []


def counted_packing(wrap):
    """packing_collate, noting that the loop packed (so the padding-free case cannot pass
    padded)."""

    def wrapped(collate_fn):
        packed = wrap(collate_fn)

        def collate(examples):
            batch = packed(examples)
            PACKED_BATCHES.append(packing.PACKED in batch["forget"])
            return batch

        return collate

    return wrapped


@pytest.mark.parametrize("method", ["grad_diff", "npo", "pdu", "npo-padding-free"])
def test_one_host_read_per_optimizer_step(method, tmp_path, monkeypatch):
    packed = method.endswith("-padding-free")
    PACKED_BATCHES.clear()
    if packed:  # packed batches run the same reads: packing is made on the host
        method = method.removesuffix("-padding-free")
        configure("cpu", padding_free=True)
        monkeypatch.setattr(loop, "packing_collate", counted_packing(packing.packing_collate))
    counter = SyncCounter(monkeypatch)
    result, calls_after_step = _train(method, tmp_path, counter)
    assert result.steps == 2
    per_step = [b - a for a, b in zip([0, *calls_after_step], calls_after_step, strict=False)]
    # the loop's one read; PDU's dual update reads its state once more (a host float by design)
    allowed = 2 if method == "pdu" else 1
    assert all(n <= allowed for n in per_step), counter.calls
    assert ([True] * 6 if packed else []) == PACKED_BATCHES
    rows = [json.loads(line) for line in (tmp_path / "train_log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]
    assert all(isinstance(r["forget_nll"], float) and r["tokens_per_s"] > 0 for r in rows)


def test_the_logged_terms_are_the_steps_micro_batch_mean(tmp_path):
    # grad_diff's loss is retain_nll - forget_nll for every micro-batch, so the step's mean loss
    # is the mean of its terms' difference only if each term is averaged the same way
    result, _ = _train("grad_diff", tmp_path, None)
    rows = [json.loads(line) for line in (tmp_path / "train_log.jsonl").read_text().splitlines()]
    for row, loss in zip(rows, result.losses, strict=True):
        assert row["loss"] == loss
        assert row["retain_nll"] - row["forget_nll"] == pytest.approx(loss, abs=1e-5)


def test_a_non_finite_loss_stops_the_run_before_its_checkpoint(tmp_path):
    with pytest.raises(
        NonFiniteLoss, match=r"(loss|gradient norm) became .* at step 1 \(epoch 1\)"
    ):
        _train("grad_ascent", tmp_path, None, forget_weight=1e38)
    assert not (tmp_path / "checkpoint").exists()
    assert not (tmp_path / "train_log.jsonl").exists()


def test_adamw_is_fused_where_the_parameters_train_on_cuda():
    # The choice alone (the CPU cannot run CUDA's kernel): fused on CUDA, torch's default (the
    # multi-tensor loop the golden numbers were made with) on the CPU and under FSDP (no device).
    model = build_tiny_model(toy_tokenizer(), scale="tiny", seed=0)
    config = LoopConfig(lr=1e-3, epochs=1)
    assert build_optimizer(model, config, device=torch.device("cuda")).defaults["fused"]
    for device in (torch.device("cpu"), None):
        assert not build_optimizer(model, config, device=device).defaults["fused"]
    groups = build_optimizer(model, config, device=torch.device("cpu")).param_groups
    assert [g["weight_decay"] for g in groups] == [config.weight_decay, 0.0]
