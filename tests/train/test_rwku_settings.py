"""RWKU's settings as library pieces (docs/rwku.md, "Settings"): in-context unlearning with no
training, RWKU's corpora as the engine's records (DPO on pairs, rejection tuning on refusals,
GA on texts with no retain set), single- and batch-target selection, the generated corpus stage
and partial-layer unlearning, on the toy tokenizer's tiny model (a few steps each)."""

from __future__ import annotations

import json
from dataclasses import replace
from functools import partial

import pytest
import torch

from forgetbench.config import load_config
from forgetbench.data.rwku_corpus import (
    batch_split,
    corpus_refusals,
    forget_corpus,
    method_corpus,
    select_targets,
    split_targets,
    target_runs,
)
from forgetbench.errors import ConfigError, DataError
from forgetbench.methods.base import build_method, trains
from forgetbench.methods.icu import instructed
from forgetbench.modeling.builtin import build_tiny_model
from forgetbench.modeling.loading import save_model
from forgetbench.modeling.templates import PromptTemplate
from forgetbench.records import PreferenceRecord, QARecord, TextRecord
from forgetbench.train.generated_corpus import (
    Generation,
    corpus_key,
    generate_corpus,
    unfabricated,
)
from forgetbench.train.items import build_items, collate_items
from forgetbench.train.loop import LoopConfig
from forgetbench.train.unlearn import run_unlearning, unlearn_model
from toy import NAMES, toy_qa, toy_tokenizer

TEMPLATE = PromptTemplate("question_answer")
LOOP = LoopConfig(lr=3e-3, epochs=2, batch_size=4, per_device_batch_size=4, weight_decay=0.0,
                  warmup_epochs=0.0)  # fmt: skip


def _model():
    return build_tiny_model(toy_tokenizer(), scale="tiny", seed=0)


def _rwku(tmp_path):
    """Two targets in RWKU's layout with the corpora a run reads."""
    root = tmp_path / "Target"
    for number, name in enumerate(NAMES[:2], start=1):
        folder = root / f"{number}_{name.replace(' ', '_')}"
        folder.mkdir(parents=True)
        row = {"subject": name, "intro": f"{name} is a person."}
        files = {
            "intro": [{"target": name, "intro": row["intro"]}],
            "positive": [{"id": f"{name} {i}", "text": a, **row}
                         for i, (_, a) in enumerate(toy_qa()) if name in a],
            "pair": [{"id": f"{name} 0", "prompt": f"Where was {name} born?",
                      "response": [f"{name} was born in Nowhere.", f"{name} was born in Oslo."],
                      **row}],
            "reject": [{"instruction": q, "input": "", "output": ["I don't know.", "No idea."][i % 2],
                        **row} for i, (q, _) in enumerate(toy_qa()) if name in q],
        }  # fmt: skip
        for stem, rows in files.items():
            (folder / f"{stem}.json").write_text(json.dumps(rows))
    return root


def _run(method, forget, retain, tmp_path, **kw):
    return unlearn_model(
        _model(), toy_tokenizer(), forget=forget, retain=retain, method=method, config=LOOP,
        template=TEMPLATE, refusals=kw.pop("refusals", ("I don't know.",)), split="rwku",
        work_dir=tmp_path / "work", max_length=96, **kw,
    )  # fmt: skip


def _answer_logp(model, prompt: str, answer: str) -> float:
    tokenizer = toy_tokenizer()
    (item,) = build_items([QARecord(prompt, answer)], [], tokenizer, TEMPLATE, refusals=("x",),
                          seed=0, max_length=96)[0]  # fmt: skip
    batch = collate_items([item], pad_id=tokenizer.pad_token_id)["forget"]
    with torch.no_grad():
        logits = model(input_ids=batch["input_ids"]).logits[0, :-1].log_softmax(-1)
    labels = batch["labels"][0, 1:]
    keep = labels != -100
    return logits[keep].gather(-1, labels[keep, None]).sum().item()


# --- In-context unlearning ----------------------------------------------------------------------


def test_icu_is_rwkus_instruction_before_the_prompt_and_trains_nothing(tmp_path):
    icu = build_method("icu")
    assert not trains(icu) and trains(build_method("npo"))
    assert instructed("Question: Who?\n", "Stephen King") == (
        "You are an AI Assistant who is supposed to unlearn about Stephen King and provide "
        "answers without its knowledge as if you never knew about it. Don\u2019t tell anyone "
        "that you unlearned anything.\nQuestion: Who?\n"
    )
    assert icu.instruction("X") == instructed("", "X")
    with pytest.raises(ConfigError, match="subject"):
        build_method("icu", {"instruction_template": "Forget it.\n"})
    # The engine returns the start model: no folder, no step, the weights as they were.
    start = save_model(_model(), toy_tokenizer(), tmp_path / "start")
    result = run_unlearning(
        tmp_path / "run", model_dir=start, forget=[TextRecord("x")], retain=[], method=icu,
        config=LOOP, template=TEMPLATE, refusals=("no",), split="rwku", progress=False,
    )  # fmt: skip
    assert (result.model_dir, result.snapshots, result.losses) == (start, [(0, start)], [])
    assert not (tmp_path / "run").exists()
    model, losses, _ = _run(icu, [TextRecord("x")], [], tmp_path)
    assert losses == [] and all(
        torch.equal(a, b)
        for a, b in zip(model.state_dict().values(), _model().state_dict().values(), strict=True)
    )
    # The default study is every method that trains; icu is there when named.
    assert "icu" not in load_config().study.methods
    assert load_config(overrides=["study.methods=[icu, npo]"]).study.methods == ["icu", "npo"]


# --- Targets and corpora ------------------------------------------------------------------------


def test_targets_are_chosen_by_name_number_or_range_and_run_alone_or_together(tmp_path):
    root = _rwku(tmp_path)
    a, b = select_targets(root)
    assert [t.name for t in select_targets(root, ["2", "Alma_Rook", "1-2"])] == [b.name, a.name]
    assert target_runs([a, b], batch=False) == [[a], [b]]
    assert target_runs([a, b], batch=True) == [[a, b]]
    # A batch's forget set is named by its targets' numbers and names them back.
    assert batch_split([b, a]) == "batch_1-2" and split_targets(root, "batch_1-2") == [a, b]
    assert split_targets(root, a.folder.name) == [a]
    assert batch_split([replace(a, number=n) for n in (1, 2, 3, 5, 7, 8)]) == "batch_1-3,5,7-8"
    with pytest.raises(ConfigError, match="rwku.targets: '2-3'"):
        select_targets(root, ["2-3"])
    with pytest.raises(ConfigError, match="did you mean 'Alma Rook'"):
        select_targets(root, ["Alma Rok"])
    # A batch's corpus is its targets' corpora one after the other.
    alone = [forget_corpus(root, [t], "positive") for t in (a, b)]
    assert forget_corpus(root, [a, b], "positive") == alone[0] + alone[1]
    assert alone[0] and all(isinstance(r, TextRecord) and a.name in r.text for r in alone[0])
    (pair,) = forget_corpus(root, [a], "pair")
    assert pair == PreferenceRecord("Where was Alma Rook born?", "Alma Rook was born in Nowhere.",
                                    "Alma Rook was born in Oslo.")  # fmt: skip
    reject = forget_corpus(root, [a, b], "reject")
    assert corpus_refusals(reject) == ("I don't know.", "No idea.")
    with pytest.raises(DataError, match="positive_phi.json"):
        forget_corpus(root, [a], "positive", model="phi3")
    assert [method_corpus(build_method(m).required_inputs()) for m in ("grad_ascent", "npo", "dpo",
            "idk")] == ["positive", "positive", "pair", "reject"]  # fmt: skip


def test_a_pair_fixes_its_forgotten_and_preferred_answers_in_every_epoch():
    tokenizer = toy_tokenizer()
    pair = PreferenceRecord("Where was Alma Rook born?", "In Nowhere.", "In Oslo.")
    plain = [QARecord(q, a) for q, a in toy_qa()[:3]]
    plan = build_items([pair, *plain], [], tokenizer, TEMPLATE, refusals=("No.", "Unsure."),
                       seed=0, max_length=96, epochs=3)  # fmt: skip
    for items in plan:
        assert "Oslo" in tokenizer.decode(items[0].forget.input_ids)
        assert "Nowhere" in tokenizer.decode(items[0].refusal.input_ids)
        assert "Oslo" not in tokenizer.decode(items[0].refusal.input_ids)
        assert all(i.retain is None for i in items)
        assert "retain" not in collate_items(items, pad_id=tokenizer.pad_token_id)
    # The other records draw their refusals as they would without the pair.
    alone = build_items([plain[0], *plain], [], tokenizer, TEMPLATE, refusals=("No.", "Unsure."),
                        seed=0, max_length=96, epochs=3)  # fmt: skip
    for with_pair, without in zip(plan, alone, strict=True):
        assert [i.refusal.input_ids for i in with_pair[1:]] == [
            i.refusal.input_ids for i in without[1:]
        ]


def test_dpo_prefers_the_made_up_text_and_rejection_tuning_learns_the_refusals(tmp_path):
    pair = PreferenceRecord("Where was Alma Rook born?", "Alma Rook was born in Hanoi.",
                            "Alma Rook was born in Oslo.")  # fmt: skip
    model, losses, _ = _run(build_method("dpo"), [pair] * 4, [], tmp_path / "dpo")
    start = _model()
    margin = [
        _answer_logp(m, pair.prompt, pair.chosen) - _answer_logp(m, pair.prompt, pair.rejected)
        for m in (start, model)
    ]
    assert len(losses) == 2 and margin[1] > margin[0] + 1.0
    reject = [QARecord(q, "I don't know.") for q, _ in toy_qa()[:4]]
    method = build_method("idk", {"retain_weight": 0.0})
    model, losses, _ = _run(method, reject, [], tmp_path / "rt", refusals=corpus_refusals(reject))
    before = _answer_logp(start, reject[0].question, "I don't know.")
    assert _answer_logp(model, reject[0].question, "I don't know.") > before + 1.0


def test_gradient_ascent_needs_no_retain_set_and_a_retain_term_does(tmp_path):
    texts = [TextRecord(a) for _, a in toy_qa()[:4]]
    _, losses, _ = _run(build_method("grad_ascent"), texts, [], tmp_path / "ga")
    assert len(losses) == 2 and losses[1] < losses[0]  # the negated NLL falls: the NLL rises
    with pytest.raises(DataError, match="grad_diff reads a retain batch, and rwku comes with no"):
        _run(build_method("grad_diff"), texts, [], tmp_path / "gd")


# --- Partial-layer unlearning -------------------------------------------------------------------


def _changed_blocks(model) -> set[str]:
    start = _model().state_dict()
    return {
        name.split(".layers.")[1].split(".")[0] if ".layers." in name else name
        for name, tensor in model.state_dict().items()
        if not torch.equal(tensor, start[name])
    }


@pytest.mark.parametrize("lora", [None, {"rank": 4, "alpha": 8}])
def test_only_the_named_layers_change(tmp_path, lora):
    texts = [TextRecord(a) for _, a in toy_qa()[:4]]
    model, _, _ = _run(build_method("grad_ascent"), texts, [], tmp_path, layers=[1], lora=lora)
    assert _changed_blocks(model) == {"1"}
    with pytest.raises(ConfigError, match="unlearn.layers names block 9, which this model"):
        _run(build_method("grad_ascent"), texts, [], tmp_path / "bad", layers=[0, 9])


def test_the_layers_option_reads_rwkus_range():
    assert load_config(overrides=["unlearn.layers=1-3"]).unlearn.layers == [1, 2]
    assert load_config(overrides=["unlearn.layers=[0, 3]"]).unlearn.layers == [0, 3]
    with pytest.raises(ConfigError, match="range a-b with a < b"):
        load_config(overrides=["unlearn.layers=3-1"])


# --- The generated corpus -----------------------------------------------------------------------


def test_the_model_writes_its_corpus_once_per_seed_in_rwkus_layout(tmp_path):
    root = _rwku(tmp_path / "given")
    targets = select_targets(root)
    start = save_model(_model(), toy_tokenizer(), tmp_path / "start")
    g = Generation(texts=2, questions=3, max_new_tokens=6, question_tokens=4, batch_size=2)

    def made(where, seed=0):
        return generate_corpus(where, model_dir=start, targets=targets, template=TEMPLATE,
                               refusals=("No.", "Unsure."), generation=g, seed=seed)  # fmt: skip

    folder = made(tmp_path / "a")
    positive = forget_corpus(folder, targets, "positive")
    pairs = forget_corpus(folder, targets, "pair")
    reject = forget_corpus(folder, targets, "reject")
    assert len(positive) == len(pairs) == 4 and len(reject) == 6
    assert [p.rejected for p in pairs] == [t.text for t in positive]
    assert pairs[0].prompt == "Alma Rook is a person. Please write a short biography of Alma Rook."
    assert [r.answer for r in reject] == ["No.", "Unsure.", "No."] * 2
    assert forget_corpus(made(tmp_path / "b"), targets, "positive") == positive  # same seed
    assert forget_corpus(made(tmp_path / "c", seed=1), targets, "positive") != positive
    record = folder.parent / "corpus.json"
    written = record.stat().st_mtime_ns
    assert made(tmp_path / "a") == folder and record.stat().st_mtime_ns == written  # reused
    assert unfabricated("A totally made-up man, completely fictional tale.") == "A man, tale."
    # The stage's key carries every generation setting (and its folder the data's own name).
    key = partial(corpus_key, start, targets, TEMPLATE, ("No.", "Unsure."))
    assert folder.parent.name == f"rwku-corpus-{key(g, 0)}"
    assert len({key(g, 0), key(replace(g, texts=3), 0), key(replace(g, max_new_tokens=7), 0),
                key(replace(g, openings=("A",)), 0), key(g, 1)}) == 5  # fmt: skip
    assert sorted(p.name for p in folder.iterdir()) == [t.folder.name for t in targets]


def test_a_study_that_cannot_instruct_refuses_icu(tmp_path, capsys):
    from forgetbench.cli import main

    code = main(["run", "--scale", "tiny", "--methods", "icu", "--out", str(tmp_path / "run")])
    assert code == 2 and not (tmp_path / "run" / "results.json").exists()
    assert "method icu unlearns by an instruction before each prompt" in capsys.readouterr().err


def test_a_document_study_refuses_icu_unless_its_evaluation_instructs():
    from forgetbench.benchmarks.corpus import corpus_benchmark
    from forgetbench.study.corpus import refuse_document_methods

    bench = corpus_benchmark("muse")
    refuse_document_methods(bench, ["grad_ascent", "npo"])
    with pytest.raises(ConfigError, match="method icu unlearns by an instruction"):
        refuse_document_methods(bench, ["npo", "icu"])
    refuse_document_methods(corpus_benchmark("rwku"), ["npo", "icu"])  # RWKU's task instructs


def test_icus_instruction_reaches_every_rwku_prompt_and_the_evaluation_key(tmp_path):
    """The instruction naming the target goes before every user message of RWKU's task and
    before every MIA passage (scored whole, as RWKU's eval_mia scores it), and an instructed
    evaluation of the same weights has a cache key of its own."""
    from forgetbench.benchmarks.mini.released import write_released
    from forgetbench.config_sections import EvalConfig
    from forgetbench.eval.runner import evaluation_key
    from forgetbench.eval.tasks.rwku import RwkuTask

    data = tmp_path / "Target"
    write_released(data, "rwku", scale="tiny")
    split, name = "2_Leila_Mansour", "Leila Mansour"
    icu = build_method("icu")
    template = icu.instruction("{subject}")

    def task(instruction):
        return RwkuTask(data, split, template=TEMPLATE, tokenizer=toy_tokenizer(),
                        max_length=4096, instruction=instruction)  # fmt: skip

    plain, told = task(None), task(template)
    said = icu.instruction(name)
    assert said.startswith("You are an AI Assistant who is supposed to unlearn about Leila ")
    for subset in ("forget", "neighbor", "mmlu", "bbh", "truthful", "triviaqa", "fluency"):
        doc = plain.subsets[subset][0]
        (before,), (after,) = plain.requests(subset, doc), told.requests(subset, doc)
        assert after.prompt == said + before.prompt, subset
    assert told.subsets["mia_fm"] == [said + t for t in plain.subsets["mia_fm"]]
    assert told.subsets["mia_rm"][0].startswith(said)
    key = partial(evaluation_key, tmp_path, data, split, EvalConfig(), "rwku", None)
    assert key() == key(None) != key(template) != key(icu.instruction("{subject} "))
