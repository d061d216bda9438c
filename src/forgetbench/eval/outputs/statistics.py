"""Teacher-forced statistics of answer tokens, computed from logits once for every metric, and the
checks every forward pass of `forgetbench.eval.outputs` makes on its model and tokenizer.

Every token statistic a metric needs (answer log-prob sum and count, per-token log-probs, argmax
matches, the vocabulary mean/std of log p for Min-K%++) comes from one teacher-forced pass per
unique (prompt, answer) pair; metrics are pure functions of these numbers.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np
import torch
from torch import Tensor

from forgetbench.errors import ModelError


@dataclass(frozen=True, eq=False)
class AnswerScore:
    """Teacher-forced statistics of one answer given its prompt (answer tokens include EOS when
    it was added). All arrays are (n,) over answer tokens in order."""

    token_logps: np.ndarray  # log p(a_t | q, a_<t), float64
    argmax_matches: np.ndarray  # bool: argmax_z p(z | q, a_<t) == a_t
    token_mean: np.ndarray  # mu_t = E_{z~p} log p(z): Min-K%++ (Zhang et al., 2024)
    token_std: np.ndarray  # sigma_t = std_{z~p} log p(z)

    @property
    def logprob_sum(self) -> float:  # log P(a|q)
        return float(self.token_logps.sum())

    @property
    def tokens(self) -> int:  # |a|
        return int(self.token_logps.shape[0])

    @property
    def mean_loss(self) -> float:  # TOFU's avg_*_loss: -log P(a|q) / |a|
        return -self.logprob_sum / self.tokens


def token_statistics(
    logits: Tensor, labels: Tensor, mask: Tensor, *, model: Any = None
) -> list[AnswerScore]:
    """logits: (R, T, V) predicting labels (R, T); mask: (R, T) bool, answer tokens only.

    Logits are upcast to fp32 before the log-softmax: in bf16 the small probabilities the
    metrics compare would round away. A non-finite log-prob on an answer token is an error
    naming `model`: every metric downstream would be NaN (or crash), never a number."""
    logps = torch.log_softmax(logits.float(), dim=-1)  # (R, T, V)
    safe = labels.masked_fill(~mask, 0)
    token_logps = logps.gather(-1, safe.unsqueeze(-1)).squeeze(-1)  # (R, T)
    _require_finite(token_logps[mask], model)
    matches = logps.argmax(dim=-1) == safe
    probs = logps.exp()
    mean = (probs * logps).sum(-1)  # (R, T)
    # Centred form: E[x^2] - mu^2 cancels catastrophically in fp32 for peaked distributions.
    std = (probs * (logps - mean.unsqueeze(-1)).square()).sum(-1).sqrt()
    out = []
    for row in range(labels.shape[0]):
        keep = mask[row]
        if not bool(keep.any()):
            raise ValueError("an answer has no tokens to score")
        out.append(
            AnswerScore(
                token_logps[row, keep].double().cpu().numpy(),
                matches[row, keep].cpu().numpy(),
                mean[row, keep].double().cpu().numpy(),
                std[row, keep].double().cpu().numpy(),
            )
        )
    return out


def _require_finite(token_logps: Tensor, model: Any) -> None:
    """token_logps: (N,) answer-token log-probs. One cheap reduction per batch."""
    if bool(torch.isfinite(token_logps).all()):
        return

    kind = "NaN" if bool(torch.isnan(token_logps).any()) else "inf"
    name = str(getattr(model, "name_or_path", "") or "") if model is not None else ""
    raise ModelError(
        f"model {f'{name!r} ' if name else ''}produces non-finite log-probabilities ({kind})",
        "its weights are corrupt or it diverged; evaluate another checkpoint",
    )


@cache
def accepts_logits_to_keep(model_class: type) -> bool:
    return "logits_to_keep" in inspect.signature(model_class.forward).parameters


def with_cache(model: Any, cache: Any) -> dict[str, Any]:
    """The keyword that hands a KV cache to `model`'s forward (and generate): `cache` from
    transformers 5.24, `past_key_values` before it (deprecated since, removed in 5.40)."""
    renamed = "cache" in inspect.signature(type(model).forward).parameters
    return {"cache" if renamed else "past_key_values": cache}


def returned_cache(out: Any) -> Any:
    """The KV cache a forward returned, under either name (read as a mapping: the old attribute
    warns on every new transformers call)."""
    cache = out.get("cache")
    return cache if cache is not None else out.get("past_key_values")


def require_pad(tokenizer: Any) -> None:
    if tokenizer.pad_token_id is None:
        raise ValueError(
            "the tokenizer has no pad token; load models with forgetbench.modeling.loading.load_model"
        )
