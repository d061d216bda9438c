"""TOFU appendix E sanity checks: the verdict logic on hand-worked KS p-values, the random model's
logit scale, and `forgetbench sanity --scale tiny` end to end on the session's tiny models."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from forgetbench.data.logs import EvalLog, SetLog
from forgetbench.eval.sanity import KS_CHECKS, run_checks
from forgetbench.study.sanity import REFERENCE_HIDDEN, random_model


def _log(forget_ratios, retain_ratios) -> EvalLog:
    # tofu_code truth ratio = exp(perturbed loss - paraphrased loss): paraphrased loss 0 and one
    # perturbed answer with loss log(R) give exactly R.
    def set_log(name, ratios):
        n = len(ratios)
        fields = {
            "avg_gt_loss": [0.0] * n,
            "avg_paraphrased_loss": [0.0] * n,
            "average_perturb_loss": [[math.log(r)] for r in ratios],
            "rougeL_recall": [0.0] * n,
        }
        return SetLog(name, tuple(str(i) for i in range(n)), fields)

    sets = {"forget": set_log("forget", forget_ratios), "retain": set_log("retain", retain_ratios)}
    return EvalLog("hand", sets)


def test_checks_use_exact_ks_p_values_and_say_which_hold():
    same = [1.0, 2.0, 3.0, 4.0]
    above = [5.0, 6.0, 7.0, 8.0]  # every value above `same`: D = 1, exact p = 2 / C(8, 4)
    logs = {
        "retain": _log(same, same),
        "retain_seed1": _log(same, same),  # identical: p = 1 on both sets, both "high" hold
        "finetuned": _log(above, same),  # forget: p = 2/70 < 0.05 (low, holds); retain: p = 1
        "random": _log(above, above),  # forget "high" FAILS (p = 2/70); retain "low" holds
        "pretrained": _log(same, above),
    }
    utilities = {"pretrained": 0.5, "random": 0.2}  # random utility 0.2 > 0.05: fails
    checks = {c.name: c for c in run_checks(logs, utilities)}
    assert list(checks)[: len(KS_CHECKS)] == [name for name, *_ in KS_CHECKS]
    low = 2 / math.comb(8, 4)
    expected_p = {
        "retain_vs_retain_seed_forget": 1.0,
        "retain_vs_retain_seed_retain": 1.0,
        "retain_vs_finetuned_forget": low,
        "retain_vs_finetuned_retain": 1.0,
        "retain_vs_random_forget": low,
        "retain_vs_random_retain": low,
        "retain_vs_pretrained_forget": 1.0,
        "retain_vs_pretrained_retain": low,
    }
    for name, p in expected_p.items():
        assert checks[name].p_value == pytest.approx(p, abs=1e-12), name
    failing = {name for name, c in checks.items() if not c.holds}
    assert failing == {"retain_vs_random_forget", "random_utility_low"}
    assert checks["pretrained_utility_high"].value == 0.5
    assert checks["retain_vs_random_forget"].as_dict()["expected"] == "high p (>= 0.05)"


def test_random_model_has_a_7b_llamas_logit_spread(tiny_study):
    import torch
    from transformers import AutoTokenizer

    from forgetbench.modeling.builtin import build_tiny_model

    _, _, base, _, _ = tiny_study
    tokenizer = AutoTokenizer.from_pretrained(base.model_dir)
    ids = tokenizer(["Question: Who wrote it?\nAnswer: A writer."], return_tensors="pt")

    def logit_std(model):
        with torch.no_grad():
            return model(**ids).logits.std(dim=-1).mean().item()

    plain = build_tiny_model(tokenizer, scale="tiny", seed=0)
    scaled = random_model(tokenizer, scale="tiny", seed=0)
    hidden = plain.config.hidden_size
    # N(0, 0.02) weights on a unit-RMS hidden state: logit std ~ 0.02 * sqrt(hidden).
    assert logit_std(plain) == pytest.approx(0.02 * hidden**0.5, rel=0.3)
    assert logit_std(scaled) == pytest.approx(0.02 * REFERENCE_HIDDEN**0.5, rel=0.3)
    untouched = [n for n, p in plain.named_parameters() if n != "model.norm.weight"]
    scaled_params = dict(scaled.named_parameters())
    assert all(
        torch.equal(p, scaled_params[n]) for n, p in plain.named_parameters() if n in untouched
    )


@pytest.mark.slow
def test_sanity_command_on_tiny_models_passes_every_check(tiny_study, capsys):
    from forgetbench.cli import main

    run, *_ = tiny_study  # the base, finetuned and retain90 (seed 0) models are reused
    code = main(["sanity", "--scale", "tiny", "--out", str(run), "--json", "--no-progress",
                 "eval.batch_size=64", "eval.max_new_tokens=32"])  # fmt: skip
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    failing = [c for c in result["checks"] if not c["holds"]]
    assert code == 0 and result["all_hold"], failing
    assert len(result["checks"]) == len(KS_CHECKS) + 2
    assert {"name", "holds", "p_value", "expected"} <= set(result["checks"][0])
    utilities = result["utilities"]
    assert utilities["random"] == 0.0 < 0.1 <= utilities["pretrained"]
    assert min(utilities["finetuned"], utilities["retain"]) > utilities["pretrained"]
    assert np.isfinite([c["p_value"] for c in result["checks"][: len(KS_CHECKS)]]).all()
    # Each model's evaluation is TOFU's alone, which the checks read: no other task's scores.
    summaries = list((run / "eval").glob("sanity-*/**/summary.json"))
    assert len(summaries) == 5
    for summary in summaries:
        scores = json.loads(summary.read_text())["scores"]
        assert not [k for k in scores if k.startswith(("probes/", "formats/", "lume/", "mia/"))]
