"""Issue 4: every method on the tiny finetuned model, checked by its effect."""

import json

import pytest
import torch

from forgetbench.benchmarks.mini.scales import get_scale
from forgetbench.cli import main
from forgetbench.data.tofu import load_tofu
from forgetbench.methods._terms import answer_token_logprobs, per_sample_nll
from forgetbench.methods.base import build_method, trained_method_names
from forgetbench.methods.refusals import REFUSALS
from forgetbench.methods.rmu import rmu_control_vector
from forgetbench.modeling.encoding import collate, encode_prompt_answer
from forgetbench.modeling.forward import forward_logits, hidden_states_at
from forgetbench.modeling.loading import load_model
from forgetbench.study.unlearn import forget_records
from forgetbench.train.loop import NonFiniteLoss
from forgetbench.train.mini import TEMPLATE, mini_unlearn_defaults
from forgetbench.train.unlearn import run_unlearning

pytestmark = pytest.mark.slow
# Every registered method, so a new one is checked by its effect without touching this file.
METHODS = trained_method_names()


@torch.no_grad()
def _probability(model_dir, records, answers=None):
    model, tokenizer = load_model(model_dir)
    model.eval()
    answers = answers or [r.answer for r in records]
    examples = [
        encode_prompt_answer(
            tokenizer, TEMPLATE.prompt(r.question), TEMPLATE.answer(a), max_length=256
        )
        for r, a in zip(records, answers, strict=True)
    ]
    batch = collate(examples, pad_id=tokenizer.pad_token_id)
    return float(torch.exp(-per_sample_nll(forward_logits(model, batch), batch["labels"])).mean())


def _unlearn(tiny_study, name, **options):
    run, data, _, finetuned, _ = tiny_study
    loop, defaults = mini_unlearn_defaults(name, layers=get_scale("tiny").model.layers)
    method = build_method(name, {**defaults, **options})
    return run_unlearning(
        run,
        model_dir=finetuned.model_dir,
        forget=forget_records(data / "tofu", "forget10", method),
        retain=load_tofu(data / "tofu", "retain90"),
        method=method,
        config=loop,
        template=TEMPLATE,
        refusals=REFUSALS,
        split="forget10",
        max_length=256,
        progress=False,
    )


# Methods with a retain term in their miniature options (issue 20's), whose retain probability
# is compared with gradient ascent's; no other method's is read.
RETAIN_REGULARISED = (
    "grad_diff",
    "kl",
    "npo",
    "ngdiff",
    "altpo",
    "ce_u",
    "pdu",
    "satimp",
    "undial",
)


@pytest.fixture(scope="module")
def outcomes(tiny_study):
    run, data, _, finetuned, _ = tiny_study
    forget = load_tofu(data / "tofu", "forget10")
    retain = load_tofu(data / "tofu", "retain90")[:40]
    before = {"forget": _probability(finetuned.model_dir, forget)}
    after = {}
    for name in trained_method_names():
        result = _unlearn(tiny_study, name)
        after[name] = {"forget": _probability(result.model_dir, forget), "result": result}
        if name in (*RETAIN_REGULARISED, "grad_ascent"):
            after[name]["retain"] = _probability(result.model_dir, retain)
    return before, after


@pytest.mark.parametrize("name", trained_method_names())
def test_every_method_lowers_forget_probability(outcomes, name):
    before, after = outcomes
    assert before["forget"] > 0.9
    assert after[name]["forget"] < 0.8 * before["forget"], (name, before, after[name])


def test_retain_regularised_methods_keep_more_utility_than_gradient_ascent(outcomes):
    _, after = outcomes
    for name in RETAIN_REGULARISED:
        assert after[name]["retain"] > after["grad_ascent"]["retain"] + 0.1, (
            name,
            after[name],
            after["grad_ascent"],
        )


def test_idk_raises_the_probability_of_refusals(tiny_study, outcomes):
    _, data, _, finetuned, _ = tiny_study
    forget = load_tofu(data / "tofu", "forget10")
    refusal = [REFUSALS[0]] * len(forget)
    unlearned = outcomes[1]["idk"]["result"].model_dir
    assert _probability(unlearned, forget, refusal) > 20 * _probability(
        finetuned.model_dir, forget, refusal
    )


def test_altpo_raises_the_probability_of_the_alternate_answers(tiny_study, outcomes):
    _, data, _, finetuned, _ = tiny_study
    forget = load_tofu(data / "tofu", "forget10_perturbed")
    alternate = [r.perturbed_answers[0] for r in forget]
    unlearned = outcomes[1]["altpo"]["result"].model_dir
    # measured: 0.018 before, 0.125 after (the preset's comment)
    assert _probability(unlearned, forget, alternate) > 3 * _probability(
        finetuned.model_dir, forget, alternate
    )


def test_rmu_moves_forget_activations_toward_its_direction(tiny_study, outcomes):
    _, data, _, finetuned, _ = tiny_study
    options = mini_unlearn_defaults("rmu", layers=get_scale("tiny").model.layers)[1]
    forget = load_tofu(data / "tofu", "forget10")

    @torch.no_grad()
    def alignment(model_dir):
        model, tokenizer = load_model(model_dir)
        examples = [
            encode_prompt_answer(
                tokenizer, TEMPLATE.prompt(r.question), TEMPLATE.answer(r.answer), max_length=256
            )
            for r in forget
        ]
        batch = collate(examples, pad_id=tokenizer.pad_token_id)
        hidden = hidden_states_at(model.eval(), batch, options["layer"])[
            batch["attention_mask"].bool()
        ]  # (tokens, H)
        u = rmu_control_vector(hidden.shape[-1], seed=0)
        return float(torch.nn.functional.cosine_similarity(hidden, u[None, :], dim=-1).mean())

    assert alignment(outcomes[1]["rmu"]["result"].model_dir) > alignment(finetuned.model_dir) + 0.2


def test_trajectory_snapshots_and_cache(tiny_study, outcomes):
    result = outcomes[1]["npo"]["result"]
    steps = [step for step, _ in result.snapshots]
    # 20 forget questions, batch 4 -> 5 steps per epoch, 5 epochs; a snapshot per epoch + start
    assert steps == [0, 5, 10, 15, 20, 25]
    assert all((path / "config.json").is_file() for _, path in result.snapshots)
    again = _unlearn(tiny_study, "npo")
    assert (
        again.cached and again.model_dir == result.model_dir and again.snapshots == result.snapshots
    )


def test_a_diverging_run_names_the_method_and_step(tiny_study):
    with pytest.raises(
        NonFiniteLoss,
        match=r"grad_ascent on forget10: (loss|gradient norm) became .* at step 1 .*no checkpoint",
    ):
        _unlearn(tiny_study, "grad_ascent", forget_weight=1e38)


def test_unlearn_command_reuses_the_study(tiny_study, outcomes, capsys):
    run = tiny_study[0]
    argv = [
        "unlearn",
        "--scale",
        "tiny",
        "--method",
        "grad_diff",
        "--split",
        "forget10",
        "--out",
        str(run),
        "--json",
    ]
    assert main(argv) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["cached"] and result["model_dir"] == str(
        outcomes[1]["grad_diff"]["result"].model_dir
    )
    assert main([*argv[:-1], "method.beta=0.1", "--json"]) == 2
    assert "unknown option 'grad_diff.beta'" in capsys.readouterr().err
    assert main(["unlearn", "--scale", "tiny", "--split", "retain90", "--out", str(run)]) == 2
    assert "is not a forget split" in capsys.readouterr().err


def test_ngdiff_adapts_its_step_size(outcomes):
    import json as _json

    result = outcomes[1]["ngdiff"]["result"]
    rows = [
        _json.loads(line)
        for line in (result.model_dir.parent / "work" / "train_log.jsonl").read_text().splitlines()
    ]
    assert len(rows) == 25
    # AutoLR (GeN's rule) rescaled AdamW's scheduled step, within [0.01, 10] x it
    assert len({round(r["lr_gain"], 6) for r in rows}) > 1
    assert all(0.01 <= r["lr_gain"] <= 10 for r in rows)
    assert rows[-1]["forget_nll"] > rows[0]["forget_nll"]


@torch.no_grad()
def test_training_nll_equals_float64_on_the_finetuned_model(tiny_study):
    # The per-token log-probs every loss reads (finetuning's NLL, each method's terms), in float32,
    # against the same logits' log-softmax in float64. A softmax over the transposed (B, V, T-1)
    # view rounded worse: per-sample NLL 3e-6 to 4e-6 off here, single tokens 2e-5.
    run, data, _, finetuned, _ = tiny_study
    model, tokenizer = load_model(finetuned.model_dir)
    records = load_tofu(data / "tofu", "forget10")
    examples = [
        encode_prompt_answer(
            tokenizer, TEMPLATE.prompt(r.question), TEMPLATE.answer(r.answer), max_length=256
        )
        for r in records
    ]
    batch = collate(examples, pad_id=tokenizer.pad_token_id)
    logits = forward_logits(model.eval(), batch)
    targets = batch["labels"][:, 1:]
    mask = targets != -100
    exact = torch.log_softmax(logits[:, :-1].double(), dim=-1)
    exact = exact.gather(-1, targets.masked_fill(~mask, 0).unsqueeze(-1)).squeeze(-1) * mask
    exact_nll = -exact.sum(dim=1) / mask.sum(dim=1)
    assert exact_nll.max() < 0.1  # answers learnt: peaked distributions, where rounding shows
    nll = per_sample_nll(logits, batch["labels"]).double()
    assert (nll - exact_nll).abs().max() < 2e-6
    logps, _ = answer_token_logprobs(logits, batch["labels"])
    assert (logps.double() - exact).abs().max() < 1e-5
