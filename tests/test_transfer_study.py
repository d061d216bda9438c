"""`forgetbench run` with study.unlearn_formats (the cross-format matrix) and study.sequence
(requests one after another) on the session's tiny data and base: one method, three epochs, the
formats evaluated, no LUME, probes, MIA, shadows or attacks."""

import json
import shutil

import pytest

from forgetbench.cli import main
from forgetbench.config import RunConfig, load_config

pytestmark = [pytest.mark.slow, pytest.mark.study]

ARGS = [
    "--scale", "tiny", "--splits", "forget10", "--methods", "grad_diff",
    "unlearn.epochs=3", "eval.max_new_tokens=32", "eval.batch_size=64", "eval.lume=false",
    "eval.probes=false", "eval.mia=false",
    # The sequence needs a retain model per request (retain99_instances, retain95_instances),
    # the dearest part of the file: every finetuning here is 8 epochs at batch 8, a third of the
    # recipe's 25 at 16, and still knows the forget set (ROUGE-L ~0.8 against the retain
    # model's ~0.5 on request 2's questions). The finetuned and retain90 models are retrained
    # at these settings too: four short finetunings cost less than two of the recipe's.
    "train.epochs=8", "train.batch_size=8",
    "eval.mia_shadows=0", "study.attacks=[]", "study.workers=1",
    "study.unlearn_formats=[qa,cloze]",
    # At the tiny scale forget01/05/10 are one author: the nested instance splits give two
    # disjoint requests (2 questions, then 8 more).
    "study.sequence=[forget01_instances,forget05_instances]",
]  # fmt: skip


@pytest.fixture(scope="module")
def results(tiny_study, tmp_path_factory):
    run = tmp_path_factory.mktemp("transfer")
    for part in ("data", "models"):
        shutil.copytree(tiny_study[0] / part, run / part, symlinks=True)
    assert main(["run", *ARGS, "--out", str(run), "--no-progress"]) == 0
    return run, json.loads((run / "results.json").read_text())


def test_unlearning_in_cloze_lowers_the_cloze_forget_score(results):
    _, found = results
    finetuned = next(r for r in found["rows"] if r["method"] == "finetuned")
    cross = {r["unlearn_format"]: r for r in found["cross_format"]}
    assert set(cross) == {"qa", "cloze"}
    # The QA entry is the study's own final row, not another run.
    final = max((r for r in found["rows"] if r["method"] == "grad_diff"), key=lambda r: r["step"])
    assert {k: v for k, v in cross["qa"].items() if k != "unlearn_format"} == final
    cloze = cross["cloze"]
    assert cloze["formats/cloze/forget"] < 0.8 * finetuned["formats/cloze/forget"]
    assert cloze["model_utility"] is not None and cloze["forget_quality"] is not None
    # Its own run folder: a cloze run is not the QA run.
    assert cloze["log"] != cross["qa"]["log"] and "unlearn-cloze" in cloze["log"]
    # The study's rows are the rows of a study without the matrix: no unlearn_format in them.
    assert not any("unlearn_format" in r for r in found["rows"])


def test_a_sequence_of_two_requests_forgets_the_second_one(results):
    _, found = results
    seq = found["sequence"]
    steps = [r for r in seq if r["mode"] == "sequential"]
    assert [(r["request"], r["split"]) for r in steps] == [
        (1, "forget01_instances"),
        (2, "forget05_instances"),
    ]
    start = next(
        r for r in seq if r["mode"] == "reference" and r["method"] == "finetuned"
        and r["request"] == 2
    )  # fmt: skip
    second = steps[1]
    # The second request's 8 questions: the finetuned model knew them, the sequence forgot them.
    assert start["sequence/request2/rougeL"] > 0.5
    assert second["sequence/request2/rougeL"] < 0.5 * start["sequence/request2/rougeL"]
    assert second["forget/probability"] < start["forget/probability"]
    assert second["sequence/request1/forget_quality"] is not None
    assert second["sequence/earlier/relearned_rougeL"] is not None
    # One-shot unlearning of each union beside it; the first is the sequence's own first run.
    shots = {r["request"]: r for r in seq if r["mode"] == "one-shot"}
    assert set(shots) == {1, 2}
    assert shots[1]["forget_quality"] == steps[0]["forget_quality"]
    assert shots[2]["log"] != second["log"]
    assert found["config"]["study"]["sequence"] == ["forget01_instances", "forget05_instances"]


def test_the_report_shows_the_heatmap_and_the_sequence_plot(results):
    run, _ = results
    html = (run / "report.html").read_text()
    assert 'id="cross-format-forget10-grad_diff"' in html and 'id="sequence-grad_diff"' in html
    assert "Rows: the format the forget set" in html and "x: the number of requests" in html
    assert "Unlearning in cloze removes" in html


def test_the_default_config_records_neither_option():
    # A study without them writes the results.json (config included) it wrote before.
    from forgetbench.study.tofu import _dumped

    study = _dumped(RunConfig())["study"]
    assert "unlearn_formats" not in study and "sequence" not in study
    set_ = _dumped(load_config(overrides=["study.sequence=[forget01,forget05]"]))["study"]
    assert set_["sequence"] == ["forget01", "forget05"]


def test_a_sequence_of_splits_that_add_nothing_is_refused(tiny_study):
    from forgetbench.errors import DataError
    from forgetbench.study.sequence import request_questions

    tofu = tiny_study[1] / "tofu"
    assert [len(q) for q in request_questions(tofu, ["forget01_instances", "forget05_instances"])]
    with pytest.raises(DataError, match="forget05 adds no question to forget01"):
        request_questions(tofu, ["forget01", "forget05"])


def test_format_texts_are_what_the_format_evaluation_scores(tiny_study):
    from forgetbench.benchmarks.mini.read import load_format
    from forgetbench.errors import DataError
    from forgetbench.modeling.templates import PromptTemplate
    from forgetbench.study.format_data import format_texts, split_authors

    data = tiny_study[1]
    template = PromptTemplate("question_answer")
    authors = split_authors(data / "tofu", "forget10")
    cloze = format_texts(data, "cloze", "forget", template, None, authors=authors)
    records = load_format(data, "cloze", "forget")
    assert len(cloze) == len(records) == 20
    # The span is the scored answer; the question and the answer up to it are the prompt.
    assert cloze[0].answer == " " + records[0].span
    assert (
        cloze[0].prompt == f"Question: {records[0].question}\nAnswer: {records[0].prefix}".rstrip()
    )
    mcqa = format_texts(data, "mcqa", "forget", template, None, authors=authors)
    options = [r for r in load_format(data, "mcqa", "forget") if len(r.options) == 4]
    assert [t.answer for t in mcqa] == [" " + "ABCD"[r.label] for r in options]
    with pytest.raises(DataError, match="no cloze texts"):
        format_texts(data, "cloze", "forget", template, None, authors={"nobody"})


def test_the_engine_scores_only_a_prompt_records_answer(tiny_study):
    from forgetbench.modeling.loading import load_tokenizer
    from forgetbench.modeling.templates import PromptTemplate
    from forgetbench.records import PromptRecord, QARecord
    from forgetbench.train.items import build_items

    tokenizer = load_tokenizer(tiny_study[3].model_dir)
    template = PromptTemplate("question_answer")
    laid = PromptRecord("Question: Who?\nAnswer: It was", " Ada")
    plain = QARecord("Who?", "It was Ada")
    (items,) = build_items(
        [laid, plain], [plain], tokenizer, template, refusals=("I don't know.",), seed=0,
        max_length=64,
    )  # fmt: skip
    a, b = items[0].forget, items[1].forget
    # The same text, scored from a different token: only " Ada" (and EOS) for the laid-out one.
    assert a.input_ids == b.input_ids
    scored = [t for t in a.labels if t != -100]
    assert tokenizer.decode(scored[:-1]).strip() == "Ada" and a.prompt_length > b.prompt_length
    # A refusal follows the laid-out prompt.
    assert tokenizer.decode(items[0].refusal.input_ids, skip_special_tokens=True).startswith(
        "Question: Who?\nAnswer: It was"
    )
