"""The shared cache (FORGETBENCH_CACHE): a stage lives in it once and every output folder links to
it; two runs filling one entry take turns; a second study in a new folder trains nothing."""

from __future__ import annotations

import json
import multiprocessing
import shutil
from pathlib import Path

import pytest

from forgetbench.cache import cache_root, clear, entries, shared_entry
from forgetbench.cli import main


@pytest.fixture
def cache(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    monkeypatch.setenv("FORGETBENCH_CACHE", str(root))
    return root


def test_the_cache_folder_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.delenv("FORGETBENCH_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache_root() == tmp_path / "forgetbench"
    monkeypatch.setenv("FORGETBENCH_CACHE", "off")
    assert cache_root() is None


def test_two_output_folders_link_to_one_entry(cache, tmp_path):
    first, second = tmp_path / "a" / "models" / "x-1", tmp_path / "b" / "models" / "x-1"
    with shared_entry(first, kind="models", name="x-1") as folder:
        (folder / "weights").write_text("trained once")
    with shared_entry(second, kind="models", name="x-1") as folder:
        assert (folder / "weights").read_text() == "trained once"
    assert first.is_symlink() and second.is_symlink()
    assert first.resolve() == second.resolve() == (cache / "models" / "x-1").resolve()


def test_a_real_folder_from_before_the_cache_stays_in_place(cache, tmp_path):
    old = tmp_path / "run" / "models" / "x-1"
    old.mkdir(parents=True)
    with shared_entry(old, kind="models", name="x-1") as folder:
        assert folder == old
    assert not old.is_symlink() and not (cache / "models" / "x-1").exists()


def _train(out: str, cache: str, results: multiprocessing.Queue) -> None:
    import os

    os.environ["FORGETBENCH_CACHE"] = cache
    from forgetbench.modeling import build_tiny_model
    from forgetbench.train.loop import LoopConfig
    from forgetbench.train.stages import run_stage
    from toy import toy_examples, toy_tokenizer

    tokenizer = toy_tokenizer()
    config = LoopConfig(lr=3e-3, epochs=2, batch_size=8, per_device_batch_size=8, weight_decay=0.0)
    stage = run_stage(
        out, name="finetune", parent="tiny", parent_model=(build_tiny_model(tokenizer), tokenizer),
        examples=toy_examples(), config=config, progress=False,
    )  # fmt: skip
    results.put((stage.cached, stage.losses, str(stage.model_dir.resolve())))


@pytest.mark.slow
def test_two_runs_filling_one_entry_take_turns(cache, tmp_path):
    # Two processes train the same stage into two output folders at once: one trains, the other
    # waits on the entry's lock and reuses what it finds; nothing is written twice or torn.
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    runs = [
        context.Process(target=_train, args=(str(tmp_path / name), str(cache), results))
        for name in ("a", "b")
    ]
    for run in runs:
        run.start()
    outcomes = [results.get(timeout=300) for _ in runs]
    for run in runs:
        run.join(timeout=60)
        assert run.exitcode == 0
    assert sorted(cached for cached, _, _ in outcomes) == [False, True]
    assert outcomes[0][1:] == outcomes[1][1:]  # the same losses and the same model folder
    (stage,) = [e for e in entries(cache) if e["kind"] == "models"]
    log = Path(outcomes[0][2]).parent / "work" / "train_log.jsonl"
    assert len(log.read_text().splitlines()) == len(outcomes[0][1])  # one run's steps only


# Every kind of stage (data, models, unlearning runs, evaluations), each as few times as shows it:
# no shadow models (the same `models` stages as the retain model) and only the relearning attack,
# which trains, on the three attacked models. At tiny scale forget01 holds forget10's questions,
# so asking for both computes forget10 once.
STUDY = ["run", "--scale", "tiny", "--splits", "forget01,forget10", "--methods", "grad_ascent",
         "unlearn.epochs=1", "eval.formats=false", "eval.lume=false", "eval.max_new_tokens=16",
         "eval.mia_shadows=0", "study.attacks=[relearn]", "--json", "--no-progress"]  # fmt: skip


def _training_logs(root: Path) -> dict[str, int]:
    return {
        str(log.relative_to(root)): len(log.read_text().splitlines())
        for log in root.rglob("train_log.jsonl")
    }


@pytest.mark.slow
def test_a_second_study_in_a_new_folder_trains_and_evaluates_nothing(
    cache, tmp_path, capsys, tiny_study, tiny_cache
):
    # The cache starts with the session's pretrained, finetuned and retain models (entries as
    # another run left them: the same stages `run --scale tiny` asks for), so only the rest trains.
    for entry in (tiny_cache / "models").iterdir():
        if entry.is_dir():
            shutil.copytree(entry, cache / "models" / entry.name)
    given = {p: (cache / p).stat().st_mtime_ns for p in _training_logs(cache)}
    assert len(given) == 3
    assert main([*STUDY, "--out", str(tmp_path / "first")]) == 0
    logs = _training_logs(cache)
    assert {p: (cache / p).stat().st_mtime_ns for p in given} == given  # reused, not retrained
    # The rest each logged once: the unlearning run, and the relearning attack on the finetuned,
    # retain and unlearned models.
    assert len(logs) == 3 + 4 and all(logs.values())
    assert sum("/relearn-a-" in p for p in logs) == 3
    summaries = {p: p.stat().st_mtime_ns for p in cache.rglob("summary.json")}
    # retain, finetuned, base and grad_ascent's final model; 2 B-half evaluations (unattacked,
    # relearned) of each attacked model.
    assert len(summaries) == 4 + 3 * 2

    assert main([*STUDY, "--out", str(tmp_path / "second")]) == 0
    assert _training_logs(cache) == logs  # no training step ran again
    assert {p: p.stat().st_mtime_ns for p in cache.rglob("summary.json")} == summaries
    second = tmp_path / "second"
    for part in ("data", *(second / "models").iterdir(), *(second / "unlearn").iterdir()):
        assert (second / part).is_symlink(), part  # links into the cache, not copies
    first = json.loads((tmp_path / "first" / "results.json").read_text())
    assert json.loads((second / "results.json").read_text())["rows"] == first["rows"]
    # The two splits' rows are one computation's (the counts above: one unlearning run, one
    # evaluation per model), reported under each name, forget01's first as asked.
    assert first["same_data"] == {"forget01": "forget10"}
    assert first["config"]["study"]["splits"] == ["forget01", "forget10"]
    by_split = {
        split: [{**r, "split": None, "log": None} for r in first["rows"] if r["split"] == split]
        for split in ("forget01", "forget10")
    }
    assert by_split["forget01"] == by_split["forget10"] and len(by_split["forget10"]) == 4
    assert first["rows"][0]["split"] == "forget01"
    # Each split's rows point at logs/{split}/...: forget01's folder links to forget10's.
    assert (tmp_path / "first" / "logs" / "forget01").readlink() == Path("forget10")
    for row in first["rows"]:
        assert row["log"].startswith(f"logs/{row['split']}/"), row["log"]
        assert (tmp_path / "first" / row["log"] / "summary.json").is_file(), row["log"]

    capsys.readouterr()
    assert main(["cache", "list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert {e["kind"] for e in listed["entries"]} == {"data", "models", "unlearn", "evaluations"}
    assert listed["bytes"] > 0
    assert main(["cache", "clear", "--json"]) == 0
    assert entries(cache) == [] and clear(cache) == (0, 0, [])
