"""RWKU's description (Jin et al., 2024) for the document study: one forget set per target (the
targets `rwku.targets` names), each method's own corpus where RWKU gives one, and the reference
model pretrained without the targets."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

from forgetbench.benchmarks.description import (
    CORPUS_BENCHMARKS,
    CorpusBenchmark,
    Gap,
    MethodForget,
    Pretrained,
    Texts,
)
from forgetbench.benchmarks.mini.generate import RELEASED_FOLDERS
from forgetbench.benchmarks.mini.rwku_layout import KNOWLEDGE
from forgetbench.data.rwku import load_rwku, load_targets, require_rwku, rwku_digest
from forgetbench.data.rwku_corpus import (
    BATCH_PREFIX,
    CORPUS_MODELS,
    TARGET_SEP,
    batch_split,
    corpus_refusals,
    forget_corpus,
    method_corpus,
    require_corpus,
    select_targets,
    split_targets,
)
from forgetbench.io import read_json_records


def _rwku_stem(stem: str, folder: Path, target: str) -> list[str]:
    return [r.text for r in load_rwku(folder, target, stem)]


def _rwku_sets(folder: Path) -> dict[str, Texts]:
    """One forget set per target, named by its folder: the target's forget corpus
    (`positive.json`, the texts RWKU's GA and NPO forget)."""
    return {
        t.folder.name: partial(_rwku_stem, "positive", target=t.folder.name)
        for t in load_targets(folder)
        if t.folder is not None
    }


def _rwku_batch(folder: Path, split: str, stem: str = "positive") -> list[str]:
    return [r.text for t in split_targets(folder, split) for r in load_rwku(folder, t.name, stem)]


def _rwku_chosen(folder: Path, config: Any) -> dict[str, Texts]:
    """The forget sets of the targets rwku.targets names, in the order named (every target when
    unset): single-target unlearning, one run per target, each on the positive texts of the
    model rwku.corpus_model names (`positive_phi.json`: Phi-3's; a target without them is
    refused here, before any work), or on those the original model writes (rwku.corpus
    generated: `positive.json` of that folder); with rwku.batch one forget set of them all
    (`batch_split`), their forget corpora one after the other."""
    targets = select_targets(folder, config.rwku.targets)
    stem = "positive"
    if config.rwku.corpus == "given":
        require_corpus(targets, config.rwku.corpus_model)
        stem += CORPUS_MODELS[config.rwku.corpus_model]
    if config.rwku.batch:
        split = batch_split(targets)
        return {split: partial(_rwku_batch, split=split, stem=stem)}
    return {t.folder.name: partial(_rwku_stem, stem, target=t.folder.name) for t in targets}  # type: ignore[union-attr]


def _rwku_batch_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A batch run's rows (split `batch_...`, scored on every target: `RwkuBatchTask`) as one row
    per target, split the target's folder, then the batch's own row of the means over its
    targets; each marked with the batch it belongs to (`rwku_batch`). Other rows as they are."""
    means: list[dict[str, Any]] = []
    per_target: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        if not str(row["split"]).startswith(BATCH_PREFIX):
            means.append(row)
            continue
        own = dict.fromkeys(  # in the row's order, so every target's row keeps the key order
            k for k in row if TARGET_SEP in k and k.partition(TARGET_SEP)[2].startswith("rwku/")
        )
        common = {k: v for k, v in row.items() if k not in own and not k.startswith("rwku/")}
        for key in own:
            target, _, score = key.partition(TARGET_SEP)
            found = per_target.setdefault(target, [])
            if not found or found[-1]["_of"] is not row:
                found.append({**common, "split": target, "rwku_batch": row["split"], "_of": row})
            found[-1][score] = row[key]
        means.append({**{k: v for k, v in row.items() if k not in own}, "rwku_batch": row["split"]})
    expanded = [
        {k: v for k, v in r.items() if k != "_of"} for rs in per_target.values() for r in rs
    ]
    return means + expanded


def _rwku_eval_sets(folder: Path, config: Any) -> list[str]:
    """The targets rwku.targets names, by folder: what `forgetbench eval` scores, one by one
    (an evaluation reads no forget corpus, so none is asked of the folder)."""
    return [t.folder.name for t in select_targets(folder, config.rwku.targets)]  # type: ignore[union-attr]


def _rwku_method_forget(
    folder: Path, split: str, inputs: frozenset[str], config: Any
) -> MethodForget | None:
    """The corpus RWKU's scripts give a method reading `inputs` (`method_corpus`): a method
    that prefers an answer to the forget text (dpo) trains on the target's `pair.json`, one that
    trains toward a refusal alone (idk with retain_weight 0: rejection tuning) on `reject.json`
    with its refusals (`pair_phi.json`, `reject_phi.json` with rwku.corpus_model=phi3); None for
    every other, which forgets the positive texts as text."""
    corpus = method_corpus(inputs)
    if corpus == "positive":
        return None
    # The corpus the original model wrote is in plain names (`positive.json`), whoever's the
    # given files are.
    model = config.rwku.corpus_model if config.rwku.corpus == "given" else "llama3"
    records = forget_corpus(folder, split_targets(folder, split), corpus, model=model)
    return records, corpus_refusals(records) if corpus == "reject" else ()


def _rwku_retain(folder: Path) -> list[str]:
    """Unlearning's retain set: the miniature's rows of the people nothing asks about
    (`pretraining.jsonl`'s role "retain"); RWKU's own folder has no retain corpus (its GA and NPO
    read none), so there every target's retain-member passages (`retain_mia.json`) serve, and
    MIA on RM is then of text the methods that keep a retain set trained on."""
    rows = _rwku_rows(folder)
    if rows:
        return [row["text"] for row in rows if row.get("role") == "retain"]
    texts = (
        r
        for t in load_targets(folder)
        for r in _rwku_stem("retain_mia", folder, t.folder.name)  # type: ignore[union-attr]
    )
    return list(dict.fromkeys(texts))


def _rwku_corpus_to_write(config: Any, study: Any) -> dict[str, Any] | None:
    """With rwku.corpus generated, the corpora the model being unlearnt (the study's original
    model) writes about the targets rwku.targets names, from their names and intros (a stage
    cached by the model, targets, template, refusals, generation settings and seed); None with
    the given corpus."""
    if config.rwku.corpus != "generated":
        return None
    from forgetbench.methods.refusals import load_refusals

    return {
        "targets": select_targets(study.data, config.rwku.targets),
        "template": study.template,
        "refusals": load_refusals(config.unlearn.refusals_file),
        "generation": config.rwku,
        "seed": config.seed,
        "trust_remote_code": config.model.trust_remote_code,
    }


def _rwku_unknown(folder: Path) -> list[str]:
    return [t.name for t in load_targets(folder)]


def _rwku_rows(folder: Path) -> list[dict[str, Any]]:
    """The miniature's `pretraining.jsonl` beside the target folders (the pretraining rows of
    the people its folders ask about and of its retain people), or nothing for a folder without
    one (RWKU's own)."""
    root = Path(folder) / "Target" if (Path(folder) / "Target").is_dir() else Path(folder)
    file = root / KNOWLEDGE
    return read_json_records(file) if file.is_file() else []


def _rwku_knowledge(folder: Path) -> list[str]:
    return [row["text"] for row in _rwku_rows(folder)]


def _rwku_known_to_reference(folder: Path) -> list[str]:
    names = _rwku_unknown(folder)
    return [t for t in _rwku_knowledge(folder) if not any(name in t for name in names)]


@CORPUS_BENCHMARKS.register("rwku")
def rwku() -> CorpusBenchmark:
    """RWKU (Jin et al., 2024). Only the target and the original model are given: the model
    learnt the target in pretraining, and each target is unlearnt alone (single-target, one
    forget set per target) from the original model, on the target's forget corpus
    (`positive.json`, each text a sample up to RWKU's cutoff_len of 512 tokens). The reference
    that never saw the target is the base pretrained without the targets' documents."""
    return CorpusBenchmark(
        name="rwku",
        title="RWKU",
        miniature_folder=RELEASED_FOLDERS["rwku"],
        require=require_rwku,
        digest=rwku_digest,
        # The miniature's knowledge stage: the base pretrained further on the rows of the people
        # its folders ask about (the reference: on those not naming a target); RWKU's own folder
        # has none, and the original model is the base itself (`pretrained`).
        finetune_texts=_rwku_knowledge,
        retain_model_texts=_rwku_known_to_reference,
        forget_sets={},
        retain_texts=_rwku_retain,
        chunk_tokens=512,
        chunk_mode="truncate",
        eval_layout="rwku",
        relative=None,
        # 0.1 (ROUGE-L recall): the reference answers a few probes by chance (common words of a
        # date or a city), so a gap of noise does not pass; the gate says when the original
        # model never knew the target.
        gaps=(
            Gap(
                "rwku/forget_qa",
                0.1,
                "forget QA (ROUGE-L recall)",
                "the original model never knew the target: unlearn targets it answers "
                "questions about, or a model that knows them",
            ),
        ),  # fmt: skip
        unlearn_preset="rwku",
        pretrained=Pretrained(_rwku_unknown),
        forget_sets_of=_rwku_sets,
        choose=_rwku_chosen,
        options=(
            "rwku.targets",
            "rwku.batch",
            "rwku.corpus",
            "rwku.corpus_model",
            "rwku.generate_texts",
            "rwku.generate_questions",
            "rwku.generate_max_new_tokens",
            "rwku.openings_file",
        ),  # fmt: skip
        eval_options=("rwku_utility",),
        eval_sets=_rwku_eval_sets,
        eval_choose=("rwku.targets",),
        method_forget=_rwku_method_forget,
        instructs=True,
        corpus_to_write=_rwku_corpus_to_write,
        split_rows=_rwku_batch_rows,
    )
