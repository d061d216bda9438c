"""forgetbench's TOFU evaluation against a scorer written from TOFU's data code (tests/
tofu_reference.py), one question at a time, on a real miniature model: the same per-question
losses to 1e-5, for the answer, the paraphrase and every perturbed answer."""

from __future__ import annotations

import pytest

from forgetbench.data.tofu import load_tofu
from forgetbench.eval.backend import FastBackend
from forgetbench.eval.tasks.tofu import evaluate_tofu
from forgetbench.modeling.loading import load_model
from forgetbench.modeling.templates import PromptTemplate
from tofu_reference import tofu_reference_avg_loss

pytestmark = pytest.mark.slow
# The miniature's template in TOFU's model-config terms: question_start_tag, question_end_tag,
# answer_tag (the separating space opens the answer).
MINI_TAGS = ("Question: ", "\nAnswer:", " ")


@pytest.mark.parametrize("split", ["forget10_perturbed", "retain_perturbed"])
def test_per_question_losses_equal_tofus_code(tiny_study, split):
    _, data, _, finetuned, _ = tiny_study
    model, tokenizer = load_model(finetuned.model_dir)
    model.eval()
    records = load_tofu(data / "tofu", split)[:12]
    log = evaluate_tofu(
        FastBackend(model, tokenizer, batch_size=7), tokenizer, PromptTemplate("question_answer"),
        {"forget": records}, max_new_tokens=2, max_length=512,
    ).sets["forget"]  # fmt: skip
    for i, r in enumerate(records):

        def reference(answer: str, question: str = r.question) -> float:
            return tofu_reference_avg_loss(model, tokenizer, question, answer, MINI_TAGS)

        assert log.fields["avg_gt_loss"][i] == pytest.approx(reference(r.answer), abs=1e-5)
        assert log.fields["avg_paraphrased_loss"][i] == pytest.approx(
            reference(r.paraphrased_answer), abs=1e-5
        )
        expected = [reference(a) for a in r.perturbed_answers]
        assert log.fields["average_perturb_loss"][i] == pytest.approx(expected, abs=1e-5)
