"""Per-item weight-gradient norms: what the gradient-norm membership attack
(`forgetbench.metrics.gradnorm`) scores. The one evaluation output that needs a backward pass."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from forgetbench.eval.outputs.scoring import prompt_too_long
from forgetbench.modeling.encoding import encode_prompt_answer
from forgetbench.records import IGNORE_INDEX


def gradient_norms(
    model: Any,
    tokenizer: Any,
    pairs: Sequence[tuple[str, str]],
    *,
    p: float = 2.0,
    max_length: int = 512,
) -> list[np.ndarray]:
    """Per (prompt, answer): for every parameter tensor with a gradient, in `model.parameters()`
    order, the p-norm of the gradient of the mean NLL of the answer's tokens. (P,) each.

    As open-unlearning's `GradNormAttack`: one item per backward pass, and the answer's last
    token left out of the loss (its `tokenwise_logprobs` drops the final label, meant for an
    EOS). Unlike it, the model stays in eval mode (its dropout, where it has any, stays off, so
    the norms do not depend on a random draw) and its gradients are cleared afterwards: an
    evaluation leaves the model as it found it. Answers are tokenised without EOS."""
    if p not in (1.0, 2.0, float("inf")):
        raise ValueError(f"p must be 1, 2 or inf (open-unlearning's choices), got {p}")
    was_training = model.training
    model.eval()
    out = []
    try:
        for prompt, answer in pairs:
            e = encode_prompt_answer(
                tokenizer, prompt, answer, max_length=max_length, add_eos=False
            )
            if e.prompt_length >= max_length:
                raise prompt_too_long(prompt, e.prompt_length, max_length)
            ids = torch.tensor([e.input_ids], device=model.device)
            labels = torch.tensor(e.labels[1:], device=model.device)
            scored = (labels != IGNORE_INDEX).nonzero().squeeze(-1)[:-1]
            if scored.numel() == 0:
                raise ValueError(f"answer {answer[:40]!r} has fewer than 2 tokens to score")
            with torch.enable_grad():
                logits = model(input_ids=ids).logits[0, :-1]
                logps = torch.log_softmax(logits.float(), dim=-1)
                loss = -logps[scored, labels[scored]].mean()
                model.zero_grad(set_to_none=True)
                loss.backward()
            norms = [
                param.grad.detach().float().norm(p).item()
                for param in model.parameters()
                if param.grad is not None
            ]
            out.append(np.array(norms, dtype=np.float64))
    finally:
        model.zero_grad(set_to_none=True)
        model.train(was_training)
    return out
