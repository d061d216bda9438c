"""The attacks on a real tiny model: the A/B split never leaks into what is trained or shown."""

import json

import pytest

from forgetbench.attacks.halves import split_halves
from forgetbench.config import load_config
from forgetbench.data.tofu import load_tofu
from forgetbench.study import relearn
from forgetbench.study.attack import attack_model
from forgetbench.study.attack_data import attack_data, incontext_records
from forgetbench.study.inputs import Study
from forgetbench.train.mini import TEMPLATE


@pytest.fixture(scope="module")
def setup(tiny_study):
    run, data, base, finetuned, retain = tiny_study
    study = Study(data, finetuned.model_dir, base.model_dir, {"forget10": retain.model_dir},
                  TEMPLATE, 256, lambda name: None, benchmark="mini", finetune_lr=2e-3)  # fmt: skip
    config = load_config(overrides=["eval.max_new_tokens=24", "eval.batch_size=64"])
    return run, data, study, config


def test_relearning_trains_on_the_a_half_only(setup, monkeypatch, tmp_path):
    run, data, study, config = setup
    trained: list[str] = []
    real = relearn.run_stage

    def spy(run_dir, *, examples, **kwargs):
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(kwargs["parent"])
        trained.extend(tokenizer.decode(e.input_ids) for e in examples)
        return real(run_dir, examples=examples, **kwargs)

    monkeypatch.setattr(relearn, "run_stage", spy)
    # One round of plain relearning towards a target no model reaches: it trains once, on all.
    config = config.model_copy(
        update={"attack": config.attack.model_copy(update={"relearn_full_rounds": 1})}
    )
    outcome = attack_model(
        study.finetuned, study, config, split="forget10", folder=tmp_path / "attack",
        attacks=["relearn", "incontext", "relearn_full"], relearn_target=2.0,
    )  # fmt: skip
    assert [step for step, _ in outcome.curve] == [0, 5]  # 20 questions, batches of 4
    plain = trained[10:]
    trained = trained[:10]
    records = load_tofu(data / "tofu", "forget10")
    halves = split_halves(records, seed=0, questions_per_author=20)
    assert json.loads((tmp_path / "attack" / "halves.json").read_text())["b"] == list(halves.b)
    a_answers = {records[i].answer for i in halves.a}
    b_answers = {records[i].answer for i in halves.b}
    assert len(trained) == len(halves.a) == 10 and len(plain) == 20
    assert all(any(a in text for a in a_answers) for text in trained)
    assert not any(b in text for text in trained for b in b_answers)
    # Every attack is scored on the B questions, and relearning ran its 3 steps (10 / batch 4).
    assert outcome.relearn_steps == 3
    for name in ("none", "relearn", "incontext"):
        scored = outcome.logs[name].sets["forget"].fields["generated_text"]
        assert [truth for _, _, truth in scored] == [records[i].answer for i in halves.b]


def test_in_context_facts_come_from_the_same_authors_a_half(setup):
    _, _, study, config = setup
    data = attack_data(study, config, "forget10")
    probes = incontext_records(data, k=3)
    b_answers = [data.train[i].answer for i in data.halves.b]
    a_answers = [data.train[i].answer for i in data.halves.a]
    for probe, i in zip(probes, data.halves.b, strict=True):
        assert probe.question.endswith(data.train[i].question)
        context = probe.question.removesuffix(data.train[i].question)
        assert sum(a in context for a in a_answers) == 3
        assert not any(b in context for b in b_answers)


def test_the_relearning_curve_reads_the_evaluations_rouge(setup, tmp_path):
    from forgetbench.study.attack import _evaluate
    from forgetbench.study.relearn import forget_rouge_only

    _, _, study, config = setup
    data = attack_data(study, config, "forget10")
    log = _evaluate(study.finetuned, data.scored, study, config, tmp_path, variant={"a": 1})
    full = float(log.sets["forget"].rougeL_recall.mean())
    assert forget_rouge_only(study.finetuned, data.scored, study, config) == pytest.approx(
        full, abs=1e-12
    )
