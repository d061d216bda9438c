"""The probes task finds the probe files beside TOFU's and is left out where there are none."""

import shutil

from forgetbench.benchmarks.mini import generate_mini
from forgetbench.config_sections import EvalConfig
from forgetbench.data.tofu import PROBE_KINDS
from forgetbench.eval.tasks.probes import probes_task
from forgetbench.eval.tasks.task import EvalSetup


def _setup(root, **options):
    return EvalSetup(
        root=root, tofu=root / "tofu", split="forget10", benchmark="mini",
        eval_config=EvalConfig(**options), template=None, tokenizer=None, max_length=256,
    )  # fmt: skip


def test_the_probe_files_of_the_split_are_one_subset_and_each_question_keeps_its_kind(tmp_path):
    generate_mini(tmp_path / "mini", scale="tiny", seed=0)
    task = probes_task(_setup(tmp_path / "mini"))
    (docs,) = task.subsets.values()
    kinds = [task.kinds[d.split] for d in docs]
    # tiny forget10: one author, 3 paraphrased, 2 reversed, 3 two-hop, 1 shared question
    assert kinds == ["paraphrase"] * 3 + ["reverse"] * 2 + ["two_hop"] * 3 + ["shared"]
    assert probes_task(_setup(tmp_path / "mini", probes=False)) is None
    assert len(probes_task(_setup(tmp_path / "mini", max_questions=1)).subsets["probes"]) == 4
    # A TOFU folder without probe files (the user's own data) has no probes task.
    bare = tmp_path / "bare"
    shutil.copytree(tmp_path / "mini" / "tofu", bare / "tofu")
    for kind in PROBE_KINDS:
        for path in (bare / "tofu").glob(f"*_{kind}_perturbed.json"):
            path.unlink()
    assert probes_task(_setup(bare)) is None
