"""open-unlearning's losses where forgetbench deliberately computes something else
(docs/methods.md, "Where forgetbench deliberately differs"), written out from its code, bugs
included, for parity_open_unlearning_train.py: `KNOWN_DIFFERENCES` names the (method, batch size)
rows that differ on purpose, and `as_open_unlearning` computes open-unlearning's value on
forgetbench's forward passes, so the harness can check that the difference is that and nothing
else. Imported by the harness as its sibling."""

from __future__ import annotations

from typing import Any

import torch

# Rows where OU computes something else on purpose-kept grounds (docs/methods.md, "Where forgetbench
# deliberately differs"): reported, never failing the run.
KNOWN_DIFFERENCES = {
    ("undial", "1"), ("undial", "8"),  # all-position mean, -100 labels index vocabulary id V-100
    ("pdu", "1"), ("pdu", "8"),  # flattening term read at the answer positions, not before them
    ("rmu", "8"),  # [B] / [B, 1] broadcast
}  # fmt: skip


def as_open_unlearning(
    name: str,
    method: Any,
    overrides: dict[str, Any],
    state: dict[str, Any],
    frozen: Any,
    batch: dict[str, Any],
) -> float | None:
    """For a KNOWN_DIFFERENCES method: what open-unlearning's code computes (written here from its
    formulas, with its bug), on forgetbench's forward passes, with `method` as `--preset
    open_unlearning` builds it. Equal to open-unlearning's value means
    the difference is that and nothing else."""
    import torch.nn.functional as F

    from forgetbench.methods.rmu import rmu_control_vector
    from forgetbench.modeling.forward import forward_logits, hidden_states_at

    model = state["model"]
    forget, retain = batch["forget"], batch["retain"]

    def retain_nll() -> torch.Tensor:  # HF's outputs.loss: every answer token of the batch
        logits = forward_logits(model, retain)[:, :-1]
        return F.cross_entropy(logits.transpose(1, 2), retain["labels"][:, 1:], ignore_index=-100)

    if name == "rmu":
        layer = overrides["layer"]
        target = method.steering_coeff * rmu_control_vector(model.config.hidden_size, seed=0)

        def activation_loss(
            h: torch.Tensor, goal: torch.Tensor, mask: torch.Tensor
        ) -> torch.Tensor:
            sums = (((h - goal) ** 2).mean(-1) * mask).sum(1)  # (B,)
            return (sums / mask.sum(-1, keepdim=True)).mean()  # (B,) / (B, 1): broadcast to (B, B)

        f_mask, r_mask = forget["labels"] != -100, retain["labels"] != -100
        f = activation_loss(hidden_states_at(model, forget, layer), target, f_mask)
        r = activation_loss(
            hidden_states_at(model, retain, layer), hidden_states_at(frozen, retain, layer), r_mask
        )
        return float(f + method.alpha * r)
    if name == "undial":
        logits = forward_logits(model, forget)[:, :-1]
        teacher = forward_logits(frozen, forget)[:, :-1]
        labels = forget["labels"][:, 1:]
        mask = torch.zeros_like(teacher)
        rows = torch.arange(mask.shape[0]).view(-1, 1, 1)
        cols = torch.arange(mask.shape[1]).view(1, -1, 1)
        mask[rows, cols, labels.unsqueeze(-1)] = 1.0  # label -100 marks vocabulary id V - 100
        soft = F.softmax(teacher - method.beta * mask, dim=-1)
        ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), soft.reshape(-1, soft.shape[-1]))
        return float(method.forget_weight * ce + method.retain_weight * retain_nll())
    if name == "pdu":
        logits = forward_logits(model, forget)  # unshifted: read at the answer tokens themselves
        gap = (logits.max(-1).values - logits.mean(-1)) ** 2
        mask = forget["labels"] != -100
        flat = (gap * mask).sum() / mask.sum()
        return float(
            method.forget_weight * flat + method.retain_weight * (retain_nll() - method.retain_eps)
        )
    return None
