"""The unlearning losses on one batch against open-unlearning's formulas computed in float64.

forgetbench's value is the engine's `MethodLoss` in float32 (the open_unlearning preset's options);
the reference is open-unlearning's formula (its trainers' `compute_loss`, written here from
src/trainer/unlearn/*.py at d3d7cf9, as tests/methods/test_reference_formulas.py writes them) on
the same model converted to float64, and the same formula in float32 shows what open-unlearning's
own code gives. The batch and reference model are those of
scripts/parity/parity_open_unlearning_train.py (its first 1 and 8 forget items, each with its retain partner, refusal and alternate answer; the
finetuned model's pretrained parent as reference). PDU's flattening term is read at the positions
that predict the answer tokens, forgetbench's choice (docs/methods.md). Results: docs/parity.md.

    .venv/bin/python scripts/parity/parity_float64_losses.py --model RUN/models/finetune-*/model \\
        --reference RUN/models/pretrain-*/model --data RUN/data
"""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).parent))
import parity_open_unlearning_train as harness  # noqa: E402 - the same batch and preset options

METHODS = ["grad_ascent", "grad_diff", "npo", "simnpo", "dpo", "altpo", "wga", "satimp", "pdu"]
PDU = {"retain_weight": 100.0, "retain_eps": 0.3}  # community/methods/PDU/run.sh's TOFU run


def logits(model: Any, part: dict[str, Any]) -> torch.Tensor:
    from forgetbench.modeling.forward import forward_logits

    return forward_logits(model, part)


def hf_loss(model: Any, part: dict[str, Any]) -> torch.Tensor:
    """HF's `outputs.loss`: one mean over every answer token of the batch."""
    out = logits(model, part)
    flat = out[:, :-1].reshape(-1, out.shape[-1])
    return F.cross_entropy(flat, part["labels"][:, 1:].reshape(-1), ignore_index=-100)


def summed_nll(model: Any, part: dict[str, Any]) -> torch.Tensor:
    """open-unlearning's `compute_batch_nll`, as it writes it (over the transposed view)."""
    out = logits(model, part)[:, :-1].transpose(1, 2)
    nll = F.cross_entropy(out, part["labels"][:, 1:], ignore_index=-100, reduction="none")
    return nll.sum(dim=-1)


def dpo_term(current: Any, reference: Any, win: Any, lose: Any, beta: float = 0.1) -> torch.Tensor:
    """`compute_dpo_loss`; NPO passes no winner."""
    win_ratio = 0.0 if win is None else summed_nll(reference, win) - summed_nll(current, win)
    lose_ratio = summed_nll(reference, lose) - summed_nll(current, lose)
    return -2 / beta * F.logsigmoid(beta * (win_ratio - lose_ratio)).mean()


def token_losses(model: Any, part: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
    out = logits(model, part)
    labels = part["labels"][:, 1:].reshape(-1)
    flat = out[:, :-1].reshape(-1, out.shape[-1])
    return F.cross_entropy(flat, labels, ignore_index=-100, reduction="none"), labels != -100


def open_unlearning(name: str, current: Any, reference: Any, batch: dict[str, Any]) -> float:
    forget, retain = batch["forget"], batch["retain"]
    retain_nll = hf_loss(current, retain)
    if name == "grad_ascent":
        return float(-hf_loss(current, forget))
    if name == "grad_diff":
        return float(-hf_loss(current, forget) + retain_nll)
    if name in ("npo", "dpo", "altpo"):
        win = {"npo": None, "dpo": batch["refusal"], "altpo": batch.get("alternate")}[name]
        return float(dpo_term(current, reference, win, forget) + retain_nll)
    if name == "simnpo":  # delta 0, beta 4.5, gamma 0.125
        lengths = (forget["labels"][:, 1:] != -100).sum(dim=-1)
        term = -F.logsigmoid(4.5 * summed_nll(current, forget) / lengths).mean() * 2 / 4.5
        return float(0.125 * term + retain_nll)
    ce, answer = token_losses(current, forget)
    p = (-ce).exp()
    if name == "wga":  # beta 1
        return float(-(p * ce)[answer].mean() + retain_nll)
    if name == "satimp":  # beta1 5, beta2 1, gamma 0.1
        return float(0.1 * -((p**5 * (1 - p)) * ce)[answer].mean() + retain_nll)
    if name == "pdu":
        out = logits(current, forget)[:, :-1]
        kept = forget["labels"][:, 1:] != -100
        gap = out.max(dim=-1).values - out.mean(dim=-1)
        flattening = (gap.pow(2) * kept).sum() / kept.sum()
        return float(flattening + PDU["retain_weight"] * (retain_nll - PDU["retain_eps"]))
    raise KeyError(name)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, required=True, help="finetuned save_pretrained folder")
    ap.add_argument("--reference", type=Path, required=True, help="the reference model")
    ap.add_argument("--data", type=Path, required=True, help="miniature data folder (or its tofu/)")
    ap.add_argument("--split", default="forget10")
    args = ap.parse_args()
    torch.set_num_threads(1)
    from forgetbench.train.items import collate_items
    from forgetbench.train.method_loss import MethodLoss

    state = harness.prepare(argparse.Namespace(**vars(args), steps=1, batch_size=8))
    model, reference = state["model"], state["reference"]
    model64, reference64 = copy.deepcopy(model).double(), copy.deepcopy(reference).double()
    pad = state["tokenizer"].pad_token_id
    print(f"{'method':12s} {'B':>2s} {'forgetbench':>14s} {'OU float32':>14s} {'OU float64':>14s}"
          f" {'fb - f64':>10s} {'OU32 - f64':>10s}")  # fmt: skip
    with torch.no_grad():
        for size in (1, 8):
            batch = collate_items(state["reference_items"][:size], pad_id=pad)
            for name in METHODS:
                _, method = harness.preset_method(name, PDU if name == "pdu" else None)
                ours = float(MethodLoss(method, frozen=reference)(model, batch)[0])
                theirs = open_unlearning(name, model, reference, batch)
                exact = open_unlearning(name, model64, reference64, batch)
                print(f"{name:12s} {size:2d} {ours:14.7f} {theirs:14.7f} {exact:14.7f}"
                      f" {ours - exact:10.1e} {theirs - exact:10.1e}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
