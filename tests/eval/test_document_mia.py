"""LUME's membership inference scores whole documents, as SemEval-2025's scorer does: minus the
Hugging Face language-model loss of the document (labels = input ids)."""

import copy
import json

import pytest
import torch

from forgetbench.data.lume import load_mia_documents
from forgetbench.errors import DataError
from forgetbench.eval.backend import FastBackend
from forgetbench.eval.tasks import run_task
from forgetbench.eval.tasks.mia import document_membership
from forgetbench.modeling.builtin import build_tiny_model
from toy import toy_qa, toy_tokenizer

MEMBERS = [f"{q} {a}" for q, a in toy_qa()[:4]]
NONMEMBERS = [" ".join(a for _, a in toy_qa()[4:7]), toy_qa()[9][1]]


def _hf_loss(model, tokenizer, document):
    ids = torch.tensor([tokenizer(document)["input_ids"]])
    with torch.no_grad():
        return float(model(input_ids=ids, labels=ids).loss)


def _without_bos(tokenizer):
    from tokenizers import processors

    plain = copy.deepcopy(tokenizer)
    plain.backend_tokenizer.post_processor = processors.TemplateProcessing(single="$A")
    return plain


@pytest.mark.parametrize("opening", ["bos", "none"])
def test_document_loss_attack_is_minus_the_language_model_loss(opening):
    tokenizer = toy_tokenizer() if opening == "bos" else _without_bos(toy_tokenizer())
    if opening == "none":
        assert tokenizer(MEMBERS[0])["input_ids"][0] != tokenizer.bos_token_id
    model = build_tiny_model(toy_tokenizer(), seed=3).eval()
    task = document_membership(MEMBERS, NONMEMBERS)
    result = run_task(task, FastBackend(model, tokenizer, batch_size=3))
    scores, log = result.scores, result.items
    expected = [-_hf_loss(model, tokenizer, d) for d in [*MEMBERS, *NONMEMBERS]]
    assert [row["loss"] for row in log] == pytest.approx(expected, abs=1e-5)
    assert [row["member"] for row in log] == [True] * 4 + [False] * 2
    # AUC by hand: the share of (member, non-member) pairs the member wins.
    wins = sum(m > n for m in expected[:4] for n in expected[4:])
    assert scores["mia/loss"] == pytest.approx(wins / 8)


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_semeval_mia_files_come_first_and_holdout_documents_are_rebuilt(tmp_path):
    prompts = [
        {"id": "d1sc1", "input": "Ana lives in", "output": "Lima now.", "task": "Task1"},
        {"id": "d1qa0", "input": "Where does Ana live?", "output": "Lima", "task": "Task1"},
    ]
    _write(tmp_path / "forget.jsonl", prompts)
    assert load_mia_documents(tmp_path) is None
    held = [{"id": "d9sc1", "input": "Bo sails to", "output": "Oslo.", "task": "Task2"}]
    _write(tmp_path / "holdout.jsonl", held)
    assert load_mia_documents(tmp_path) == (["Ana lives in Lima now."], ["Bo sails to Oslo."])
    _write(tmp_path / "member.jsonl", [{"id": "m", "document": "Whole member text."}])
    with pytest.raises(DataError, match="only one of member.jsonl and nonmember.jsonl"):
        load_mia_documents(tmp_path)
    _write(tmp_path / "nonmember.jsonl", [{"id": "n", "text": "wrong field"}])
    with pytest.raises(DataError, match="nonmember.jsonl line 1: missing string field 'document'"):
        load_mia_documents(tmp_path)
    _write(tmp_path / "nonmember.jsonl", [{"id": "n", "document": "Never seen."}])
    assert load_mia_documents(tmp_path) == (["Whole member text."], ["Never seen."])
