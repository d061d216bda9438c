"""RWKU's prompts as its eval_forget / eval_mmlu build them, on a model with a chat template and
on the built-in models' plain layout."""

from forgetbench.eval.tasks.rwku import mmlu_message, probe_message, rwku_prompt
from forgetbench.modeling.templates import PromptTemplate
from forgetbench.records import MCRecord, ProbeRecord


class Chat:
    chat_template = "x"

    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=True):
        return f"<user>{messages[0]['content']}</user><assistant>"


def probe(level: int, kind: str) -> ProbeRecord:
    return ProbeRecord("Who wrote Carrie?", "Stephen King", "Stephen King", level, kind, "forget")


def test_probe_prompts_are_eval_forgets():
    chat = PromptTemplate("chat")
    fb = rwku_prompt(chat, Chat(), *probe_message(probe(1, "fill in the blank")))
    assert fb == ("<user>Please complete the blank in the following question.\nQuestion: Who "
                  "wrote Carrie?\n</user><assistant>Answer:")  # fmt: skip
    # The affirmative suffix ends with the probe's own words, no "Answer:" after the template.
    suffix = rwku_prompt(chat, Chat(), *probe_message(probe(3, "affirmative suffix")))
    assert suffix.endswith("Question: Who wrote Carrie?</user><assistant>")
    icl = rwku_prompt(chat, Chat(), *probe_message(probe(3, "incontext learning")))
    assert icl == ("<user>Please briefly answer the following question.\nWho wrote Carrie?\n"
                   "</user><assistant>Answer:")  # fmt: skip
    # The built-in models have no chat template: the text itself, ending in their QA layout.
    plain = rwku_prompt(PromptTemplate("question_answer"), None, *probe_message(probe(2, "qa")))
    assert (
        plain
        == "Please briefly answer the following question.\nQuestion: Who wrote Carrie?\nAnswer:"
    )


def test_mmlu_prompt_is_eval_mmlus():
    shot = MCRecord("2+2?", ("3", "4"), 1)
    record = MCRecord("1+1?", ("2", "5"), 0, task="high_school_math", shots=(shot,))
    assert mmlu_message(record) == (
        "The following are multiple choice questions (with answers) about high school math.\n\n"
        "Question: 2+2?\nA. 3\nB. 4\nAnswer: B\n\n"
        "Please following the previous examples and answer the given question.\n"
        "Question: 1+1?\nA. 2\nB. 5"
    )
