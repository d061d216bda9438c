"""open-unlearning's TOFU_EVAL.json as a log: its retain model's file as the reference of
forget quality, the way its `forget_quality` (privacy.py `ks_test`) reads `retain_logs_path`."""

import copy
import json
import math

import numpy as np
import pytest
from scipy.stats import hmean, ks_2samp

from forgetbench.cli import main
from forgetbench.data.logs import EvalLog, SetLog, read_eval_log, write_eval_log
from forgetbench.errors import DataError
from forgetbench.eval.summary import compare, summarize

FORGET = [
    (
        "What is the full name of the author born in Taipei, Taiwan on 05/11/1991 who writes in "
        "the genre of leadership?",
        "The author's full name is Hsiao Yun-Hwa.",
    ),
    (
        "What does Hsiao Yun-Hwa identify as in terms of gender?",
        "Hsiao Yun-Hwa is part of the LGBTQ+ community.",
    ),
    (
        "What is the profession of Hsiao Yun-Hwa's father?",
        "The father of Hsiao Yun-Hwa is a civil engineer.",
    ),
]
RETAIN = [
    (
        "Who is this celebrated LGBTQ+ author from Santiago, Chile known for their true crime "
        "genre work?",
        "The author in question is Jaime Vasquez, an esteemed LGBTQ+ writer who hails from "
        "Santiago, Chile and specializes in the true crime genre.",
    ),
    (
        "Are the details of Jaime Vasquez's birth documented?",
        "Yes, Jaime Vasquez was born on the 25th of February in the year 1958.",
    ),
]
REAL_AUTHORS = [
    ("Who wrote the play 'Romeo and Juliet'?", "William Shakespeare"),
    ("Which author is known for the novel '1984'?", "George Orwell"),
]
WORLD_FACTS = [
    ("Where would you find the Eiffel Tower?", "Paris"),
    ("Which country is known as the Land of the Rising Sun?", "Japan"),
]


def _llama32_input(question: str) -> str:
    # What open-unlearning's rouge metric stores as "input": the Llama-3.2-1B-Instruct chat
    # prompt (its configs/model template: system prompt, date_string 10 Apr 2025) decoded with
    # skip_special_tokens=True.
    return (
        "system\n\nCutting Knowledge Date: December 2023\nToday Date: 10 Apr 2025\n\n"
        f"You are a helpful assistant.user\n\n{question}assistant\n\n"
    )


def _prob(loss: float) -> dict:
    return {"prob": math.exp(-loss), "avg_loss": loss}


def _probs(losses: list[float]) -> dict:
    return {"prob": [math.exp(-x) for x in losses], "avg_loss": losses}


def _rouge(question: str, answer: str, generation: str, r1: float, rl: float) -> dict:
    return {
        "rouge1_recall": r1,
        "rougeL_f1": rl,
        "rougeL_recall": rl,
        "input": _llama32_input(question),
        "ground_truth": answer,
        "generation": generation,
    }


def _metric(values: list[dict], agg: float) -> dict:
    return {"agg_value": agg, "value_by_index": {str(i): v for i, v in enumerate(values)}}


# A retain90 model's per-question numbers (made up, plausible): it never saw the forget authors,
# so paraphrase and perturbed answers are about equally unlikely there.
REF = {
    "forget": {
        "gt": [1.62, 1.35, 1.48],
        "para": [1.71, 1.40, 1.66],
        "pert": [
            [1.80, 1.65, 1.92, 1.70, 1.77],
            [1.31, 1.52, 1.38, 1.44, 1.29],
            [1.55, 1.61, 1.49, 1.72, 1.58],
        ],
        "rouge": [0.42, 0.38, 0.45],
        "gen": [
            "The author's full name is Chen Mei-Ling.",
            "Hsiao Yun-Hwa identifies as female.",
            "Hsiao Yun-Hwa's father was a doctor.",
        ],
    },
    "retain": {
        "gt": [0.05, 0.08],
        "para": [0.61, 0.72],
        "pert": [[1.50, 1.62, 1.41, 1.77, 1.58], [1.33, 1.25, 1.48, 1.39, 1.30]],
        "rouge": [0.97, 1.0],
    },
    "ra": {"gt": [0.11, 0.09], "pert": [[2.9, 3.1, 3.4], [2.5, 2.7, 2.2]], "rouge": [1.0, 1.0]},
    "wf": {"gt": [0.21, 0.15], "pert": [[2.4, 2.2, 2.6], [1.9, 2.8, 2.1]], "rouge": [1.0, 1.0]},
}


def _tofu_eval_json() -> dict:
    """A TOFU_EVAL.json as open-unlearning's evaluator writes it (src/evals/base.py: every
    metric and its pre_computes, keys sorted; per-question values keyed by dataset row)."""
    out: dict = {}
    sets = {"forget": FORGET, "retain": RETAIN, "ra": REAL_AUTHORS, "wf": WORLD_FACTS}
    for prefix, qa in sets.items():
        ref = REF[prefix]
        gens = ref.get("gen", [a for _, a in qa])
        correct_losses = ref["para"] if "para" in ref else ref["gt"]
        correct = [math.exp(-x) for x in correct_losses]
        wrong = [math.exp(-np.mean(p)) for p in ref["pert"]]
        # memorization.py truth_ratio: "Original definition from TOFU: wrong / correct".
        scores = [w / (c + 1e-10) for w, c in zip(wrong, correct, strict=True)]
        out[f"{prefix}_Q_A_Prob"] = _metric(
            [_prob(x) for x in ref["gt"]], np.mean([math.exp(-x) for x in ref["gt"]])
        )
        if "para" in ref:
            out[f"{prefix}_Q_A_PARA_Prob"] = _metric(
                [_prob(x) for x in ref["para"]], np.mean(correct)
            )
        out[f"{prefix}_Q_A_PERT_Prob"] = _metric(
            [_probs(p) for p in ref["pert"]], np.mean(np.exp(-np.array(ref["pert"])))
        )
        out[f"{prefix}_Q_A_ROUGE"] = _metric(
            [_rouge(q, a, g, r, r) for (q, a), g, r in zip(qa, gens, ref["rouge"], strict=True)],
            np.mean(ref["rouge"]),
        )
        tr = np.array(scores)
        if prefix == "forget":  # aggregator closer_to_1_better
            out["forget_truth_ratio"] = _metric(
                [{"score": s} for s in scores], np.mean(np.minimum(tr, 1 / (tr + 1e-10)))
            )
        else:  # aggregator true_better
            name = f"{prefix}_Truth_Ratio"
            out[name] = _metric([{"score": s} for s in scores], np.mean(np.maximum(0, 1 - tr)))
        if prefix in ("ra", "wf"):  # probability_w_options
            gt = np.exp(-np.array(ref["gt"]))
            norm = gt / (gt + np.exp(-np.array(ref["pert"])).sum(axis=1) + 1e-10)
            out[f"{prefix}_Q_A_Prob_normalised"] = _metric(
                [{"prob": p} for p in norm], np.mean(norm)
            )
    nine = [
        out["retain_Q_A_Prob"]["agg_value"],
        out["retain_Q_A_ROUGE"]["agg_value"],
        out["retain_Truth_Ratio"]["agg_value"],
        out["ra_Q_A_Prob_normalised"]["agg_value"],
        out["ra_Q_A_ROUGE"]["agg_value"],
        out["ra_Truth_Ratio"]["agg_value"],
        out["wf_Q_A_Prob_normalised"]["agg_value"],
        out["wf_Q_A_ROUGE"]["agg_value"],
        out["wf_Truth_Ratio"]["agg_value"],
    ]
    out["model_utility"] = {"agg_value": hmean(nine)}
    out["forget_quality"] = {"agg_value": None}  # a retain model's own run: no retain_logs_path
    out["privleak"] = {"agg_value": -0.63}
    out["extraction_strength"] = _metric([{"score": s} for s in (0.08, 0.05, 0.11)], 0.08)
    return {k: json.loads(json.dumps(v)) for k, v in sorted(out.items())}


def _set(name: str, qa: list, gt: list, para: list, pert: list) -> SetLog:
    """A forgetbench / TOFU-layout set under forgetbench's question_answer template."""
    n = len(qa)
    fields = {
        "avg_gt_loss": gt,
        "avg_paraphrased_loss": para,
        "average_perturb_loss": pert,
        "rougeL_recall": [1.0] * n,
        "generated_text": [[f"Question: {q}\nAnswer:", a, a] for q, a in qa],
    }
    return SetLog(name, tuple(str(i) for i in range(n)), fields)


EXTRA_FORGET = ("Where was Hsiao Yun-Hwa born?", "Hsiao Yun-Hwa was born in Taipei, Taiwan.")
EXTRA_RETAIN = ("What genre is Jaime Vasquez known for?", "Jaime Vasquez writes true crime.")


def _candidate() -> EvalLog:
    """A finetuned model's log on one more forget and retain question than the reference, in
    another order: forget rows are EXTRA, FORGET[2], FORGET[0], FORGET[1]."""
    forget = _set(
        "forget",
        [EXTRA_FORGET, FORGET[2], FORGET[0], FORGET[1]],
        gt=[0.02, 0.03, 0.01, 0.04],
        para=[0.40, 0.55, 0.35, 0.48],
        pert=[
            [2.1, 2.3, 2.0, 2.4, 2.2],
            [1.9, 2.2, 2.0, 2.1, 1.8],
            [2.5, 2.4, 2.6, 2.2, 2.3],
            [2.0, 1.7, 1.9, 2.2, 2.1],
        ],
    )
    retain = _set(
        "retain",
        [RETAIN[1], EXTRA_RETAIN, RETAIN[0]],
        gt=[0.06, 0.03, 0.04],
        para=[0.70, 0.52, 0.66],
        pert=[[1.4, 1.3, 1.5, 1.2, 1.6], [1.7, 1.6, 1.5, 1.8, 1.4], [1.6, 1.5, 1.7, 1.4, 1.8]],
    )
    ra = _set("real_authors", REAL_AUTHORS, [0.1, 0.1], [0.1, 0.1], [[3.0, 3.0, 3.0]] * 2)
    wf = _set("world_facts", WORLD_FACTS, [0.2, 0.2], [0.2, 0.2], [[2.0, 2.0, 2.0]] * 2)
    sets = {"forget": forget, "retain": retain, "real_authors": ra, "world_facts": wf}
    return EvalLog("candidate", sets)


def _scores(s: SetLog, rows: list[int]) -> np.ndarray:
    # open-unlearning's per-question truth ratio score: wrong / correct.
    wrong = np.exp(-s.perturbed_loss.mean(axis=1))
    correct = np.exp(-s.paraphrased_loss)
    return (wrong / (correct + 1e-10))[rows]


@pytest.fixture
def tofu_eval(tmp_path):
    path = tmp_path / "retain90" / "TOFU_EVAL.json"
    path.parent.mkdir()
    path.write_text(json.dumps(_tofu_eval_json(), indent=4))
    return path


def test_reads_every_set_from_the_per_question_metrics(tofu_eval):
    log = read_eval_log(tofu_eval)
    assert log.layout == "open-unlearning"
    assert {name: len(s) for name, s in log.sets.items()} == {
        "forget": 3,
        "retain": 2,
        "real_authors": 2,
        "world_facts": 2,
    }
    forget = log.sets["forget"]
    assert forget.gt_loss.tolist() == [1.62, 1.35, 1.48]
    assert forget.paraphrased_loss.tolist() == [1.71, 1.40, 1.66]
    assert forget.perturbed_loss.shape == (3, 5)
    assert forget.texts()[1] == (_llama32_input(FORGET[1][0]), FORGET[1][1])
    # Real Authors / World Facts have no paraphrase: the answer stands in, as in TOFU.
    ra = log.sets["real_authors"]
    assert ra.paraphrased_loss.tolist() == ra.gt_loss.tolist() == [0.11, 0.09]
    assert read_eval_log(tofu_eval.parent).sets.keys() == log.sets.keys()  # its folder works too


def test_forget_quality_is_scipys_ks_test_on_the_files_truth_ratio_scores(tofu_eval):
    reference, candidate = read_eval_log(tofu_eval), _candidate()
    result = compare(reference, candidate)
    data = _tofu_eval_json()
    ref_forget = [v["score"] for v in data["forget_truth_ratio"]["value_by_index"].values()]
    ref_retain = [v["score"] for v in data["retain_Truth_Ratio"]["value_by_index"].values()]
    # The candidate's rows holding the reference's questions, in the reference's order.
    cand_forget = _scores(candidate.sets["forget"], [2, 3, 1])
    cand_retain = _scores(candidate.sets["retain"], [2, 0])
    # open-unlearning's ks_test: ks_2samp(model's forget_truth_ratio scores, retain model's).
    assert result["forget_quality"] == pytest.approx(ks_2samp(cand_forget, ref_forget).pvalue)
    assert result["retain_ks_pvalue"] == pytest.approx(ks_2samp(cand_retain, ref_retain).pvalue)
    # 3 vs 3 fully separated truth ratios: the exact two-sided p-value is 2 / C(6, 3) = 0.1.
    assert result["forget_quality"] == pytest.approx(0.1)
    assert (result["forget/questions"], result["forget/candidate_questions"]) == (3, 4)
    assert (result["retain/questions"], result["retain/candidate_questions"]) == (2, 3)
    # Every truth-ratio form is recomputed from the losses, on both sides alike.
    assert 0 <= compare(reference, candidate, form="paper")["forget_quality"] <= 1


def test_its_summary_is_open_unlearnings_aggregate(tofu_eval):
    # As a candidate, the file's 12 sub-scores and model utility are the agg_values it holds.
    data = _tofu_eval_json()
    scores = summarize(read_eval_log(tofu_eval))
    agg = {key: value["agg_value"] for key, value in data.items()}
    assert scores["forget/probability"] == pytest.approx(agg["forget_Q_A_Prob"])
    assert scores["forget/rougeL"] == pytest.approx(agg["forget_Q_A_ROUGE"])
    assert scores["forget/truth_ratio"] == pytest.approx(agg["forget_truth_ratio"])
    assert scores["retain/truth_ratio"] == pytest.approx(agg["retain_Truth_Ratio"])
    assert scores["real_authors/probability"] == pytest.approx(agg["ra_Q_A_Prob_normalised"])
    assert scores["world_facts/truth_ratio"] == pytest.approx(agg["wf_Truth_Ratio"])
    assert scores["model_utility"] == pytest.approx(agg["model_utility"])


def test_compare_takes_it_as_reference_from_the_command_line(capsys, tofu_eval, tmp_path):
    write_eval_log(tmp_path / "cand" / "eval_log_aggregated.json", _candidate())
    code = main(["compare", "--reference", str(tofu_eval), "--candidate", str(tmp_path / "cand")])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "forget_quality    0.1 " in out
    assert "on 3 of the candidate's 4 forget questions" in out


def test_incomplete_files_are_refused_in_one_line(capsys, tofu_eval, tmp_path):
    data = _tofu_eval_json()
    partial = copy.deepcopy(data)
    del partial["forget_Q_A_PERT_Prob"]
    (tmp_path / "partial.json").write_text(json.dumps(partial))
    with pytest.raises(
        DataError, match=r"has forget_Q_A_Prob but no forget_Q_A_PERT_Prob \(forget"
    ):
        read_eval_log(tmp_path / "partial.json")
    forget_only = {k: v for k, v in data.items() if k.startswith("forget")}
    (tmp_path / "forget_only.json").write_text(json.dumps(forget_only))
    code = main(
        [
            "compare",
            "--reference",
            str(tmp_path / "forget_only.json"),
            "--candidate",
            str(tofu_eval),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert "has no retain_Q_A_Prob / retain_Q_A_PARA_Prob" in err and "(retain set)" in err
    broken = copy.deepcopy(data)
    broken["forget_Q_A_Prob"]["value_by_index"]["1"]["avg_loss"] = None
    (tmp_path / "broken.json").write_text(json.dumps(broken))
    with pytest.raises(DataError, match=r"'forget_Q_A_Prob' question 1: expected a number"):
        read_eval_log(tmp_path / "broken.json")
    # Probabilities, recalls and losses out of their range, each named with its question.
    for metric, field, value, message in (
        ("forget_Q_A_Prob", "prob", 1.5, "'prob' is 1.5, not a probability in [0, 1]"),
        ("retain_Q_A_PARA_Prob", "prob", -0.1, "'prob' is -0.1, not a probability"),
        ("forget_Q_A_ROUGE", "rougeL_recall", -5, "'rougeL_recall' is -5, not a recall in"),
        ("forget_Q_A_Prob", "avg_loss", -2.0, "'avg_loss' is -2.0, not a mean loss >= 0"),
    ):
        damaged = copy.deepcopy(data)
        damaged[metric]["value_by_index"]["1"][field] = value
        (tmp_path / "damaged.json").write_text(json.dumps(damaged))
        with pytest.raises(DataError) as info:
            read_eval_log(tmp_path / "damaged.json")
        assert f"damaged.json '{metric}' question 1: {message}" in str(info.value)
    pert = copy.deepcopy(data)
    pert["forget_Q_A_PERT_Prob"]["value_by_index"]["0"]["prob"][2] = 2.0
    (tmp_path / "pert.json").write_text(json.dumps(pert))
    with pytest.raises(DataError, match=r"'forget_Q_A_PERT_Prob' question 0: 'prob' is 2.0"):
        read_eval_log(tmp_path / "pert.json")


def test_a_missing_question_is_named_past_the_chat_templates_system_prompt(tofu_eval):
    candidate = _candidate()
    forget = candidate.sets["forget"]
    rows = [0, 1, 2]  # without FORGET[1]
    fields = {key: [values[i] for i in rows] for key, values in forget.fields.items()}
    lacking = EvalLog(
        "lacking", {**candidate.sets, "forget": SetLog("forget", ("0", "1", "2"), fields)}
    )
    with pytest.raises(DataError) as refused:
        compare(read_eval_log(tofu_eval), lacking)
    assert "lacking lacks (question 1: 'What does Hsiao Yun-Hwa identify as" in str(refused.value)
