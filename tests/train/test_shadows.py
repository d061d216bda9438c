"""Shadow models train on exactly their seeded half of the candidates, with the retain recipe."""

from forgetbench.benchmarks.mini import generate_mini
from forgetbench.data.tofu import load_tofu
from forgetbench.study.pool import InlinePool
from forgetbench.study.resolve import Miniature
from forgetbench.train import mini as mini_module
from forgetbench.train.mini import TEMPLATE, build_tokenizer, shadow_memberships
from forgetbench.train.stages import StageResult, encode_qa


def test_shadows_train_on_exactly_their_seeded_halves(tmp_path, monkeypatch):
    data = tmp_path / "data"
    generate_mini(data, scale="tiny", seed=0)
    tokenizer_dir = build_tokenizer(tmp_path, data, scale="tiny")
    trained = {}

    def toy_stage(run_dir, *, name, parent, examples, config, lora=None, progress=True, **_):
        # The stage records what it would train on instead of training.
        folder = tmp_path / f"{name}-{len(trained)}"
        trained[folder] = (name, [e.input_ids for e in examples], config.seed)
        return StageResult(name, folder, False, [], 0.0)

    monkeypatch.setattr(mini_module, "run_stage", toy_stage)
    mini = Miniature(tmp_path, "tiny", seed=0, progress=False)
    # The base model is only read for its tokenizer here.
    mini.__dict__["base"] = StageResult("pretrain", tokenizer_dir, True, [], 0.0)
    stages = mini.shadow_stages("forget10", 4)
    results = mini.models(stages, InlinePool())

    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    tofu = data / "tofu"
    candidates = [*load_tofu(tofu, "forget10"), *load_tofu(tofu, "holdout10")]
    retain = load_tofu(tofu, "retain90")
    masks = shadow_memberships(len(candidates), 4, seed=0, split="forget10")

    def ids(records):
        return [e.input_ids for e in encode_qa(records, tokenizer, TEMPLATE, max_length=10_000)]

    candidate_ids = ids(candidates)
    for i, mask in enumerate(masks):
        name, examples, seed = trained[results[f"shadow_forget10_{i}"].model_dir]
        assert name == "shadow-forget10" and seed == 0
        members = [r for r, inside in zip(candidates, mask, strict=True) if inside]
        # The retain split, then exactly the shadow's half, in candidate order ...
        assert examples[: len(retain) + len(members)] == ids(retain) + ids(members)
        # ... and no other candidate anywhere (the rehearsal pairs are background facts).
        leaked = [c for c, inside in zip(candidate_ids, mask, strict=True) if not inside]
        assert not any(e in leaked for e in examples)
        # The record the study writes from the stage's options is the same half.
        assert [r.question for r in stages[f"shadow_forget10_{i}"][1]["extra"]] == [
            r.question for r in members
        ]
    # Each shadow holds half of the 40 candidates, each candidate is in 2 of the 4 shadows.
    assert [sum(mask) for mask in masks] == [20] * 4
    assert [sum(mask[j] for mask in masks) for j in range(40)] == [2] * 40
