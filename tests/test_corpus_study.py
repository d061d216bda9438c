"""The document benchmarks' study (`forgetbench run --benchmark muse|wmdp`): documents cut into
chunks as the reference code cuts them, unlearning on chunks with every token scored, the two
studies end to end on the session's tiny base (few epochs: the wiring and the numbers' shape, not
the miniature's recipe), and bad input refused in one sentence before anything is written."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

from forgetbench.benchmarks.corpus import corpus_benchmark
from forgetbench.benchmarks.mini.released import write_released
from forgetbench.cli import main
from forgetbench.config import RunConfig
from forgetbench.criteria import muse_criteria
from forgetbench.data.chunks import chunk_bounds, text_chunks
from forgetbench.data.rwku import load_rwku
from forgetbench.errors import ConfigError
from forgetbench.metrics.mia_roc import privleak
from forgetbench.modeling.encoding import encode_chunk
from forgetbench.modeling.loading import load_model
from forgetbench.modeling.templates import PromptTemplate
from forgetbench.records import TextRecord
from forgetbench.study.requests import shared_runs
from forgetbench.train.items import build_items
from muse_reference import forget_holdout_auc, knowmem_rouge, min_k_40, verbmem_item


@pytest.fixture(scope="module")
def words() -> PreTrainedTokenizerFast:
    """A word-level tokenizer (one token per whitespace-separated word, no BOS): chunks that can
    be worked out by hand."""
    vocab = {w: i for i, w in enumerate(["[PAD]", "[EOS]", "[UNK]", *"abcdefgh"])}
    core = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=core, pad_token="[PAD]", eos_token="[EOS]")


def test_chunk_bounds_cover_every_token_once():
    assert chunk_bounds(5, 2) == [(0, 2), (2, 4), (4, 5)]
    assert chunk_bounds(4, 4) == [(0, 4)]
    assert chunk_bounds(0, 3) == []


def test_stream_chunks_cut_the_joined_corpus_and_truncate_keeps_each_documents_head(words):
    docs = ["a b c", "d e f g"]
    # MUSE: "a b c\n\nd e f g" is 7 tokens; chunks of 3 are [a b c] [d e f] [g].
    assert text_chunks(words, docs, length=3, mode="stream") == ["a b c", "d e f", "g"]
    # Across a document boundary the chunk keeps MUSE's blank line.
    assert text_chunks(words, docs, length=2, mode="stream") == ["a b", "c\n\nd", "e f", "g"]
    # WMDP's RMU: each document on its own, truncated to its first `length` tokens.
    assert text_chunks(words, docs, length=2, mode="truncate") == ["a b", "d e"]


def test_a_chunk_is_scored_on_every_token_with_no_eos(words):
    encoded = encode_chunk(words, "a b c", max_length=8)
    assert encoded.input_ids == [3, 4, 5] and encoded.labels == [3, 4, 5]
    # The engine lays a TextRecord out the same way, forget and retain alike: no prompt mask.
    (items,) = build_items(
        [TextRecord("a b c")], [TextRecord("d e")], words, PromptTemplate("question_answer"),
        refusals=("h",), seed=0, max_length=8,
    )  # fmt: skip
    assert items[0].forget.labels == [3, 4, 5] and items[0].retain.labels == [6, 7]


# --- the two studies end to end ---------------------------------------------------------------

# The smallest settings that still run every stage: 3 finetuning epochs, one unlearning epoch.
FAST = ["--scale", "tiny", "--attacks", "none", "train.epochs=3", "unlearn.epochs=1",
        "study.workers=1", "--no-progress"]  # fmt: skip


def _study(
    tiny_study, tmp_path_factory, benchmark: str, method: str, *options: str, source=None
) -> tuple[Path, dict]:
    """A study on the session's data and pretrained base (or `source`'s: an earlier study's
    folder, whose models it reuses)."""
    run = tmp_path_factory.mktemp(benchmark)
    for part in ("data", "models"):
        shutil.copytree((source or tiny_study[0]) / part, run / part, symlinks=True)
    argv = ["run", "--benchmark", benchmark, "--methods", method, *FAST, "--out", str(run),
            *options]  # fmt: skip
    assert main(argv) == 0
    return run, json.loads((run / "results.json").read_text())


@pytest.fixture(scope="module")
def muse_study(tiny_study, tmp_path_factory):
    return _study(tiny_study, tmp_path_factory, "muse", "npo")


@pytest.fixture(scope="module")
def wmdp_study(tiny_study, tmp_path_factory):
    return _study(tiny_study, tmp_path_factory, "wmdp", "rmu")


@pytest.mark.slow
def test_the_muse_study_writes_muses_criteria_per_model(muse_study):
    run, results = muse_study
    rows = results["rows"]
    assert results["benchmark"] == "muse"
    assert [(r["method"], r["step"]) for r in rows[:2]] == [("retain", 0), ("finetuned", 0)]
    assert {r["method"] for r in rows[2:]} == {"npo"} and rows[-1]["epoch"] == 1.0
    keys = ["muse/verbmem_f", "muse/knowmem_f", "muse/knowmem_r", "muse/privleak",
            "muse/mia/min_k", "muse/mia/loss", "muse/mia/gradnorm"]  # fmt: skip
    for row in rows:
        assert all(key in row for key in keys), row
    retain, finetuned = rows[0], rows[1]
    # PrivLeak against the retain model's Min-K% AUC: 0 for the retain model itself.
    assert retain["muse/privleak"] == 0.0
    expected = privleak(finetuned["muse/mia/min_k"], retain["muse/mia/min_k"])
    assert finetuned["muse/privleak"] == pytest.approx(expected)
    # The gates compare the finetuned model with the retain model, in validity's shape.
    checks = results["validity"]["splits"]["forget"]["checks"]
    assert [c["numbers"]["key"] for c in checks] == [
        "muse/verbmem_f", "muse/mia/min_k", "muse/knowmem_r"
    ]  # fmt: skip
    assert checks[0]["numbers"]["finetuned"] == finetuned["muse/verbmem_f"]
    # The utility floor: the tiny model's KnowMem on the retain set sits at noise level.
    assert checks[2]["numbers"]["finetuned"] == finetuned["muse/knowmem_r"] < 10
    assert checks[2]["status"] == "fail" and "forget/utility" in results["validity"]["failed"]
    assert (run / "results.csv").is_file()
    # The report draws no TOFU leaderboard from rows without TOFU's scores.
    page = (run / "report.html").read_text()
    assert 'id="leaderboard"' not in page
    # Examples (study.examples: 3 KnowMem answers of the finetuned and the final model), the
    # settings each model trained with, and PrivLeak's resolution beside the criteria.
    shown = {(e["method"], e["step"]) for e in results["examples"]}
    assert shown == {("finetuned", 0), ("npo", rows[-1]["step"])}
    assert len(results["examples"]) == 6 and all(e["question"] for e in results["examples"])
    assert "results.json has no examples" not in page and "Settings in force" in page
    assert rows[-1]["settings/unlearn_preset"] == "muse" and rows[-1]["settings/unlearn_lr"] > 0
    assert "PrivLeak&#39;s resolution here" in page or "PrivLeak's resolution here" in page
    # Its config holds what the study read: no TOFU splits, formats, MIA shadows, LUME or attacks.
    config = results["config"]
    assert "attack" not in config and "splits" not in config["study"]
    assert "requests" in config["study"] and set(config["eval"]) >= {"mia_k", "batch_size"}
    assert not {"formats", "mia_shadows", "lume"} & set(config["eval"])
    assert 'id="muse-curves-1"' in page and 'id="muse-plane-1"' in page
    (criteria,) = results["criteria"]["muse"]
    assert [m["model"] for m in criteria["models"]] == ["finetuned", "retain", "npo"]
    assert criteria["models"][2]["verbmem_f"] == rows[-1]["muse/verbmem_f"]


@pytest.mark.slow
def test_the_miniature_fits_the_model_so_muses_code_scores_what_the_study_scored(muse_study):
    """MUSE's code feeds every text whole, ours cuts one to the model's positions: on the
    miniature nothing is cut, so MUSE's procedures (tests/muse_reference.py) on the study's
    finetuned model give its generations, Min-40% values and scores."""
    run, results = muse_study
    news = run / "data" / "muse" / "news"
    (folder,) = run.glob("models/*muse-finetune*/model")
    model, tokenizer = load_model(folder, device="cpu")
    positions = model.config.max_position_embeddings
    verbmem = json.loads((news / "verbmem" / "forget.json").read_text())
    docs = {s: json.loads((news / "privleak" / f"{s}.json").read_text()) for s in ("forget", "holdout")}  # fmt: skip
    qa = json.loads((news / "knowmem" / "forget_qa.json").read_text())
    shots = json.loads((news / "knowmem" / "forget_qa_icl.json").read_text())
    general = "".join(f"Question: {d['question']}\nAnswer: {d['answer']}\n\n" for d in shots)
    length = lambda text: len(tokenizer(text)["input_ids"])  # noqa: E731 (BOS included)
    # Every text and its generated tokens within the tiny model's 256 positions.
    assert max(length(r["prompt"]) for r in verbmem) + 128 <= positions
    assert max(length(t) for texts in docs.values() for t in texts) <= positions
    assert max(length(f"{general}Question: {d['question']}\nAnswer: ") for d in qa) + 32 <= positions  # fmt: skip

    logs = json.loads((run / "logs/forget/finetuned/step-0/extra_log.json").read_text())["muse"]
    finetuned = results["rows"][1]
    reference = [verbmem_item(model, tokenizer, row) for row in verbmem]
    assert [r["generation"] for r in logs["verbmem_f"]] == [g for g, _ in reference]
    assert finetuned["muse/verbmem_f"] == pytest.approx(np.mean([v for _, v in reference]) * 100, abs=1e-4)  # fmt: skip
    knowmem = [knowmem_rouge(model, tokenizer, shots, d) for d in qa]
    assert finetuned["muse/knowmem_f"] == pytest.approx(np.mean(knowmem) * 100, abs=1e-4)
    theirs = {s: [min_k_40(model, tokenizer, t) for t in texts] for s, texts in docs.items()}
    ours = [-row["min_k"] for row in logs["privleak"]]
    assert ours == pytest.approx(theirs["forget"] + theirs["holdout"], abs=1e-4)
    auc = forget_holdout_auc(theirs["forget"], theirs["holdout"])
    assert finetuned["muse/mia/min_k"] == pytest.approx(1 - auc, abs=1e-4)


@pytest.fixture(scope="module")
def retain_eval(muse_study, tmp_path_factory) -> Path:
    """The MUSE study's retain model scored by `forgetbench eval`: what a user with MUSE's
    retrained model gives `run --retain-log`."""
    run, _ = muse_study
    (retain_model,) = run.glob("models/*muse-retain*/model")
    out = tmp_path_factory.mktemp("retain-eval") / "r"
    argv = ["eval", "--benchmark", "muse", "--data", str(run / "data" / "muse" / "news"), "--json",
            "--no-progress", "--model", str(retain_model), "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    return out


@pytest.mark.slow
def test_eval_scores_your_model_on_a_muse_folder_as_the_study_did(
    muse_study, retain_eval, tmp_path, capsys
):
    run, results = muse_study
    finetuned = results["rows"][1]
    data = str(run / "data" / "muse" / "news")
    common = ["eval", "--benchmark", "muse", "--data", data, "--json", "--no-progress"]
    capsys.readouterr()
    argv = [*common, "--model", results["model"]]
    assert main([*argv, "--out", str(tmp_path / "f"), "--retain-log", str(retain_eval)]) == 0
    scores = json.loads(capsys.readouterr().out)["scores"]
    for key in ("muse/verbmem_f", "muse/knowmem_f", "muse/knowmem_r", "muse/mia/min_k"):
        assert scores[key] == pytest.approx(finetuned[key], abs=1e-9), key
    # PrivLeak against the retain model's summary, as the study computed it.
    assert scores["muse/privleak"] == pytest.approx(finetuned["muse/privleak"], abs=1e-9)
    # What the scores were measured on, for a study given this evaluation as its retain log.
    written = json.loads((tmp_path / "f" / "summary.json").read_text())
    assert written["data_digest"] == corpus_benchmark("muse").digest(Path(data))
    # A retain log without a summary is one sentence naming it.
    line = _refused([*argv, "--out", str(tmp_path / "g"), "--retain-log", data], capsys,
                    "summary.json")  # fmt: skip
    assert "--retain-log" in line and not (tmp_path / "g").exists()


@pytest.mark.slow
def test_npo_on_the_forget_chunks_moves_the_model(muse_study):
    _, results = muse_study
    finetuned, unlearnt = results["rows"][1], results["rows"][-1]
    # One epoch of NPO on the forget articles changes what the model writes and how it scores
    # the privleak documents.
    assert unlearnt["muse/mia/loss"] != finetuned["muse/mia/loss"] or (
        unlearnt["muse/verbmem_f"] != finetuned["muse/verbmem_f"]
    )


def test_requests_with_the_same_documents_share_one_unlearning_run(tmp_path):
    data = tmp_path / "muse"
    write_released(data, "muse", scale="tiny")
    bench = corpus_benchmark("muse")
    series = list(bench.requests)
    # As in News, forget_1 of both series is the study's forget set: one run, the study's own
    # (as MUSE's scripts start both from it); sust's later folds start from the previous fold's
    # model, so they share nothing.
    assert shared_runs(bench, data, series) == {
        "scal_forget_1": "forget", "scal_forget_2": "scal_forget_2",
        "scal_forget_3": "scal_forget_3", "scal_forget_4": "scal_forget_4",
        "sust_forget_1": "forget",
    }  # fmt: skip
    forget = bench.forget_texts("forget")(data)
    assert bench.forget_texts("sust_forget_1")(data) == forget
    assert bench.forget_texts("scal_forget_3")(data)[: len(forget)] == forget
    # A corpus without scal/ and sust/ (MUSE Books) runs no series.
    shutil.rmtree(data / "sust")
    assert [s.name for s in series if s.present(data)] == ["scal"]


@pytest.mark.slow
def test_muse_requests_scalability_and_sustainability(muse_study):
    run, results = muse_study
    rows, sequence = results["rows"], results["sequence"]
    modes = [(r["split"], r["method"], r["mode"], r["request"]) for r in sequence]
    for name, mode in (("scal", "one-shot"), ("sust", "sequential")):
        for k in range(1, 5):
            split = f"{name}_forget_{k}"
            for method, kind in (
                ("retain", "reference"),
                ("finetuned", "reference"),
                ("npo", mode),
            ):
                assert (split, method, kind, k) in modes
    assert len(sequence) == 2 * 4 * 3
    by = {(r["split"], r["method"]): r for r in sequence}
    final = rows[-1]
    keys = ("muse/verbmem_f", "muse/knowmem_r", "muse/privleak", "muse/mia/min_k")
    # The references are the study's own evaluations; the first request of both series (the
    # forget set) is the study's own run.
    for key in keys:
        assert by["scal_forget_3", "finetuned"][key] == rows[1][key]
        assert by["scal_forget_1", "npo"][key] == final[key]
        assert by["sust_forget_1", "npo"][key] == final[key]
    # Each sequential request starts from the previous one's model: the chain's runs are on disk
    # under their own names, and seven runs were trained for the study's eleven unlearnt models.
    runs = sorted(p.name.rsplit("-", 1)[0] for p in (run / "unlearn").iterdir())
    assert runs == sorted([
        "npo-forget", "npo-scal_forget_2", "npo-scal_forget_3", "npo-scal_forget_4",
        "npo-sust_forget_2-after-forget", "npo-sust_forget_3-after-sust_forget_2",
        "npo-sust_forget_4-after-sust_forget_3",
    ])  # fmt: skip
    # Three more requests moved the model: some score of the last differs from the first's.
    last, first = by["sust_forget_4", "npo"], by["sust_forget_1", "npo"]
    assert any(last[k] != first[k] for k in first if k.startswith("muse/") and k != "muse/privleak")
    # MUSE's C5 and C6 read KnowMem on the retain set at every request, against the finetuned
    # model's.
    (section,) = muse_criteria(rows, sequence)
    assert section["requests"] == [1, 2, 3, 4]
    for criterion, name in (("scalability", "scal"), ("sustainability", "sust")):
        found = section[criterion]["npo"]
        values = [by[f"{name}_forget_{k}", "npo"]["muse/knowmem_r"] for k in range(1, 5)]
        assert found["values"] == values
        # Not judged: the finetuned model's KnowMem retain is below MUSE's floor (the gate
        # above); the values are still there to read.
        assert rows[1]["muse/knowmem_r"] < 10 and found["met"] is None
    page = (run / "report.html").read_text()
    assert "Scalability" in page and "request 4" in page


@pytest.mark.slow
def test_the_wmdp_study_writes_accuracy_per_subset_and_the_utility(wmdp_study):
    _, results = wmdp_study
    rows = results["rows"]
    assert [r["method"] for r in rows[:2]] == ["retain", "finetuned"]
    assert {r["method"] for r in rows[2:]} == {"rmu"}
    for row in rows:
        subsets = [row[f"wmdp/{s}"] for s in ("bio", "cyber", "chem")]
        # 12 questions per subset: wmdp/all is their mean; mmlu/all is over 24 questions.
        assert row["wmdp/all"] == pytest.approx(sum(subsets) / 3)
        assert round(row["mmlu/all"] * 24, 9).is_integer()
    assert results["validity"]["splits"]["forget"]["checks"][0]["numbers"]["key"] == "wmdp/all"
    assert "requests" not in results["config"]["study"] and "mia_k" not in results["config"]["eval"]


# --- a study of your own model ----------------------------------------------------------------


def _own_study(muse_study, out: Path, *more: str) -> dict:
    """`run --benchmark muse --model M --data DIR`, the MUSE study's finetuned model standing in
    for the user's (MUSE's released target model): NPO, one unlearning epoch."""
    run, results = muse_study
    argv = ["run", "--benchmark", "muse", "--model", results["model"], "--data",
            str(run / "data" / "muse" / "news"), "--methods", "npo", "unlearn.epochs=1",
            "study.workers=1", "study.requests=false", "--no-progress", "--out", str(out),
            *more]  # fmt: skip
    assert main(argv) == 0
    return json.loads((out / "results.json").read_text())


@pytest.mark.slow
def test_a_study_of_your_model_scores_it_against_your_retain_models_evaluation(
    muse_study, retain_eval, tmp_path
):
    _, builtin = muse_study
    results = _own_study(muse_study, tmp_path / "own", "--retain-log", str(retain_eval))
    assert (results["benchmark"], results["model"]) == ("muse", builtin["model"])
    assert results["scale"] is None
    rows = results["rows"]
    assert [r["method"] for r in rows[:2]] == ["retain", "finetuned"]
    assert {r["method"] for r in rows[2:]} == {"npo"} and rows[-1]["epoch"] == 1.0
    # The retain row is the retain model's evaluation, read from the summary eval wrote.
    summary = json.loads((retain_eval / "summary.json").read_text())["scores"]
    retain, finetuned = rows[0], rows[1]
    for key in ("muse/verbmem_f", "muse/knowmem_f", "muse/knowmem_r", "muse/mia/min_k"):
        assert retain[key] == summary[key], key
        # The given model is scored as the built-in study scored it (the same model).
        assert finetuned[key] == pytest.approx(builtin["rows"][1][key], abs=1e-9), key
    assert (tmp_path / "own" / retain["log"]).resolve() == retain_eval.resolve()
    # PrivLeak in MUSE's convention, where AUC is 1 - ours:
    # (AUC_model - AUC_retain) / AUC_retain * 100 on the Min-K% AUC.
    auc_retain = 1 - summary["muse/mia/min_k"]
    assert auc_retain > 0  # a defined PrivLeak: the retain model does not separate the sets
    for row in rows[1:]:
        auc = 1 - row["muse/mia/min_k"]
        assert row["muse/privleak"] == pytest.approx((auc - auc_retain) / auc_retain * 100)
    assert retain["muse/privleak"] == 0.0
    # The same number the built-in study got against its own retain model (scored in-study).
    assert finetuned["muse/privleak"] == pytest.approx(builtin["rows"][1]["muse/privleak"])
    # The gates compare the given model with the retain model's evaluation.
    checks = results["validity"]["splits"]["forget"]["checks"]
    assert all(c["status"] in ("pass", "fail") for c in checks), checks
    assert checks[0]["numbers"]["retain"] == summary["muse/verbmem_f"]
    # NPO unlearnt the given model with TOFU's recipe for a model of yours (lr 1e-5, batch 32).
    (run,) = (tmp_path / "own").glob("unlearn/npo-forget-*/unlearn.json")
    unlearnt = json.loads(run.read_text())
    assert unlearnt["parent"] == builtin["model"]
    assert (unlearnt["config"]["lr"], unlearnt["config"]["batch_size"]) == (1e-5, 32)


@pytest.mark.slow
def test_without_a_retain_log_the_study_says_the_gap_cannot_be_checked(
    muse_study, tmp_path, capsys
):
    capsys.readouterr()
    results = _own_study(muse_study, tmp_path / "own")
    rows = results["rows"]
    assert [r["method"] for r in rows[:1]] == ["finetuned"] and len(rows) > 1
    assert all(r["muse/privleak"] is None and r["muse/verbmem_f"] is not None for r in rows)
    validity = results["validity"]
    # The gaps to a retain model cannot be checked; the utility floor needs none (and the tiny
    # model's KnowMem on the retain set is below it).
    assert not validity["valid"] and validity["failed"] == ["forget/utility"]
    checks = validity["splits"]["forget"]["checks"]
    assert [c["status"] for c in checks] == ["unknown", "unknown", "fail"]
    assert "cannot be checked" in checks[0]["finding"] and "--retain-log" in checks[0]["todo"]
    # Said first, before any table.
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("This study cannot rank methods"), out[0]
    assert sum(line.strip().startswith("UNKNOWN") for line in out[:8]) == 2, out[:8]


@pytest.mark.slow
def test_a_wmdp_study_of_your_model_reads_its_retain_row_from_the_log(wmdp_study, tmp_path, capsys):
    run, builtin = wmdp_study
    data = str(run / "data" / "wmdp")
    (retain_model,) = run.glob("models/*wmdp-retain*/model")
    common = ["--benchmark", "wmdp", "--data", data, "--no-progress"]
    assert main(["eval", *common, "--model", str(retain_model), "--out", str(tmp_path / "r")]) == 0
    argv = ["run", *common, "--model", builtin["model"], "--methods", "grad_diff",
            "unlearn.epochs=1", "--retain-log", str(tmp_path / "r"), "--out", str(tmp_path / "o")]  # fmt: skip
    assert main(argv) == 0
    capsys.readouterr()
    results = json.loads((tmp_path / "o" / "results.json").read_text())
    assert (results["benchmark"], results["model"]) == ("wmdp", builtin["model"])
    rows = results["rows"]
    assert [r["method"] for r in rows] == ["retain", "finetuned", "grad_diff"]
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())["scores"]
    for key in ("wmdp/all", "mmlu/all"):
        assert rows[0][key] == summary[key]
        assert rows[1][key] == pytest.approx(builtin["rows"][1][key]), key
    check, floor = results["validity"]["splits"]["forget"]["checks"]
    assert check["numbers"]["retain"] == summary["wmdp/all"]
    assert floor["numbers"] == {"key": "mmlu/all", "finetuned": rows[1]["mmlu/all"], "floor": 0.4}


# --- bad input ------------------------------------------------------------------------------


def _refused(argv: list[str], capsys, names: str) -> str:
    code = main(argv)
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert names in lines[0] and code == 2, (code, lines[0])
    return lines[0]


def test_muse_with_tofu_files_is_one_sentence_and_writes_nothing(tmp_path, capsys):
    tofu = tmp_path / "tofu"
    tofu.mkdir()
    (tofu / "forget10.json").write_text('[{"question": "q", "answer": "a"}]')
    out = tmp_path / "out"
    argv = ["run", "--benchmark", "muse", "--data", str(tofu), "--out", str(out)]
    line = _refused(argv, capsys, "knowmem/forget_qa.json")
    assert "MUSE" in line and not out.exists()


@pytest.mark.parametrize(
    ("benchmark", "damage", "names"),
    [
        ("muse", lambda d: (d / "knowmem" / "retain_qa.json").unlink(), "knowmem/retain_qa.json"),
        ("wmdp", lambda d: (d / "wmdp-bio.jsonl").write_text('{"question": "q", "answer": 0}\n'),
         "wmdp-bio.jsonl"),
        ("rwku", lambda d: (d / "2_Leila_Mansour" / "forget_level2.json").unlink(),
         "2_Leila_Mansour/forget_level2.json"),
    ],
)  # fmt: skip
def test_a_folder_missing_a_file_or_a_field_is_refused_before_any_work(
    tmp_path, capsys, benchmark, damage, names
):
    data = tmp_path / benchmark
    write_released(data, benchmark, scale="tiny")
    damage(data)
    out = tmp_path / "out"
    _refused(
        ["run", "--benchmark", benchmark, "--data", str(data), "--out", str(out)], capsys, names
    )
    assert not out.exists()


def test_a_method_that_answers_a_question_is_refused_on_documents(tmp_path, capsys):
    out = tmp_path / "out"
    line = _refused(["run", "--benchmark", "muse", "--methods", "npo,idk", "--out", str(out)],
                    capsys, "idk")  # fmt: skip
    assert "refusal" in line and not out.exists()
    _refused(["run", "--benchmark", "wmdp", "--methods", "altpo", "--out", str(out)], capsys,
             "alternate answers")  # fmt: skip


def test_study_requests_is_refused_where_no_series_is_read(tmp_path, capsys):
    out = tmp_path / "out"
    line = _refused(["run", "study.requests=false", "--out", str(out)], capsys, "study.requests")
    assert "study.sequence" in line and not out.exists()


def test_other_commands_refuse_a_document_benchmark(tmp_path, capsys):
    _refused(["unlearn", "--benchmark", "wmdp", "--out", str(tmp_path / "u")], capsys, "run")


def test_a_study_of_your_model_needs_its_data_and_a_retain_log_of_the_same_benchmark(
    tmp_path, capsys
):
    out = tmp_path / "out"
    line = _refused(["run", "--benchmark", "muse", "--model", str(tmp_path), "--out", str(out)],
                    capsys, "--data")  # fmt: skip
    assert "--model needs --data" in line and not out.exists()
    data = tmp_path / "news"
    write_released(data, "muse", scale="tiny")
    wmdp_eval = tmp_path / "wmdp-eval"
    wmdp_eval.mkdir()
    (wmdp_eval / "summary.json").write_text(
        json.dumps({"benchmark": "wmdp", "scores": {"wmdp/all": 0.25}})
    )
    argv = ["run", "--benchmark", "muse", "--model", str(tmp_path), "--data", str(data),
            "--out", str(out), "--retain-log"]  # fmt: skip
    line = _refused([*argv, str(wmdp_eval)], capsys, "holds scores of wmdp, not of MUSE")
    assert "study.retain_logs.forget" in line and not out.exists()
    # A retain model scored on documents cut at another length than this run's.
    (wmdp_eval / "summary.json").write_text(
        json.dumps(
            {
                "benchmark": "muse",
                "scores": {},
                "config": {"train": {"max_length": 256}, "eval": {}},
            }
        )
    )
    _refused([*argv, str(wmdp_eval)], capsys, "was scored 256 tokens long and this run scores 512")
    # The evaluation of another MUSE folder: by the digest eval records, or, in a summary
    # without one, by the folder it names.
    other = tmp_path / "other"
    write_released(other, "muse", scale="tiny")
    (other / "knowmem" / "forget_qa.json").write_text("[]")  # any byte differs
    summary = {"benchmark": "muse", "scores": {}, "data": str(data),
               "data_digest": corpus_benchmark("muse").digest(other)}  # fmt: skip
    (wmdp_eval / "summary.json").write_text(json.dumps(summary))
    line = _refused([*argv, str(wmdp_eval)], capsys, "was scored on data whose files differ from")
    assert f"--data {data}" in line and not out.exists()
    summary = {"benchmark": "muse", "scores": {}, "data": str(other)}
    (wmdp_eval / "summary.json").write_text(json.dumps(summary))
    _refused([*argv, str(wmdp_eval)], capsys, f"was scored on the folder '{other}', not {data}")
    # The built-in study trains its own retain model.
    _refused(["run", "--benchmark", "muse", "--out", str(out), "--retain-log", str(wmdp_eval)],
             capsys, "built-in study trains its own retain models")  # fmt: skip


@pytest.fixture(scope="module")
def rwku_study(tiny_study, tmp_path_factory):
    return _study(tiny_study, tmp_path_factory, "rwku", "grad_ascent,npo,icu")


@pytest.mark.slow
def test_the_rwku_study_unlearns_each_target_from_the_pretrained_base(rwku_study, tiny_study):
    """RWKU has no finetuning: the original model is the session's pretrained base pretrained
    further on the miniature's people (its knowledge stage), and the reference is the base
    pretrained without the targets, then on the same rows less the targets', so that it never
    saw them."""
    run, results = rwku_study
    rows = results["rows"]
    assert results["benchmark"] == "rwku"
    splits = list(dict.fromkeys(r["split"] for r in rows))
    assert splits == ["1_Eilidh_Rosenqvist", "2_Leila_Mansour"]  # one forget set per target
    keys = ["rwku/forget_fb", "rwku/forget_qa", "rwku/forget_aa", "rwku/neighbor_fb",
            "rwku/neighbor_qa", "rwku/mia_fm/loss", "rwku/mia_rm/min_k_plus_plus", "rwku/mmlu",
            "rwku/truthful_mc2", "rwku/triviaqa_f1", "rwku/forget_aa/reverse query"]  # fmt: skip
    for row in rows:
        assert all(isinstance(row[key], float) for key in keys), row
    for split in splits:
        found = {r["method"]: r for r in rows if r["split"] == split and r["step"] == 0}
        assert set(found) == {"retain", "finetuned", "icu"}
        assert {r["method"] for r in rows if r["split"] == split} == {
            "retain", "finetuned", "grad_ascent", "npo", "icu"
        }  # fmt: skip
        original, reference = found["finetuned"], found["retain"]
        # In-context unlearning: the original model's one row, scored with RWKU's instruction
        # before every prompt, under an evaluation key of its own.
        icu = [r for r in rows if r["split"] == split and r["method"] == "icu"]
        assert icu == [found["icu"]] and icu[0]["log"] == f"logs/{split}/icu/step-0"
        # It trains nothing: its row records its instruction's options, no unlearning loop's.
        assert not [k for k in icu[0] if k.startswith("settings/unlearn_")]
        assert any(k.startswith("settings/method.") for k in icu[0])
        npo = next(r for r in rows if r["split"] == split and r["method"] == "npo")
        assert npo["settings/unlearn_lr"] > 0
        forget = ("rwku/forget_fb", "rwku/forget_qa", "rwku/forget_aa", "rwku/mia_fm/loss")
        assert [icu[0][k] for k in forget] != [original[k] for k in forget]
        summaries = [json.loads((run / r["log"] / "summary.json").read_text())
                     for r in (icu[0], original)]  # fmt: skip
        assert summaries[0]["model"] == summaries[1]["model"]
        assert summaries[0]["key"] != summaries[1]["key"]
        # The original model read the target's biography (FM), the reference never did: FM is
        # likelier under the original.
        assert original["rwku/mia_fm/loss"] > reference["rwku/mia_fm/loss"]
        check = results["validity"]["splits"][split]["checks"][0]
        assert check["numbers"]["key"] == "rwku/forget_qa"
        assert check["numbers"]["finetuned"] == original["rwku/forget_qa"]
        # Gradient ascent on the target's texts lowers their likelihood.
        ga = [r for r in rows if r["split"] == split and r["method"] == "grad_ascent"][-1]
        assert ga["rwku/mia_fm/loss"] < original["rwku/mia_fm/loss"]
    # The reference's own pretraining, beside the session's base, then the two knowledge stages.
    made = {p.name.rsplit("-", 1)[0] for p in (run / "models").iterdir() if p.is_dir()}
    assert {"pretrain", "pretrain-without", "rwku-finetune", "rwku-retain"} <= made
    log = json.loads((run / "logs" / splits[0] / "retain" / "step-0" / "summary.json").read_text())
    assert "/rwku-retain-" in log["model"]
    assert results["examples"] and results["examples"][0]["ground_truth"]
    # The report's RWKU section: per target, each model's row and the attacks' table.
    page = (run / "report.html").read_text()
    assert 'id="rwku"' in page and page.count('<table class="rwku">') == 2 * len(splits)


@pytest.mark.slow
def test_the_rwku_study_unlearns_on_the_corpus_the_original_model_writes(rwku_study, tiny_study,
                                                                        tmp_path_factory):  # fmt: skip
    """rwku.corpus=generated: the original model writes each target's forget corpus (a stage
    keyed by the generation settings), and gradient ascent forgets it instead of positive.json;
    results say which corpus. On the given study's models, one target, the smallest settings."""
    settings = ["rwku.targets=[2]", "rwku.corpus=generated", "rwku.generate_texts=2",
                "rwku.generate_questions=2", "rwku.generate_max_new_tokens=8"]  # fmt: skip
    run, results = _study(tiny_study, tmp_path_factory, "rwku", "grad_ascent", *settings,
                          source=rwku_study[0])  # fmt: skip
    assert results["config"]["rwku"]["corpus"] == "generated"
    corpus = run / results["forget_corpus"]
    record = json.loads((corpus.parent / "corpus.json").read_text())
    assert record["targets"] == ["Leila Mansour"] and record["generation"]["texts"] == 2
    written = load_rwku(corpus, "2_Leila_Mansour", "positive")
    given = load_rwku(rwku_study[0] / "data" / "rwku", "2_Leila_Mansour", "positive")
    assert len(written) == 2 and [r.text for r in written] != [r.text for r in given[:2]]
    assert {r["method"] for r in results["rows"]} == {"retain", "finetuned", "grad_ascent"}
    # The same method on the same model and settings trained on other texts: another run.
    ga = {p.name for p in (run / "unlearn").iterdir()}
    earlier = {p.name for p in (rwku_study[0] / "unlearn").iterdir()}
    assert len(ga) == 1 and next(iter(ga)).startswith("grad_ascent-2_Leila_Mansour-")
    assert not ga & earlier
    assert any(n.startswith("grad_ascent-2_Leila_Mansour-") for n in earlier)


@pytest.mark.slow
def test_an_rwku_batch_forgets_every_target_in_one_run_scored_per_target(rwku_study, tiny_study,
                                                                        tmp_path_factory):  # fmt: skip
    """rwku.batch: one unlearning run on every target's corpus; each model scored on each
    target's probes (rows per target, as a single-target study scores the same model) and the
    batch's row of their means, every row marked with its batch."""
    run, results = _study(tiny_study, tmp_path_factory, "rwku", "grad_ascent", "rwku.batch=true",
                          source=rwku_study[0])  # fmt: skip
    rows, single = results["rows"], rwku_study[1]["rows"]
    batch, targets = "batch_1-2", ["1_Eilidh_Rosenqvist", "2_Leila_Mansour"]
    assert list(dict.fromkeys(r["split"] for r in rows)) == [batch, *targets]
    assert all(r["rwku_batch"] == batch for r in rows)
    (unlearnt,) = [p.name for p in (run / "unlearn").iterdir()]
    assert unlearnt.startswith(f"grad_ascent-{batch}-")
    keys = ("rwku/forget_qa", "rwku/neighbor_fb", "rwku/mia_fm/loss", "rwku/mmlu")
    for method in ("retain", "finetuned", "grad_ascent"):
        found = {r["split"]: r for r in rows if r["method"] == method}
        assert len({found[s]["log"] for s in found}) == 1  # one model, one evaluation
        for key in keys:
            assert found[batch][key] == pytest.approx(np.mean([found[t][key] for t in targets]))
        if method == "grad_ascent":
            continue
        for target in targets:  # the same model as the single-target study's, scored alike
            alone = next(r for r in single if r["split"] == target and r["method"] == method)
            assert [found[target][k] for k in keys] == pytest.approx([alone[k] for k in keys])
    assert set(results["validity"]["splits"]) == {batch, *targets}
    page = (run / "report.html").read_text()
    assert f"{batch}: batch, the mean over its targets" in page
    assert f"{targets[0]} in batch {batch}" in page


@pytest.mark.slow
def test_eval_scores_the_rwku_targets_named_as_the_study_scored_them(rwku_study, capsys):
    """`forgetbench eval --benchmark rwku` scores the targets rwku.targets names, each in a
    folder of its own under --out: its numbers are the study's row of the same model, printed
    as the study's tables; an evaluation stopped before its summary reads back the targets that
    finished, a finished one is never overwritten, an unknown target is refused up front."""
    run, results = rwku_study
    (model,) = (run / "models").glob("rwku-finetune-*")
    out, target = run / "eval-original", "2_Leila_Mansour"
    argv = ["eval", "--benchmark", "rwku", "--model", str(model / "model"), "--data",
            str(run / "data" / "rwku" / "Target"), "--out", str(out),
            "rwku.targets=[Leila Mansour]", "eval.max_length=256", "--no-progress"]  # fmt: skip
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert f"RWKU on {target}" in printed and "adversarial probes" in printed
    row = next(r for r in results["rows"] if r["split"] == target and r["method"] == "finetuned")
    scores = json.loads((out / target / "summary.json").read_text())["scores"]
    rwku_keys = [k for k in scores if k.startswith("rwku/")]
    assert len(rwku_keys) > 20 and "rwku/forget_aa/reverse query" in rwku_keys
    assert {k: scores[k] for k in rwku_keys} == pytest.approx({k: row[k] for k in rwku_keys})
    assert f"{row['rwku/forget_qa']:.3f}" in printed
    assert sorted(p.name for p in out.iterdir()) == [target, "summary.json"]
    (out / "summary.json").unlink()  # as if stopped after the target's evaluation
    assert main([*argv, "--json"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["splits"] == [target] and summary["scores"] == {target: scores}
    _refused(argv, capsys, "already exists")
    argv[argv.index("--out") + 1] = str(run / "eval-nobody")
    _refused([*argv[:-3], "rwku.targets=[3]"], capsys, "rwku.targets: '3'")
    assert not (run / "eval-nobody").exists()


def test_a_study_of_your_model_on_rwku_knows_the_folders_targets(tmp_path, capsys):
    """RWKU's forget sets are the folder's targets: one retain log names which it belongs to."""
    data = tmp_path / "Target"
    write_released(data, "rwku", scale="tiny")
    out = tmp_path / "out"
    argv = ["run", "--benchmark", "rwku", "--model", str(tmp_path), "--data", str(data),
            "--out", str(out), "--retain-log", str(tmp_path)]  # fmt: skip
    _refused(argv, capsys, "2 forget splits (1_Eilidh_Rosenqvist, 2_Leila_Mansour)")
    assert not out.exists()
    argv = [*argv[:-2], "study.retain_logs={3_Nobody: " + str(tmp_path) + "}"]
    _refused(argv, capsys, "3_Nobody")


def test_rwku_targets_chooses_the_forget_sets_a_run_unlearns(tmp_path, capsys):
    """rwku.targets picks the targets the RWKU study unlearns, one forget set each, in the order
    named; run refuses it for another benchmark, and the rwku.* options not run yet."""
    data = tmp_path / "Target"
    write_released(data, "rwku", scale="tiny")
    bench = corpus_benchmark("rwku")
    config = RunConfig.model_validate({"rwku": {"targets": ["2", "Eilidh Rosenqvist"]}})
    chosen = bench.chosen_sets(data, config)
    assert list(chosen) == ["2_Leila_Mansour", "1_Eilidh_Rosenqvist"]
    assert chosen["2_Leila_Mansour"](data) == [
        r.text for r in load_rwku(data, "2_Leila_Mansour", "positive")
    ]
    assert list(bench.chosen_sets(data, RunConfig())) == ["1_Eilidh_Rosenqvist", "2_Leila_Mansour"]
    # With one target chosen, --retain-log is that target's (no longer "2 forget splits"): the
    # study gets past the count to check the log itself.
    out = tmp_path / "out"
    argv = ["run", "--benchmark", "rwku", "--model", str(tmp_path), "--data", str(data),
            "--out", str(out), "--retain-log", str(tmp_path), "rwku.targets=[2]"]  # fmt: skip
    line = _refused(argv, capsys, "study.retain_logs.2_Leila_Mansour")
    assert "forget splits" not in line and not out.exists()
    _refused([*argv[:-1], "rwku.targets=[3]"], capsys, "rwku.targets: '3'")
    _refused(["run", "--benchmark", "muse", "rwku.targets=[1]"], capsys, "the RWKU study alone")


def test_rwku_gives_dpo_its_pairs_and_rejection_tuning_its_questions_and_refusals(
    tmp_path, monkeypatch, words
):
    """Each method unlearns on the corpus RWKU's scripts give it: dpo on the target's pair.json
    (the rejected biography forgotten, the made-up one preferred), idk with retain_weight 0 on
    reject.json drawing the file's refusals, grad_ascent on positive.json's text chunks; the
    RWKU study accepts dpo and idk, which a MUSE study refuses (training is not the point here:
    the engine's call is captured)."""
    from forgetbench.study import unlearn as study_unlearn
    from forgetbench.study.corpus import refuse_document_methods
    from forgetbench.study.inputs import Study, external_defaults

    data = tmp_path / "Target"
    write_released(data, "rwku", scale="tiny")
    captured: dict[str, tuple] = {}

    def engine(out, *, forget, retain, method, refusals, **_):
        captured[method.name] = (forget, retain, refusals)

    monkeypatch.setattr(study_unlearn, "run_unlearning", engine)
    monkeypatch.setattr(study_unlearn, "load_tokenizer", lambda *a, **k: words)
    study = Study(data, tmp_path, None, {}, PromptTemplate("question_answer"), 64,
                  external_defaults, benchmark="rwku", documents="rwku")  # fmt: skip
    split = "2_Leila_Mansour"
    for name in ("dpo", "idk", "grad_ascent"):
        method = {"method": {"retain_weight": 0}} if name == "idk" else {}  # rejection tuning
        study_unlearn.unlearn_split(study, RunConfig.model_validate(method), tmp_path, split, name)
    pairs = load_rwku(data, split, "pair")
    assert captured["dpo"][0] == pairs and captured["dpo"][0][0].chosen != pairs[0].rejected
    rejects = load_rwku(data, split, "reject")
    assert captured["idk"][0] == rejects
    assert captured["idk"][2] == tuple(dict.fromkeys(r.answer for r in rejects))
    texts = [r.text for r in load_rwku(data, split, "positive")]
    ga = captured["grad_ascent"][0]
    assert all(isinstance(r, TextRecord) for r in ga) and ga[0].text.split()[0] in texts[0]
    assert captured["grad_ascent"][2] == captured["dpo"][2]  # the run's own refusals
    # A corpus the model wrote (Study.corpus, in the data's layout, the split's folder alone):
    # every method reads its file there instead of the data's.
    written = tmp_path / "written" / "Target" / split
    shutil.copytree(data / split, written)
    for stem in ("positive", "pair", "reject"):
        rows = json.loads((written / f"{stem}.json").read_text())[:1]
        for row in rows:
            for field in ("text", "prompt", "instruction"):
                if field in row:
                    row[field] = f"Written by the model: {row[field]}"
        (written / f"{stem}.json").write_text(json.dumps(rows))
    study = dataclasses.replace(study, corpus=written.parent)
    for name in ("dpo", "idk", "grad_ascent"):
        method = {"method": {"retain_weight": 0}} if name == "idk" else {}
        study_unlearn.unlearn_split(study, RunConfig.model_validate(method), tmp_path, split, name)
    assert captured["dpo"][0] == load_rwku(written.parent, split, "pair") != pairs
    assert captured["idk"][0] == load_rwku(written.parent, split, "reject") != rejects
    assert captured["grad_ascent"][0][0].text.startswith("Written by the model:")
    refuse_document_methods(corpus_benchmark("rwku"), ["dpo", "idk", "grad_ascent"])
    with pytest.raises(ConfigError, match="altpo"):
        refuse_document_methods(corpus_benchmark("rwku"), ["altpo"])
    with pytest.raises(ConfigError, match="dpo"):
        refuse_document_methods(corpus_benchmark("muse"), ["dpo"])
