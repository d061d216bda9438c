"""On a CUDA GPU (`pytest -m gpu`; skipped without one, so CI never runs these, and
tests/test_device.py guards the same paths on the CPU): one step of every method on the GPU agrees
with the same step on the CPU, and evaluation on the GPU agrees with the CPU's within 1e-4 in
float32 and within 0.05 nats per token in bfloat16."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from forgetbench.device import place_model
from forgetbench.eval.backend import FastBackend, serve
from forgetbench.eval.requests import Generate, Score
from forgetbench.methods.base import trained_method_names
from forgetbench.modeling.builtin import build_tiny_model
from forgetbench.modeling.templates import PromptTemplate
from test_device import _method, _step
from toy import toy_qa, toy_tokenizer

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]
TEMPLATE = PromptTemplate("question_answer")
BF16_TOLERANCE = 0.05  # nats per answer token: bfloat16 keeps 8 bits of mantissa


@pytest.mark.parametrize("name", trained_method_names())
def test_one_step_of_every_method_on_the_gpu_equals_the_cpus(name):
    tokenizer = toy_tokenizer()
    cpu_value, _ = _step(_method(name, 3), build_tiny_model(tokenizer, seed=0), tokenizer)
    model = place_model(build_tiny_model(tokenizer, seed=0), "cuda")
    value, guard = _step(_method(name, 3), model, tokenizer)
    assert guard.mismatches == []
    assert value.device.type == "cuda" and torch.isfinite(value)
    torch.testing.assert_close(value.cpu(), cpu_value, rtol=1e-4, atol=1e-4)


def _requests():
    qa = toy_qa()
    prompts = [TEMPLATE.prompt(q) for q, _ in qa]
    answers = [TEMPLATE.answer(a) for _, a in qa]
    scores = [Score(prompts[i], (answers[i], answers[(i + 1) % len(qa)])) for i in range(8)]
    return [*scores, Generate(prompts[0], 8), Generate(prompts[1], 8)]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_evaluation_on_the_gpu_equals_the_cpus(dtype):
    tokenizer = toy_tokenizer()
    requests = _requests()
    cpu = serve(
        FastBackend(build_tiny_model(tokenizer, seed=2).eval(), tokenizer, batch_size=4), requests
    )
    model = place_model(build_tiny_model(tokenizer, seed=2), "cuda", dtype=dtype).eval()
    gpu = serve(FastBackend(model, tokenizer, batch_size=4), requests)
    tolerance = 1e-4 if dtype == "float32" else BF16_TOLERANCE
    for request, a, b in zip(requests, cpu, gpu, strict=True):
        if isinstance(request, Generate):
            if dtype == "float32":
                assert a == b
            continue
        for x, y in zip(a, b, strict=True):
            np.testing.assert_allclose(x.token_logps, y.token_logps, atol=tolerance)
