"""The MUSE- and WMDP-shaped miniatures: written in the released layouts (the loaders read them
with exact counts), deterministic, and leaving every file `generate_mini` writes as it was."""

import hashlib
import json

import pytest

from forgetbench.benchmarks.mini.generate import build_files, render
from forgetbench.benchmarks.mini.released import PEOPLE, write_released
from forgetbench.benchmarks.mini.scales import get_scale
from forgetbench.benchmarks.mini.world import build_world
from forgetbench.data.muse import load_knowmem, load_verbmem, require_muse
from forgetbench.data.tofu import PROBE_KINDS
from forgetbench.data.wmdp import load_mmlu, load_wmdp, require_wmdp
from forgetbench.errors import DataError

# sha256 over every (path, text) of build_files(scale="tiny", seed=0), measured before the
# released-layout miniatures existed: they must not move any file of the TOFU-shaped one.
TINY_FILES_SHA256 = "feea0b8c6b4a09e8da3505b6a3ea3d57ad9a891f024cd6e4192bf5b3df770407"


def _tiny_files_sha256() -> str:
    """Of every file but the generalisation probes, which came later without moving any other
    (tests/benchmarks/test_mini_probes.py)."""
    digest = hashlib.sha256()
    for path, rows in sorted(build_files(scale="tiny", seed=0).items()):
        if path.endswith(tuple(f"_{kind}_perturbed.json" for kind in PROBE_KINDS)):
            continue
        digest.update(path.encode())
        digest.update(render(rows).encode())
    return digest.hexdigest()


def test_muse_miniature_is_a_muse_folder_with_exact_counts(tmp_path):
    counts = write_released(tmp_path / "news", "muse", scale="tiny", seed=0)
    n = PEOPLE["tiny"]
    rows = {r["file"]: r["items"] for r in require_muse(tmp_path / "news")}
    assert len(rows) == 4 + 1 + 3 + 4 + 8 + 4 + 8  # every file of the News layout, .txt included
    assert rows["verbmem/forget.json"] == n and rows["privleak/holdout.json"] == n
    assert rows["knowmem/forget_qa.json"] == 2 * n and rows["knowmem/retain_qa_icl.json"] == 3
    assert [rows[f"scal/forget_{k}.json"] for k in range(1, 5)] == [n, 2 * n, 3 * n, 4 * n]
    assert [rows[f"sust/forget_{k}.json"] for k in range(1, 5)] == [n, n, n, n]
    assert counts["raw/retain2.json"] == n
    # verbmem continues each forget article where its prompt stops; knowmem asks its facts.
    raw = json.loads((tmp_path / "news" / "raw" / "forget.json").read_text())
    assert [f"{r.prefix} {r.completion}" for r in load_verbmem(tmp_path / "news")] == raw
    (first, *_) = load_knowmem(tmp_path / "news", "forget_qa")
    assert first.answer in raw[0]
    # As in News: forget_1 of both series is the forget set; sust's folds are disjoint, about
    # people of their own, and scal's forget_k is the first k of them; no fold is trained on.
    folds = [
        json.loads((tmp_path / "news" / f"sust/forget_{k}.json").read_text()) for k in range(1, 5)
    ]
    scal = [
        json.loads((tmp_path / "news" / f"scal/forget_{k}.json").read_text()) for k in range(1, 5)
    ]
    assert folds[0] == scal[0] == raw
    assert all(scal[k - 1] == sum(folds[:k], []) for k in range(1, 5))
    names = [{text.split(" in the news.")[0] for text in fold} for fold in folds]
    assert all(len(a | b) == 2 * n for i, a in enumerate(names) for b in names[i + 1 :])
    trained = {
        text
        for split in ("forget", "retain1", "retain2", "holdout")
        for text in json.loads((tmp_path / "news" / f"raw/{split}.json").read_text())
    }
    assert not trained & set(sum(folds[1:], []))


def test_wmdp_miniature_is_a_wmdp_folder_with_exact_counts(tmp_path):
    write_released(tmp_path, "wmdp", scale="tiny", seed=0)
    rows = {r["set"]: r["items"] for r in require_wmdp(tmp_path)}
    n = PEOPLE["tiny"]
    assert rows == {"wmdp-bio": 3 * n, "wmdp-cyber": 3 * n, "wmdp-chem": 3 * n,
                    "bio-forget": n, "bio-retain": n, "cyber-forget": n, "cyber-retain": n,
                    "mmlu": 3 * 2 * n}  # fmt: skip
    questions = load_wmdp(tmp_path, "wmdp-bio")
    assert all(len(set(q.options)) == 4 for q in questions)
    assert len({q.label for q in questions}) > 1  # the right answer is not always in one place
    corpus = (tmp_path / "wmdp-corpora" / "bio-forget-corpus.jsonl").read_text()
    assert all(q.options[q.label] in corpus for q in questions)  # the corpus teaches the answers
    # The utility questions ask about the retain corpora's people, in MMLU's fields.
    retain = (tmp_path / "wmdp-corpora" / "bio-retain-corpus.jsonl").read_text()
    retain += (tmp_path / "wmdp-corpora" / "cyber-retain-corpus.jsonl").read_text()
    utility = load_mmlu(tmp_path)
    assert all(r.options[r.label] in retain and s == "global_facts" for r, s in utility)


def test_deterministic_apart_from_the_tofu_world_and_leaving_it_unmoved(tmp_path):
    write_released(tmp_path / "a", "muse", seed=0)
    write_released(tmp_path / "b", "muse", seed=0)
    write_released(tmp_path / "c", "muse", seed=1)
    same = (tmp_path / "a/raw/forget.txt").read_bytes()
    assert same == (tmp_path / "b/raw/forget.txt").read_bytes()
    assert same != (tmp_path / "c/raw/forget.txt").read_bytes()
    world = build_world(get_scale("tiny"), 0)
    tofu_names = {p.name for p in world.authors + world.holdout + world.pretrain_people}
    articles = json.loads((tmp_path / "a/raw/forget.json").read_text())
    assert not any(name in text for name in tofu_names for text in articles)
    assert _tiny_files_sha256() == TINY_FILES_SHA256


def test_data_generate_writes_both_released_folders_beside_tofu_unchanged(tmp_path, capsys):
    from forgetbench.benchmarks.mini import mini_stats
    from forgetbench.cli.main import main

    out = tmp_path / "mini"
    assert main(["data", "generate", "--scale", "tiny", "--out", str(out)]) == 0
    assert (
        f"MUSE's layout in {out / 'muse/news'}, WMDP's in {out / 'wmdp'}, RWKU's in "
        f"{out / 'rwku/Target'}" in capsys.readouterr().out
    )
    # The same bytes as write_released alone, and the TOFU-shaped files as before.
    alone = write_released(tmp_path / "alone", "muse", scale="tiny", seed=0)
    for path in alone:
        assert (out / "muse/news" / path).read_bytes() == (tmp_path / "alone" / path).read_bytes()
    manifest = json.loads((out / "manifest.json").read_text())
    tofu = {
        p: e for p, e in manifest["files"].items() if not p.startswith(("muse/", "wmdp/", "rwku/"))
    }
    assert tofu.keys() == build_files(scale="tiny", seed=0).keys()
    assert manifest["files"]["muse/news/knowmem/forget_qa.json"]["records"] == 2 * PEOPLE["tiny"]
    assert manifest["files"]["muse/news/raw/forget.txt"]["records"] == len(
        (out / "muse/news/raw/forget.txt").read_text()
    )
    assert manifest["files"]["wmdp/wmdp-chem.jsonl"]["records"] == 3 * PEOPLE["tiny"]
    # The loaders read them in place, and `data stats` counts them with the rest.
    assert len(require_muse(out / "muse/news")) == 32 and len(require_wmdp(out / "wmdp")) == 8
    stats = {r["file"]: r for r in mini_stats(out)}
    assert stats["muse/news/verbmem/forget.json"]["records"] == PEOPLE["tiny"]
    assert stats["wmdp/wmdp-corpora/bio-forget-corpus.jsonl"]["kind"] == "documents"


def test_a_folder_of_the_previous_generator_is_completed_in_place(tmp_path):
    from forgetbench.benchmarks.mini import generate_mini

    new = generate_mini(tmp_path, scale="tiny", seed=0)
    tofu_bytes = (tmp_path / "tofu" / "full.json").read_bytes()
    # What generator version 2 left: the same TOFU-shaped files, no MUSE or WMDP folder.
    old = {**new, "generator_version": "2"}
    old["files"] = {
        p: e for p, e in new["files"].items() if not p.startswith(("muse/", "wmdp/", "rwku/"))
    }
    (tmp_path / "manifest.json").write_text(json.dumps(old))
    for folder in ("muse", "wmdp"):
        for file in sorted((tmp_path / folder).rglob("*"), reverse=True):
            file.unlink() if file.is_file() else file.rmdir()
        (tmp_path / folder).rmdir()
    assert generate_mini(tmp_path, scale="tiny", seed=0) == new
    assert json.loads((tmp_path / "manifest.json").read_text()) == new
    assert (tmp_path / "tofu" / "full.json").read_bytes() == tofu_bytes
    assert (tmp_path / "muse/news/verbmem/forget.json").is_file()
    # Version 3's folder of the same world, whose scal/ and sust/ were laid out otherwise: its
    # released-layout files are rewritten, every other file kept.
    v3 = {**new, "generator_version": "3"}
    v3["files"] = {
        **new["files"],
        "muse/news/scal/forget_1.json": {"sha256": "0" * 64, "records": 1},
    }
    (tmp_path / "manifest.json").write_text(json.dumps(v3))
    (tmp_path / "muse/news/scal/forget_1.json").write_text("[]")
    assert generate_mini(tmp_path, scale="tiny", seed=0) == new
    scal = json.loads((tmp_path / "muse/news/scal/forget_1.json").read_text())
    assert scal == json.loads((tmp_path / "muse/news/raw/forget.json").read_text())
    # An older folder whose files differ from ours is another world: refused, as before.
    old["files"]["tofu/full.json"] = {**old["files"]["tofu/full.json"], "sha256": "0" * 64}
    (tmp_path / "manifest.json").write_text(json.dumps(old))
    with pytest.raises(DataError, match="different miniature benchmark"):
        generate_mini(tmp_path, scale="tiny", seed=0)
