"""Padding-free batches (`model.padding_free`): a batch's sequences in one row, positions
restarting per sequence, give every sequence the padded batch's per-token log-probs; no sequence
sees another; methods get the same answer log-probs and losses; the loop trains to the same
losses; and the default packs only on a CUDA GPU with variable-length flash attention."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from forgetbench.device import configure, precision_key
from forgetbench.errors import ConfigError
from forgetbench.methods._terms import answer_token_logprobs, per_sample_nll
from forgetbench.methods.base import build_method
from forgetbench.methods.refusals import REFUSALS
from forgetbench.modeling import packing
from forgetbench.modeling.builtin import build_tiny_model
from forgetbench.modeling.encoding import collate
from forgetbench.modeling.forward import forward_logits
from forgetbench.modeling.packing import PACKED, uses_padding_free, with_packed
from forgetbench.modeling.templates import PromptTemplate
from forgetbench.records import QARecord
from forgetbench.train.items import build_items, collate_items, with_reference_logps
from forgetbench.train.loop import train_loop
from forgetbench.train.loop_config import LoopConfig
from forgetbench.train.method_loss import MethodLoss
from toy import toy_examples, toy_qa, toy_tokenizer

CUDA, CPU = torch.device("cuda"), torch.device("cpu")


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return build_tiny_model(toy_tokenizer(), seed=0).eval()


def _batch():
    examples = toy_examples()
    # Lengths differ (the toy answers do), so the padded batch pads.
    batch = collate([examples[i] for i in (0, 9, 3, 14)], pad_id=toy_tokenizer().pad_token_id)
    assert (batch["attention_mask"] == 0).any()
    return batch


@torch.no_grad()
def test_each_sequence_gets_the_padded_batchs_per_token_log_probs(model):
    batch = _batch()
    packed = with_packed(batch)
    row = packed[PACKED]
    assert row["input_ids"].shape == (1, int(batch["attention_mask"].sum()))  # no padding left
    lengths = batch["attention_mask"].sum(dim=1).tolist()
    assert row["position_ids"][0].tolist() == [p for n in lengths for p in range(n)]
    assert row["cu_seq_lens_q"].tolist() == [0, *torch.tensor(lengths).cumsum(0).tolist()]
    padded_logps, mask = answer_token_logprobs(forward_logits(model, batch), batch["labels"])
    packed_logps, packed_mask = answer_token_logprobs(
        forward_logits(model, packed), batch["labels"]
    )
    assert torch.equal(mask, packed_mask)
    assert mask.sum() > 20
    assert torch.allclose(packed_logps[mask], padded_logps[mask], atol=1e-5, rtol=0)
    # The padded path is still there for a loss that reads every position.
    assert torch.equal(forward_logits(model, packed, padded=True), forward_logits(model, batch))


@torch.no_grad()
def test_no_sequence_attends_across_its_boundary(model):
    batch = _batch()
    logits = forward_logits(model, with_packed(batch))
    # Another first sequence (its tokens shuffled) leaves every later sequence's logits alone.
    changed = {k: v.clone() for k, v in batch.items()}
    n = int(batch["attention_mask"][0].sum())
    changed["input_ids"][0, :n] = batch["input_ids"][
        0, torch.randperm(n, generator=torch.Generator().manual_seed(1))
    ]
    assert not torch.equal(changed["input_ids"][0], batch["input_ids"][0])
    after = forward_logits(model, with_packed(changed))
    assert not torch.allclose(after[0], logits[0])
    assert torch.allclose(after[1:], logits[1:], atol=1e-6, rtol=0)
    # The test can fail: positions that run on across the row (no restart) make the later
    # sequences read the earlier ones, and their log-probs move.
    leaking = with_packed(batch)
    row = dict(leaking[PACKED])
    row["position_ids"] = torch.arange(row["input_ids"].shape[1]).unsqueeze(0)
    leaking[PACKED] = row
    wrong = forward_logits(model, leaking)
    assert not torch.allclose(wrong[1:], logits[1:], atol=1e-3)


def _method_batch(method_name, model):
    tokenizer = toy_tokenizer()
    method = build_method(method_name, {})
    records = [QARecord(q, a) for q, a in toy_qa()]
    plan = build_items(
        records[:4], records[8:], tokenizer, PromptTemplate("question_answer"),
        refusals=REFUSALS, seed=0, max_length=128,
    )  # fmt: skip
    fields = {f for f in method.required_inputs() if f.startswith("ref_")}
    plan = with_reference_logps(model, plan, pad_id=tokenizer.pad_token_id, fields=fields)
    return method, collate_items(plan[0], pad_id=tokenizer.pad_token_id)


@pytest.mark.parametrize("method_name", ["npo", "dpo", "kl"])
def test_methods_get_the_same_answer_log_probs_and_loss(method_name, model):
    method, batch = _method_batch(method_name, model)
    loss = MethodLoss(method, frozen=model if method_name == "kl" else None)
    packed = with_packed(batch)
    assert all(PACKED in packed[k] for k in ("forget", "retain", "refusal"))
    with torch.no_grad():
        plain, plain_inputs = loss(model, batch)[0], loss.inputs(model, batch)
        packed_loss, packed_inputs = loss(model, packed)[0], loss.inputs(model, packed)
    for field in ("forget_logps", "retain_logps", "refusal_logps"):
        a, b = getattr(plain_inputs, field), getattr(packed_inputs, field)
        if a is not None:
            assert torch.allclose(a, b, atol=1e-5, rtol=0), field
    assert packed_loss.item() == pytest.approx(plain.item(), abs=1e-5)
    if method_name == "kl":  # its KL reads the padded batch's full distribution
        assert torch.equal(plain_inputs.retain_logits, packed_inputs.retain_logits)


def _train(tmp_path, name):
    tokenizer = toy_tokenizer()
    model = build_tiny_model(tokenizer, seed=0)
    seen = []

    def loss_fn(m, b):
        seen.append(PACKED in b)
        return per_sample_nll(forward_logits(m, b), b["labels"]).mean()

    result = train_loop(
        model,
        toy_examples()[:8],
        loss_fn=loss_fn,
        collate_fn=lambda b: collate(b, pad_id=tokenizer.pad_token_id),
        config=LoopConfig(lr=1e-3, epochs=1, batch_size=4, per_device_batch_size=2),
        out_dir=tmp_path / name,
        progress=False,
        save_checkpoints=False,
    )
    return result.losses, seen


def test_the_loop_trains_packed_batches_to_the_same_losses(tmp_path):
    configure("cpu")
    plain, seen = _train(tmp_path, "plain")
    assert seen == [False] * 4  # the CPU's default: padded
    configure("cpu", padding_free=True)
    assert precision_key() == {}  # a packed run reuses (and is reused by) padded stages
    packed, seen = _train(tmp_path, "packed")
    assert seen == [True] * 4
    assert len(packed) == 2
    assert packed == pytest.approx(plain, abs=1e-5)


def test_packing_is_the_default_on_cuda_with_flash_attention_only(model):
    def shaped(attention):
        return SimpleNamespace(config=SimpleNamespace(_attn_implementation=attention))

    assert model.config._attn_implementation == "sdpa"
    assert not uses_padding_free(model, CPU, asked=None)  # the CPU: padded
    assert not uses_padding_free(model, CUDA, asked=None)  # sdpa's packed mask is dense
    assert uses_padding_free(shaped("flash_attention_2"), CUDA, asked=None)
    assert not uses_padding_free(shaped("flash_attention_2"), CPU, asked=None)
    assert not uses_padding_free(shaped("flash_attention_2"), CUDA, asked=False)
    assert uses_padding_free(model, CPU, asked=True)  # asked: on, on any device
    with pytest.raises(ConfigError, match="model.padding_free=true"):
        uses_padding_free(shaped("some_kernel"), CPU, asked=True)


def test_only_right_padded_batches_are_packed():
    batch = collate(toy_examples()[:3], pad_id=0, padding_side="left")
    with pytest.raises(ValueError, match="right-padded"):
        packing.pack(batch)
