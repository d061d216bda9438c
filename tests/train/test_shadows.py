"""Shadow models train on exactly their seeded half of the candidates, with the retain recipe."""

from forgetbench.benchmarks.mini import generate_mini
from forgetbench.data.tofu import load_tofu
from forgetbench.study.miniature import Miniature
from forgetbench.study.pool import InlinePool
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


def _questions(tofu, split):
    return {r.question for r in load_tofu(tofu, split)}


def test_nested_splits_share_the_largest_splits_shadows(tmp_path):
    from forgetbench.study.shadows import shadow_pool

    data = tmp_path / "small"
    generate_mini(data, scale="small", seed=0)
    tofu = data / "tofu"
    # The miniature's splits nest as TOFU's do, so forget10's shadows serve all three ...
    assert (
        _questions(tofu, "forget01") < _questions(tofu, "forget05") < _questions(tofu, "forget10")
    )
    assert _questions(tofu, "holdout01") < _questions(tofu, "holdout10")
    assert _questions(tofu, "retain90") < _questions(tofu, "retain99")
    assert [shadow_pool(tofu, s) for s in ("forget01", "forget05", "forget10")] == ["forget10"] * 3


def test_a_split_outside_the_larger_pool_keeps_its_own_shadows(tmp_path):
    import json

    from forgetbench.study.shadows import shadow_pool

    data = tmp_path / "small"
    generate_mini(data, scale="small", seed=0)
    tofu = data / "tofu"
    # A holdout01 question forget10's pool lacks: forget01 can no longer read forget10's shadows,
    # and forget05 (whose pool still nests in forget10's) is not affected.
    path = tofu / "holdout01.json"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    rows[0]["question"] = "A question no other split holds?"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    assert shadow_pool(tofu, "forget01") == "forget01"
    assert shadow_pool(tofu, "forget05") == "forget10"
    # Without a larger split at all, a split is its own pool.
    for name in ("forget10", "holdout10", "retain90", "forget05", "holdout05", "retain95"):
        (tofu / f"{name}.json").unlink()
    assert shadow_pool(tofu, "forget01") == "forget01"


def test_a_study_of_nested_splits_trains_one_set_of_shadows(tmp_path, monkeypatch):
    import json

    from forgetbench.config import RunConfig
    from forgetbench.study import resolved as resolve_module

    data = tmp_path / "data"
    generate_mini(data, scale="tiny", seed=0)
    tokenizer_dir = build_tokenizer(tmp_path, data, scale="tiny")
    trained = []

    def toy_stage(run_dir, *, name, parent, examples, config, lora=None, progress=True, **_):
        folder = tmp_path / f"{name}-{len(trained)}"
        trained.append(name)
        return StageResult(name, folder, False, [], 0.0)

    monkeypatch.setattr(mini_module, "run_stage", toy_stage)
    mini = Miniature(tmp_path, "tiny", seed=0, progress=False)
    mini.__dict__["base"] = StageResult("pretrain", tokenizer_dir, True, [], 0.0)
    monkeypatch.setattr(resolve_module, "miniature", lambda *a, **k: mini)
    config = RunConfig.model_validate({"scale": "tiny", "eval": {"mia_shadows": 2}})
    splits = ["forget01", "forget05", "forget10"]
    study, _ = resolve_module.resolve(config, tmp_path, progress=False, forget_splits=splits)
    # Two shadow trainings for three splits (not six), each split's files pointing at them.
    assert sorted(trained).count("shadow-forget10") == 2 and len(trained) == 2 + 1 + 3
    files = {s: [json.loads(p.read_text()) for p in study.shadows[s]] for s in splits}
    for split in splits:
        assert [f["model"] for f in files[split]] == [f["model"] for f in files["forget10"]]
        assert {f["pool"] for f in files[split]} == {"forget10"}
        candidates = _questions(data / "tofu", split) | _questions(
            data / "tofu", split.replace("forget", "holdout")
        )
        # Complementary halves of the split's own candidates.
        first, second = (set(f["members"]) for f in files[split])
        assert first | second == candidates and not first & second
