"""The training loop's kernel levers: liger-kernel's Triton kernels chosen only on a CUDA GPU,
with the package installed and a Llama-family model, and torch.compile of the trained model
(`model.compile`) training to the same losses. Neither moves a cached stage's key."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from forgetbench.device import configure, precision_key
from forgetbench.methods._terms import per_sample_nll
from forgetbench.modeling.builtin import build_tiny_model
from forgetbench.modeling.encoding import collate
from forgetbench.modeling.forward import forward_logits
from forgetbench.train import kernels, loop
from forgetbench.train.kernels import uses_liger
from forgetbench.train.loop import train_loop
from forgetbench.train.loop_config import LoopConfig
from toy import toy_examples, toy_tokenizer

CUDA, CPU = torch.device("cuda"), torch.device("cpu")


def test_liger_is_chosen_only_on_cuda_installed_and_for_a_llama_family_model():
    llama = build_tiny_model(toy_tokenizer(), seed=0)
    assert uses_liger(llama, CUDA, enabled=True, installed=True)
    assert not uses_liger(llama, CPU, enabled=True, installed=True)  # the CPU: never
    assert not uses_liger(llama, CUDA, enabled=False, installed=True)  # model.liger_kernel=false
    assert not uses_liger(llama, CUDA, enabled=True, installed=False)  # no forgetbench[gpu]
    for other in ("gpt2", "gpt_neox", "phi", "gemma"):
        model = SimpleNamespace(config=SimpleNamespace(model_type=other))
        assert not uses_liger(model, CUDA, enabled=True, installed=True), other
    for family in ("mistral", "qwen2", "qwen3"):
        model = SimpleNamespace(config=SimpleNamespace(model_type=family))
        assert uses_liger(model, CUDA, enabled=True, installed=True), family
    # installed=None asks the environment: here, whichever it is, the answer follows it
    assert uses_liger(llama, CUDA, enabled=True) == kernels.liger_installed()


def _one_step(tmp_path, name):
    tokenizer = toy_tokenizer()
    model = build_tiny_model(tokenizer, seed=0)
    result = train_loop(
        model,
        toy_examples()[:8],
        loss_fn=lambda m, b: per_sample_nll(forward_logits(m, b), b["labels"]).mean(),
        collate_fn=lambda b: collate(b, pad_id=tokenizer.pad_token_id),
        config=LoopConfig(lr=1e-3, epochs=1, batch_size=4, per_device_batch_size=4),
        out_dir=tmp_path / name,
        progress=False,
        save_checkpoints=False,
    )
    return model, result.losses


def test_model_compile_trains_to_the_same_losses_and_keeps_stage_keys(tmp_path, monkeypatch):
    # The CPU compiles with the eager backend: dynamo captures the same graphs the GPU's
    # inductor would generate code for (which would take a CPU minute for the tiny model).
    monkeypatch.setattr(kernels, "COMPILE_BACKEND", "eager")
    monkeypatch.setattr(loop, "apply_liger", lambda _m: pytest.fail("liger on the CPU"))
    configure("cpu")
    plain_model, plain = _one_step(tmp_path, "plain")
    assert plain_model._compiled_call_impl is None
    configure("cpu", compile=True)
    assert precision_key() == {}  # a compiled run reuses (and is reused by) uncompiled stages
    compiled_model, compiled = _one_step(tmp_path, "compiled")
    assert compiled_model._compiled_call_impl is not None
    assert len(compiled) == len(plain) == 2
    assert compiled == pytest.approx(plain, abs=1e-5)
