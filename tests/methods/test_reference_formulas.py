"""Every method's loss against the formula TOFU's and open-unlearning's (OU) code computes, on one
hand-made batch of B = 3 with answers of 1, 4 and 2 tokens, the case where pooling every answer
token of the batch (`loss_reduction="tokens"`, HF's `outputs.loss`) and averaging per sample
differ. forgetbench's side runs the engine's own path (`MethodLoss`: a forward pass, the answer
log-probs, the method's loss); the expected side is written here in plain torch from the formulas
of OU's trainers (src/trainer/unlearn/*.py and utils.py at d3d7cf9), with the methods' options set
to OU's trainer configs. The model is a real one-layer "bigram" network (the logits of a position
depend on its token only), so every number is a function of these few weights."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

from forgetbench.methods import build_method
from forgetbench.methods._terms import answer_token_logprobs
from forgetbench.methods.base import UnlearnInputs
from forgetbench.methods.rmu import RMU
from forgetbench.modeling.encoding import Encoded, collate
from forgetbench.train.method_loss import MethodLoss

V = 7  # vocabulary; id 0 is padding
PAD = 0


class Bigram(torch.nn.Module):
    """logits[b, t] = W[input_ids[b, t]]: a real, differentiable model small enough to read."""

    def __init__(self, seed: int) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(seed)
        self.table = torch.nn.Parameter(2.0 * torch.randn(V, V, generator=generator))

    def forward(self, input_ids, attention_mask):  # noqa: ARG002 - the engine passes the mask
        return SimpleNamespace(logits=self.table[input_ids])


def _example(prompt: list[int], answer: list[int]) -> Encoded:
    return Encoded(prompt + answer, [-100] * len(prompt) + answer, len(prompt))


def _batch(rows: list[tuple[list[int], list[int]]]) -> dict[str, torch.Tensor]:
    return collate([_example(p, a) for p, a in rows], pad_id=PAD)


# Answers of 1, 4 and 2 tokens (forget), 3, 1, 2 (retain), 2, 3, 1 (refusal), 4, 1, 1 (alternate).
FORGET = _batch([([1, 2], [3]), ([4, 1, 5], [6, 2, 2, 3]), ([5], [1, 4])])
RETAIN = _batch([([2, 3], [4, 4, 1]), ([6], [5]), ([1, 1, 2], [3, 6])])
REFUSAL = _batch([([1, 2], [5, 5]), ([4, 1, 5], [2, 3, 1]), ([5], [6])])
ALTERNATE = _batch([([1, 2], [4, 6, 1, 1]), ([4, 1, 5], [5]), ([5], [3])])


@pytest.fixture(scope="module")
def models() -> tuple[Bigram, Bigram]:
    return Bigram(seed=1), Bigram(seed=2)  # current, frozen reference


def _engine_loss(method, current, reference) -> float:
    """forgetbench's value through the engine's input path, reference log-probs precomputed from
    the frozen model as `with_reference_logps` does."""
    batch = {"forget": FORGET, "retain": RETAIN, "refusal": REFUSAL, "alternate": ALTERNATE}
    with torch.no_grad():
        for kind, part in list(batch.items()):
            logits = reference(part["input_ids"], part["attention_mask"]).logits
            batch[f"ref_{kind}_logps"] = answer_token_logprobs(logits, part["labels"])[0]
    loss, _ = MethodLoss(method, frozen=reference)(current, batch)
    return loss.item()


# --- The reference formulas, from OU's code -----------------------------------------------------


def _logits(model, part):
    return model(part["input_ids"], part["attention_mask"]).logits


def hf_loss(model, part) -> torch.Tensor:
    """HF's `outputs.loss`: the shifted cross entropy, one mean over every label != -100 of the
    batch (what OU's GradAscent, GradDiff and every retain NLL term read)."""
    logits = _logits(model, part)
    return F.cross_entropy(
        logits[:, :-1].reshape(-1, V), part["labels"][:, 1:].reshape(-1), ignore_index=-100
    )


def summed_nll(model, part) -> torch.Tensor:
    """OU's `compute_batch_nll`: each sequence's summed answer-token NLL, (B,)."""
    logits = _logits(model, part)
    per_token = F.cross_entropy(
        logits[:, :-1].transpose(1, 2), part["labels"][:, 1:], ignore_index=-100, reduction="none"
    )
    return per_token.sum(dim=-1)


def dpo_term(current, reference, win, lose, beta) -> torch.Tensor:
    """OU's `compute_dpo_loss`: -(2/beta) mean logsigmoid(beta (win log-ratio - lose log-ratio)),
    a log-ratio being -(summed NLL - reference summed NLL); NPO passes no winner (ratio 0)."""
    win_ratio = 0.0 if win is None else -(summed_nll(current, win) - summed_nll(reference, win))
    lose_ratio = -(summed_nll(current, lose) - summed_nll(reference, lose))
    return -2 / beta * F.logsigmoid(beta * (win_ratio - lose_ratio)).mean()


def token_losses(model, part) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token CE over the flattened batch and which tokens are answer tokens (WGA, SatImp)."""
    logits = _logits(model, part)
    labels = part["labels"][:, 1:].reshape(-1)
    ce = F.cross_entropy(logits[:, :-1].reshape(-1, V), labels, ignore_index=-100, reduction="none")
    return ce, labels != -100


def samples_differ(method_name: str, options: dict, current, reference, expected: float) -> None:
    """The same method averaged per sample misses the token-pooled formula on this batch: the
    batch does separate the two reductions."""
    method = build_method(method_name, {**options, "loss_reduction": "samples"})
    assert abs(_engine_loss(method, current, reference) - expected) > 1e-3


# --- One test per method ---------------------------------------------------------------------


def test_grad_ascent(models):
    current, reference = models
    expected = -hf_loss(current, FORGET).item()  # OU GradAscent: -outputs.loss
    assert _engine_loss(build_method("grad_ascent"), current, reference) == pytest.approx(
        expected, abs=1e-6
    )
    samples_differ("grad_ascent", {}, current, reference, expected)


def test_grad_diff(models):
    current, reference = models
    # OU GradDiff: gamma * -forget outputs.loss + alpha * retain outputs.loss (1, 1)
    expected = (-hf_loss(current, FORGET) + hf_loss(current, RETAIN)).item()
    assert _engine_loss(build_method("grad_diff"), current, reference) == pytest.approx(
        expected, abs=1e-6
    )
    samples_differ("grad_diff", {}, current, reference, expected)


def test_npo(models):
    current, reference = models
    # OU NPO.yaml: beta 0.1, gamma 1, alpha 1, retain NLL
    expected = (
        dpo_term(current, reference, None, FORGET, beta=0.1) + hf_loss(current, RETAIN)
    ).item()
    method = build_method("npo", {"beta": 0.1})
    assert _engine_loss(method, current, reference) == pytest.approx(expected, abs=1e-5)
    samples_differ("npo", {"beta": 0.1}, current, reference, expected)


def test_simnpo(models):
    current, reference = models
    # OU SimNPO.yaml: delta 0, beta 4.5, gamma 0.125, alpha 1; the forget term is a mean over
    # samples of -logsigmoid(beta (summed NLL / |y| - delta)) * 2 / beta by definition
    lengths = (FORGET["labels"][:, 1:] != -100).sum(dim=-1)
    forget = -F.logsigmoid(4.5 * (summed_nll(current, FORGET) / lengths)).mean() * 2 / 4.5
    expected = (0.125 * forget + hf_loss(current, RETAIN)).item()
    assert _engine_loss(build_method("simnpo"), current, reference) == pytest.approx(
        expected, abs=1e-6
    )
    samples_differ("simnpo", {}, current, reference, expected)


def test_dpo_toward_refusals(models):
    current, reference = models
    # OU's DPO trainer on its IdkDPO data (experiment unlearn/tofu/idk): the refusal wins, the true
    # answer loses; DPO.yaml beta 0.1, gamma 1, alpha 1 (retain NLL)
    expected = (
        dpo_term(current, reference, REFUSAL, FORGET, beta=0.1) + hf_loss(current, RETAIN)
    ).item()
    options = {"scale": "open_unlearning", "retain_weight": 1.0}
    assert _engine_loss(build_method("dpo", options), current, reference) == pytest.approx(
        expected, abs=1e-5
    )
    samples_differ("dpo", options, current, reference, expected)


def test_altpo(models):
    current, reference = models
    # OU runs AltPO as its DPO trainer with the alternate answer as the winner
    expected = (
        dpo_term(current, reference, ALTERNATE, FORGET, beta=0.1) + hf_loss(current, RETAIN)
    ).item()
    assert _engine_loss(build_method("altpo"), current, reference) == pytest.approx(
        expected, abs=1e-5
    )
    samples_differ("altpo", {}, current, reference, expected)


def test_wga(models):
    current, reference = models
    # OU compute_wga_loss: -(sg(e^-ce)^beta * ce) over the batch's answer tokens, one mean
    ce, answer = token_losses(current, FORGET)
    forget = -((-ce).exp().detach() * ce)[answer].mean()
    expected = (forget + hf_loss(current, RETAIN)).item()  # WGA.yaml: beta 1, gamma 1, alpha 1
    assert _engine_loss(build_method("wga"), current, reference) == pytest.approx(
        expected, abs=1e-6
    )
    samples_differ("wga", {}, current, reference, expected)


def test_satimp(models):
    current, reference = models
    # OU compute_satimp_loss with SatImp.yaml: beta1 5, beta2 1, gamma 0.1, alpha 1
    ce, answer = token_losses(current, FORGET)
    p = (-ce).exp().detach()
    forget = -((p**5 * (1 - p)) * ce)[answer].mean()
    expected = (0.1 * forget + hf_loss(current, RETAIN)).item()
    options = {"forget_weight": 0.1, "retain_weight": 1.0}
    assert _engine_loss(build_method("satimp", options), current, reference) == pytest.approx(
        expected, abs=1e-6
    )
    samples_differ("satimp", options, current, reference, expected)


def test_ce_u(models):
    current, reference = models
    # OU compute_batch_ceu: drop each answer's first token (ignore_first_n_answer_tokens 1), then
    # CE against softmax(sg(logits) with the true token at -inf), one mean over what is left
    labels = FORGET["labels"].clone()
    answer = labels != -100
    labels[(answer.cumsum(dim=-1) <= 1) & answer] = -100
    logits = _logits(current, FORGET)[:, :-1]
    shifted = labels[:, 1:]
    kept = shifted != -100
    rows, targets = logits[kept], shifted[kept]
    soft = F.softmax(rows.detach().scatter(-1, targets[:, None], float("-inf")), dim=-1)
    expected = F.cross_entropy(rows, soft).item()
    assert _engine_loss(build_method("ce_u"), current, reference) == pytest.approx(
        expected, abs=1e-6
    )
    samples_differ("ce_u", {}, current, reference, expected)


def test_undial(models):
    current, reference = models
    # OU compute_undial_loss (UNDIAL.yaml: beta 10, gamma 1, alpha 0), at the answer positions
    # only: OU averages over every position and lowers vocabulary id -100 (V - 100) where there is
    # no label, a bug forgetbench does not copy (docs/methods.md)
    logits = _logits(current, FORGET)[:, :-1]
    with torch.no_grad():
        teacher = _logits(reference, FORGET)[:, :-1]
    shifted = FORGET["labels"][:, 1:]
    kept = shifted != -100
    onehot = F.one_hot(shifted[kept], V).float()
    soft = F.softmax(teacher[kept] - 10.0 * onehot, dim=-1)
    expected = F.cross_entropy(logits[kept], soft).item()
    assert _engine_loss(build_method("undial"), current, reference) == pytest.approx(
        expected, abs=1e-6
    )
    samples_differ("undial", {}, current, reference, expected)


def test_pdu(models):
    current, reference = models
    # OU PDU: gamma * sum((max - mean)^2 at answer positions) / count + lambda (retain NLL - eps),
    # lambda starting at alpha. forgetbench takes the positions that *predict* answer tokens (the
    # shifted ones, as every method here); OU the logits at the answer tokens themselves.
    logits = _logits(current, FORGET)[:, :-1]
    kept = FORGET["labels"][:, 1:] != -100
    gap = logits.max(dim=-1).values - logits.mean(dim=-1)
    flattening = (gap.pow(2) * kept).sum() / kept.sum()
    expected = (flattening + 100.0 * (hf_loss(current, RETAIN) - 0.3)).item()
    options = {"retain_weight": 100.0, "retain_eps": 0.3}
    assert _engine_loss(build_method("pdu", options), current, reference) == pytest.approx(
        expected, abs=1e-4
    )
    samples_differ("pdu", options, current, reference, expected)


def test_kl(models):
    current, reference = models
    # TOFU's KL / OU GradDiff with retain_loss_type KL: kl_div(log_softmax(current),
    # log_softmax(reference)) on logits flattened to (B*T, V), batchmean, log_target
    cur = F.log_softmax(_logits(current, RETAIN), dim=-1).view(-1, V)
    with torch.no_grad():
        ref = F.log_softmax(_logits(reference, RETAIN), dim=-1).view(-1, V)
    kl = F.kl_div(cur, ref, reduction="batchmean", log_target=True)
    expected = (-hf_loss(current, FORGET) + kl).item()
    options = {"kl_positions": "all"}
    assert _engine_loss(build_method("kl", options), current, reference) == pytest.approx(
        expected, abs=1e-6
    )
    samples_differ("kl", options, current, reference, expected)


def test_idk(models):
    current, reference = models
    # The refusal NLL and the retain NLL, each HF's outputs.loss (TOFU's code pools the two
    # batches into one forward pass; forgetbench keeps the paper's two terms)
    expected = (hf_loss(current, REFUSAL) + hf_loss(current, RETAIN)).item()
    assert _engine_loss(build_method("idk"), current, reference) == pytest.approx(
        expected, abs=1e-6
    )
    samples_differ("idk", {}, current, reference, expected)


def test_ngdiff_task_losses(models):
    current, reference = models
    # The two tasks' losses are the forget and retain outputs.loss
    method = build_method("ngdiff")
    loss_fn = MethodLoss(method, frozen=reference)
    inputs = loss_fn.inputs(current, {"forget": FORGET, "retain": RETAIN})
    forget, retain = method.task_losses(inputs)
    assert forget.item() == pytest.approx(hf_loss(current, FORGET).item(), abs=1e-6)
    assert retain.item() == pytest.approx(hf_loss(current, RETAIN).item(), abs=1e-6)


def test_rmu():
    # OU compute_activation_loss (RMU.yaml: steering_coeff 2, alpha 1, gamma 1, answer tokens):
    # per sample, sum over its answer tokens of the hidden-unit mean of the squared error, divided
    # by its answer-token count, then the mean over samples. OU divides the [B] sums by a [B, 1]
    # count, which broadcasts to [B, B] (mean_i sum_i * mean_j 1/n_j); the per-sample division is
    # what its comments and the paper's 1/|x| inside the expectation say, and what we compute.
    generator = torch.Generator().manual_seed(3)
    B, T, H = 3, 5, 4
    forget_h, retain_h, ref_h = (torch.randn(B, T, H, generator=generator) for _ in range(3))
    forget_mask = torch.tensor([[0, 1, 0, 0, 0], [0, 1, 1, 1, 1], [0, 0, 1, 1, 0]]).bool()
    retain_mask = torch.tensor([[1, 1, 1, 0, 0], [0, 0, 0, 0, 1], [0, 1, 1, 0, 0]]).bool()
    u = torch.rand(H, generator=generator)
    u = u / u.norm()

    def per_sample(a, b, mask):
        squared = ((a - b) ** 2).mean(dim=2) * mask
        return (squared.sum(dim=1) / mask.sum(dim=1)).mean()

    expected = per_sample(forget_h, 2.0 * u, forget_mask) + per_sample(retain_h, ref_h, retain_mask)
    inputs = UnlearnInputs(
        forget_hidden=forget_h,
        forget_hidden_mask=forget_mask,
        retain_hidden=retain_h,
        ref_retain_hidden=ref_h,
        retain_hidden_mask=retain_mask,
        control_vector=u,
    )
    loss, _ = RMU(preset="open_unlearning_tofu").loss(inputs)
    assert loss.item() == pytest.approx(expected.item(), abs=1e-6)
    # OU's broadcast gives another number at B > 1 (at B = 1 the two agree)
    squared = ((forget_h - 2.0 * u) ** 2 * forget_mask[..., None]).mean(dim=2).sum(dim=1)
    broadcast = (squared / forget_mask.sum(dim=-1, keepdim=True)).mean()
    assert abs(broadcast.item() - per_sample(forget_h, 2.0 * u, forget_mask).item()) > 1e-2
