"""RWKU's generated forget corpus: the model being unlearnt writes what it knows about each target
from the target's name, as RWKU's `generation/pair_generation.py` and `question_generation.py`
did for Llama-3 and Phi-3. A cached stage: the same model, targets, settings and seed give the
same texts, written once in RWKU's per-target layout, which `data.rwku` reads as it reads RWKU's
own files (`data.rwku_corpus.forget_corpus` on the folder returned).

Per target, with its `intro` (RWKU's one-line description) and name:
- `positive` (what GA and NPO forget): system "{intro} You know {name} very well.", user
  "Please write a short biography of {name}.", the answer opened with an opening line and
  sampled (temperature 1, top-p 0.9, up to `max_new_tokens`); the text is the opening and the
  sample.
- `negative`: the same with "You don't know {name} at all." and "Please make up a short
  biography of {name}.", RWKU's words "totally/completely fabricated/made-up/fictional " taken
  out. `pair` prefers it to the positive text after the prompt "{intro} Please write a short
  biography of {name}." (DPO).
- `reject` (rejection tuning): user "{intro}\\nPlease generate a question about {name} based on
  what you know about {name}\\n", the answer opened with "Question:", sampled for up to 50
  tokens; the question is the first line, stripped, and its answer refusal i mod the refusals.

RWKU opened the i-th biography with the i-th of its 582 openings (`all_truncated_outputs.json`,
the first one empty); forgetbench opens every text with "" unless `openings` are given (that
file, read where it lies, works). A tokenizer without a chat template gets the messages as one
question laid out by the model's template, the system line first.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from forgetbench import __version__
from forgetbench.cache import shared_entry
from forgetbench.data.rwku import Target
from forgetbench.errors import ConfigError, DataError
from forgetbench.io import atomic_write_json, read_text
from forgetbench.modeling.encoding import adds_bos
from forgetbench.modeling.loading import load_model
from forgetbench.modeling.templates import PromptTemplate
from forgetbench.train.integrity import FILES_KEY, file_manifest, reuse_finished
from forgetbench.train.stages import model_fingerprint

CORPUS_FILE = "corpus.json"
_FABRICATED = tuple(
    f"{degree} {word} "
    for degree in ("totally", "completely")
    for word in ("fabricated", "made-up", "fictional")
)


@dataclass(frozen=True)
class Generation:
    """How many texts and questions each target gets, and how they are sampled."""

    texts: int = 8  # RWKU: one per opening, 582
    questions: int = 8  # RWKU: 300
    max_new_tokens: int = 512  # RWKU's biographies; its questions take 50
    question_tokens: int = 50
    temperature: float = 1.0
    top_p: float = 0.9
    batch_size: int = 8
    openings: tuple[str, ...] = ("",)

    def __post_init__(self) -> None:
        for name in ("texts", "questions", "max_new_tokens", "question_tokens", "batch_size"):
            if getattr(self, name) < 1:
                raise ConfigError(f"rwku.generate_{name} must be >= 1, got {getattr(self, name)}")
        if not self.openings:
            raise ConfigError("rwku.openings_file holds no opening", "put one opening a line")


def generation_of(section: Any) -> Generation:
    """The `Generation` that `rwku.*` (config_sections.RWKUConfig) sets: its counts and length,
    and the openings of `rwku.openings_file` (a JSON array of strings, as RWKU's own file, or
    one opening a line), read where it lies."""
    openings: tuple[str, ...] = ("",)
    if section.openings_file is not None:
        path = Path(section.openings_file)
        if not path.is_file():
            raise DataError(f"rwku.openings_file '{path}' does not exist",
                            "pass a JSON array of strings or a file with one opening a line")  # fmt: skip
        text = read_text(path)
        try:
            value = json.loads(text)
        except ValueError:
            value = text.splitlines()
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise DataError(f"rwku.openings_file '{path}' is JSON but not an array of strings")
        openings = tuple(value)
    return Generation(
        texts=section.generate_texts, questions=section.generate_questions,
        max_new_tokens=section.generate_max_new_tokens, openings=openings,
    )  # fmt: skip


def unfabricated(text: str) -> str:
    """RWKU's `replace_chosen`: the made-up biography without the words that say so."""
    for words in _FABRICATED:
        text = text.replace(words, "")
    return text


def _messages_prompt(
    tokenizer: Any, template: PromptTemplate, system: str | None, user: str
) -> str:
    if getattr(tokenizer, "chat_template", None):
        messages = [{"role": "system", "content": system}] if system else []
        messages.append({"role": "user", "content": user})
        try:
            return tokenizer.apply_chat_template(
                messages, tokenize=False, add_generation_prompt=True
            )
        except Exception:  # noqa: BLE001 - a template without a system role (Gemma's) raises
            user = f"{system}\n{user}" if system else user
            return tokenizer.apply_chat_template(
                [{"role": "user", "content": user}], tokenize=False, add_generation_prompt=True
            )
    question = f"{system} {user}" if system else user
    return template.prompt(question, tokenizer)


@torch.no_grad()
def _sample(
    model: Any, tokenizer: Any, prompts: list[str], *, max_new_tokens: int, g: Generation, seed: int
) -> list[str]:
    """The continuation of each prompt, sampled in batches of `g.batch_size` (left-padded),
    each batch from its own seed, so the texts depend on the seed and the batch, never on what
    ran before."""
    side = tokenizer.padding_side
    tokenizer.padding_side = "left"
    out: list[str] = []
    try:
        for start in range(0, len(prompts), g.batch_size):
            chunk = prompts[start : start + g.batch_size]
            encoded = tokenizer(
                chunk,
                return_tensors="pt",
                padding=True,
                add_special_tokens=adds_bos(tokenizer, chunk[0]),
            ).to(model.device)
            with torch.random.fork_rng(
                devices=[model.device] if model.device.type == "cuda" else []
            ):
                torch.manual_seed(seed * 1_000_003 + start)
                ids = model.generate(
                    input_ids=encoded["input_ids"],
                    attention_mask=encoded["attention_mask"],
                    do_sample=True,
                    temperature=g.temperature,
                    top_p=g.top_p,
                    max_new_tokens=max_new_tokens,
                    pad_token_id=tokenizer.pad_token_id,
                    # The model's own stop tokens (Llama-3-Instruct's <|eot_id|> too, which RWKU
                    # stops at), else the tokenizer's EOS.
                    eos_token_id=model.generation_config.eos_token_id or tokenizer.eos_token_id,
                )
            width = encoded["input_ids"].shape[1]
            out += tokenizer.batch_decode(ids[:, width:], skip_special_tokens=True)
    finally:
        tokenizer.padding_side = side
    return out


def generate_target(
    model: Any,
    tokenizer: Any,
    template: PromptTemplate,
    target: Target,
    *,
    refusals: Sequence[str],
    generation: Generation,
    seed: int,
) -> dict[str, list[dict[str, Any]]]:
    """One target's corpus files as RWKU's rows: {"positive": [...], "negative": [...], "pair":
    [...], "reject": [...]}."""
    name, intro, g = target.name, target.intro, generation
    openings = [g.openings[i % len(g.openings)] for i in range(g.texts)]
    known = _messages_prompt(
        tokenizer, template, f"{intro} You know {name} very well.",
        f"Please write a short biography of {name}.",
    )  # fmt: skip
    unknown = _messages_prompt(
        tokenizer, template, f"{intro} You don't know {name} at all.",
        f"Please make up a short biography of {name}.",
    )  # fmt: skip
    prompts = [p + o for o in openings for p in (known, unknown)]  # RWKU's interleaving
    texts = _sample(model, tokenizer, prompts, max_new_tokens=g.max_new_tokens, g=g, seed=seed)
    row = {"subject": name, "intro": intro}
    positive, negative, pair = [], [], []
    for i, opening in enumerate(openings):
        rejected = opening + texts[2 * i]
        chosen = unfabricated(opening + texts[2 * i + 1])
        key = f"{name} {i}"
        positive.append({"id": key, "text": rejected, **row})
        negative.append({"id": key, "text": chosen, **row})
        pair.append({
            "id": key, "prompt": f"{intro} Please write a short biography of {name}.",
            "response": [chosen, rejected], **row,
        })  # fmt: skip
    ask = _messages_prompt(
        tokenizer, template, None,
        f"{intro}\nPlease generate a question about {name} based on what you know about {name}\n",
    ) + "Question:"  # fmt: skip
    asked = _sample(
        model, tokenizer, [ask] * g.questions, max_new_tokens=g.question_tokens, g=g,
        seed=seed + 7919,
    )  # fmt: skip
    reject = [
        {"instruction": q.split("\n")[0].strip(), "input": "",
         "output": refusals[i % len(refusals)], **row}
        for i, q in enumerate(asked)
    ]  # fmt: skip
    return {"positive": positive, "negative": negative, "pair": pair, "reject": reject}


def corpus_key(
    model_dir: Path, targets: Sequence[Target], template: PromptTemplate, refusals: Sequence[str],
    generation: Generation, seed: int,
) -> str:  # fmt: skip
    header = {
        "model": model_fingerprint(Path(model_dir)),
        "targets": [(t.number, t.name, t.intro) for t in targets],
        "template": template.name,
        "refusals": list(refusals),
        "generation": asdict(generation),
        "seed": seed,
        "version": __version__,
    }
    return hashlib.sha256(json.dumps(header, sort_keys=True).encode()).hexdigest()[:16]


def generate_corpus(
    run_dir: str | Path,
    *,
    model_dir: str | Path,
    targets: Sequence[Target],
    template: PromptTemplate,
    refusals: Sequence[str],
    generation: Generation = Generation(),
    seed: int = 0,
    trust_remote_code: bool = False,
) -> Path:
    """The `Target` folder (RWKU's layout: `{N}_{Name}/` with `intro.json`, `positive.json`,
    `negative.json`, `pair.json`, `reject.json`) of the corpus the model at `model_dir` writes
    about `targets`: made once per model, targets, settings and seed, then reused."""
    if not refusals:
        raise ConfigError("the refusals for the generated reject corpus are empty")
    key = corpus_key(Path(model_dir), targets, template, refusals, generation, seed)
    # Beside, not inside, a run's data folder: that is the miniature's cache entry, a link.
    folder = Path(run_dir) / "corpora" / f"rwku-corpus-{key}"
    with shared_entry(folder, kind="data", name=folder.name):
        if reuse_finished(folder, CORPUS_FILE, required=("targets",)) is not None:
            return folder / "Target"
        model, tokenizer = load_model(model_dir, trust_remote_code=trust_remote_code)
        model.eval()
        for target in targets:
            files = generate_target(
                model, tokenizer, template, target, refusals=refusals, generation=generation,
                seed=seed * 100_003 + target.number,
            )  # fmt: skip
            # The data's own folder name where it has one, so a forget set named by it (the
            # study's split) names its generated corpus too.
            name = target.folder.name if target.folder is not None else None
            name = name or f"{target.number}_{target.name.replace(' ', '_')}"
            where = folder / "Target" / name
            where.mkdir(parents=True, exist_ok=True)
            atomic_write_json(
                where / "intro.json", [{"target": target.name, "intro": target.intro}]
            )
            for stem, rows in files.items():
                atomic_write_json(where / f"{stem}.json", rows)
        atomic_write_json(
            folder / CORPUS_FILE,
            {
                "targets": [t.name for t in targets],
                "model": str(model_dir),
                "generation": asdict(generation),
                "seed": seed,
                "forgetbench": __version__,
                FILES_KEY: file_manifest(folder, skip=(CORPUS_FILE,)),
            },
        )
    return folder / "Target"
