"""Which forget splits a study can compute once: those whose files are byte for byte the same."""

from forgetbench.benchmarks.mini import generate_mini
from forgetbench.study.splits import same_data_splits

SPLITS = ["forget01", "forget05", "forget10"]


def test_the_tiny_splits_are_one_and_forget10_is_computed(tmp_path):
    generate_mini(tmp_path, scale="tiny", seed=0)
    # Ten authors: 1, 5 and 10 % are all the last author's twenty questions.
    assert same_data_splits(tmp_path / "tofu", SPLITS) == {
        "forget01": "forget10", "forget05": "forget10"
    }  # fmt: skip
    assert same_data_splits(tmp_path / "tofu", ["forget01", "forget05"]) == {
        "forget01": "forget05"
    }  # fmt: skip
    assert same_data_splits(tmp_path / "tofu", ["forget10"]) == {}


def test_a_byte_apart_is_another_split(tmp_path):
    generate_mini(tmp_path, scale="tiny", seed=0)
    perturbed = tmp_path / "tofu" / "forget05_perturbed.json"
    perturbed.write_text(perturbed.read_text() + "\n")
    assert same_data_splits(tmp_path / "tofu", SPLITS) == {"forget01": "forget10"}


def test_the_small_splits_differ(tmp_path):
    generate_mini(tmp_path, scale="small", seed=0)
    assert same_data_splits(tmp_path / "tofu", SPLITS) == {}
