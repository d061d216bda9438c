"""Row-time membership attacks from per-item MIA logs (the reference attack, LiRA, RMIA), and the
shadow-model files a study reads them with."""

import json
import re
from pathlib import Path

import numpy as np
import pytest

from forgetbench.errors import DataError
from forgetbench.eval.tasks.mia import relative_membership
from forgetbench.train.mini import shadow_memberships


def _log(member, loss):
    return [{"member": m, "loss": v} for m, v in zip(member, loss, strict=True)]


def test_reference_attack_on_hand_made_logs():
    member = [True, True, False, False]
    # The target alone (LOSS): members -0.5, -1.0 against non-members -1.2, -0.9; of the four
    # pairs, -1.0 < -0.9 loses: AUC 3/4.
    target = _log(member, [-0.5, -1.0, -1.2, -0.9])
    # The retain model finds the second member hard and the last non-member easy; differences
    # 1.0, 0.1 | -0.2, -0.5: every member above every non-member, AUC 1.
    retain = _log(member, [-1.5, -1.1, -1.0, -0.4])
    out = relative_membership(target, reference_items=retain)
    assert out["mia/reference"] == 1.0
    # 2 non-members: neither low FPR is resolvable.
    assert out["mia/reference/tpr@1%fpr"] is None
    assert out["mia/reference/tpr@0.1%fpr"] is None
    assert "mia/lira" not in out
    # Against itself (the retain model's own row) every difference is 0: AUC 0.5.
    assert relative_membership(retain, reference_items=retain)["mia/reference"] == 0.5


def test_reference_attack_refuses_logs_of_other_items():
    target = _log([True, False], [-0.5, -1.0])
    with pytest.raises(DataError, match="other items"):
        relative_membership(target, reference_items=_log([True, False, False], [0, 0, 0]))


def test_shadow_attacks_from_logs_with_enough_nonmembers():
    # 150 members, 150 non-members; each shadow adds 1.0 to the candidates it trained on and
    # the target to the members: both attacks separate them fully, and TPR@1% FPR is measured
    # (150 >= 100 non-members) while TPR@0.1% is not (< 1000).
    rng = np.random.default_rng(0)
    n = 300
    member = np.arange(n) < 150
    base = rng.normal(-2, 0.5, size=n)
    masks = shadow_memberships(n, 4, seed=0, split="forget10")
    shadows = [_log(member, base + 1.0 * np.array(mask)) for mask in masks]
    target = _log(member, base + 1.0 * member)
    out = relative_membership(target, shadow_items=shadows, shadow_members=masks, gamma=1.0)
    for attack in ("lira", "rmia"):
        assert out[f"mia/{attack}"] == 1.0
        assert out[f"mia/{attack}/tpr@1%fpr"] == 1.0
        assert out[f"mia/{attack}/tpr@0.1%fpr"] is None
    with pytest.raises(ValueError, match="at least 2"):
        relative_membership(target, shadow_items=shadows[:1], shadow_members=masks[:1])


def test_shadow_memberships_are_balanced_and_seeded():
    masks = shadow_memberships(40, 4, seed=3, split="forget01")
    # Pairs of complementary halves: every shadow has 20 candidates, every candidate is in
    # exactly 2 of 4 shadows; the draw is the same for the same seed.
    assert [sum(m) for m in masks] == [20] * 4
    assert [a != b for a, b in zip(masks[0], masks[1], strict=True)] == [True] * 40
    assert [sum(m[j] for m in masks) for j in range(40)] == [2] * 40
    # An odd count: the last shadow draws its own half; every candidate still has IN and OUT.
    odd = shadow_memberships(41, 3, seed=3, split="forget01")
    assert [sum(m) for m in odd] == [20, 21, 20]
    assert all(0 < sum(m[j] for m in odd) < 3 for j in range(41))
    assert masks == shadow_memberships(40, 4, seed=3, split="forget01")
    assert masks != shadow_memberships(40, 4, seed=4, split="forget01")
    with pytest.raises(ValueError, match="at least 2"):
        shadow_memberships(40, 1, seed=0, split="forget01")


def test_shadow_files_give_masks_in_candidate_order(tmp_path):
    from forgetbench.benchmarks.mini import generate_mini
    from forgetbench.study.inputs import Study
    from forgetbench.study.shadows import shadow_candidates, shadow_masks, write_shadow

    data = tmp_path / "data"
    generate_mini(data, scale="tiny", seed=0)
    candidates = [r.question for r in shadow_candidates(data / "tofu", "forget10")]
    # The tiny world: 1 forget author and 1 holdout author, 20 questions each.
    assert len(candidates) == 40
    files = [
        write_shadow(tmp_path / "s0.json", tmp_path / "m0", candidates[:20]),
        write_shadow(tmp_path / "s1.json", tmp_path / "m1", candidates[20:], seed=0),
    ]
    study = Study(data, tmp_path, None, {}, None, 64, None, "mini", {"forget10": files})
    (model0, mask0), (model1, mask1) = shadow_masks(study, "forget10")
    assert model0 == tmp_path / "m0" and mask0 == [True] * 20 + [False] * 20
    assert model1 == tmp_path / "m1" and mask1 == [False] * 20 + [True] * 20
    # Candidates 15-19 in both shadows have no OUT shadow: refused, naming the first.
    files[1].write_text(json.dumps({"model": "m1", "members": candidates[15:]}))
    with pytest.raises(
        DataError, match=re.escape(f"every shadow model of forget10 trained on {candidates[15]!r}")
    ):
        shadow_masks(study, "forget10")
    files[1].write_text(json.dumps({"model": "m1", "members": ["Who wrote this?"]}))
    with pytest.raises(DataError, match="not forget10 or holdout questions"):
        shadow_masks(study, "forget10")
    files[1].write_text(json.dumps({"model": "m1"}))
    with pytest.raises(DataError, match="members"):
        shadow_masks(study, "forget10")


def test_a_model_study_takes_its_shadows_from_study_mia_shadow_models(tmp_path):
    from forgetbench.config import load_config
    from forgetbench.errors import ConfigError
    from forgetbench.modeling.builtin import build_tiny_model
    from forgetbench.study.resolved import resolve
    from toy import toy_tokenizer

    model = tmp_path / "model"
    build_tiny_model(toy_tokenizer(), seed=0).save_pretrained(model)
    toy_tokenizer().save_pretrained(model)
    given = {"forget10": ["s0.json", "s1.json"]}
    builtin = load_config(values={"study.mia_shadow_models": ("study.mia_shadow_models", given)})
    yours = {"model.name": ("--model", str(model)), "benchmark.path": ("--data", str(tmp_path))}
    config = load_config(values={"study.mia_shadow_models": ("x", given), **yours})
    study, _ = resolve(config, tmp_path, progress=False, forget_splits=["forget10", "forget05"])
    assert study.shadows == {"forget10": [Path("s0.json"), Path("s1.json")]}
    wrong = load_config(
        values={"study.mia_shadow_models": ("x", {"forget11": ["s0.json"]}), **yours}
    )
    with pytest.raises(ConfigError, match="forget11.*did you mean 'forget10'"):
        resolve(wrong, tmp_path, progress=False)
    # The built-in miniature trains its own shadows: given ones are refused, before any work.
    with pytest.raises(ConfigError, match="study.mia_shadow_models"):
        resolve(builtin, tmp_path, progress=False)
    # One shadow is refused with the config, before any command runs (tests/test_config.py).
    with pytest.raises(ConfigError, match="eval.mia_shadows=1"):
        load_config(values={"eval.mia_shadows": ("eval.mia_shadows", 1)})


def test_shadow_options_stay_out_of_evaluation_keys_and_a_task_subset_goes_in(tmp_path):
    from forgetbench.config_sections import EvalConfig
    from forgetbench.eval.runner import evaluation_key

    def key(options, tasks=None):
        return evaluation_key(tmp_path / "m", tmp_path / "d", "forget10", options, "mini", tasks)

    # How many shadows and RMIA's gamma change rows, not any one model's evaluation.
    assert key(EvalConfig(mia_shadows=8, mia_rmia_gamma=2.0)) == key(EvalConfig())
    # A shadow's MIA-only evaluation is not the full one of the same model.
    assert key(EvalConfig(), ("mia",)) != key(EvalConfig())
