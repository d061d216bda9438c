"""`forgetbench bench eval`: the TOFU task answered by the naive and by the fast backend must write
the same log (the real check of the fast scorer); the command reports its numbers as JSON. No
timing assertions."""

import json
from pathlib import Path

import pytest

from forgetbench.benchmarks.mini import generate_mini
from forgetbench.cli import main
from forgetbench.data.logs import EvalLog, SetLog
from forgetbench.data.tofu import tofu_eval_sets
from forgetbench.eval.backend import FastBackend, NaiveBackend
from forgetbench.eval.bench import bench_evaluation, compare_logs
from forgetbench.eval.tasks.tofu import evaluate_tofu
from forgetbench.modeling.builtin import build_tiny_model
from forgetbench.modeling.loading import save_model
from forgetbench.modeling.templates import PromptTemplate
from toy import toy_tokenizer

TEMPLATE = PromptTemplate("question_answer")
SET_FILE_NAMES = (
    "forget10_perturbed",
    "retain_perturbed",
    "real_authors_perturbed",
    "world_facts_perturbed",
)


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """A randomly initialised tiny model and the first 3 questions of each TOFU set of the tiny
    miniature benchmark (a TOFU-layout folder)."""
    root = tmp_path_factory.mktemp("bench-eval")
    tokenizer = toy_tokenizer()
    model = build_tiny_model(tokenizer, seed=0)
    model_dir = save_model(model, tokenizer, root / "model")
    generate_mini(root / "mini", scale="tiny", seed=0)
    data = root / "data"
    data.mkdir()
    for name in SET_FILE_NAMES:
        lines = (root / "mini" / "tofu" / f"{name}.json").read_text().splitlines()[:3]
        (data / f"{name}.json").write_text("\n".join(lines) + "\n")
    return model, tokenizer, model_dir, data, tofu_eval_sets(data, "forget10")


def test_naive_and_fast_paths_write_the_same_log(study):
    model, tokenizer, _, _, sets = study
    options = {"max_new_tokens": 8, "max_length": 256}
    fast = evaluate_tofu(FastBackend(model, tokenizer, batch_size=4), tokenizer, TEMPLATE, sets,
                         **options)  # fmt: skip
    naive = evaluate_tofu(NaiveBackend(model, tokenizer), tokenizer, TEMPLATE, sets, **options)
    diff = compare_logs(fast, naive)
    assert diff.identical, diff.mismatches[:5]
    assert 0 < diff.max_abs <= 1e-5  # different kernels: equal to float rounding, not bit-equal
    for name, log in fast.sets.items():
        assert set(naive.sets[name].fields) == set(log.fields)
        assert naive.sets[name].fields["generated_text"] == log.fields["generated_text"]
    # Real Authors / World Facts have no paraphrase: both paths score the answer in its place.
    real = naive.sets["real_authors"]
    assert real.fields["avg_paraphrased_loss"] == real.fields["avg_gt_loss"]


def _log(**fields):
    base = {
        "avg_gt_loss": [1.0, 2.0],
        "gt_loss": [10.0, 40.0],
        "num_token_gt": [10, 20],
        "perturb_loss": [[5.0, 6.0], [7.0, 8.0]],
        "num_token_perturb": [[5, 6], [7, 8]],
        "generated_text": [["q0", "a", "t"], ["q1", "b", "t"]],
    }
    return EvalLog("x", {"forget": SetLog("forget", ("0", "1"), {**base, **fields})})


def test_compare_logs_reports_every_kind_of_difference():
    assert compare_logs(_log(), _log()).identical
    # Summed losses are compared per answer token: 1e-4 over 20 tokens is 5e-6 per token.
    small = compare_logs(_log(), _log(gt_loss=[10.0, 40.0001]))
    assert small.identical and small.max_abs == pytest.approx(5e-6)
    diff = compare_logs(
        _log(),
        _log(
            avg_gt_loss=[1.0, 2.0001],
            perturb_loss=[[5.0, 6.0], [7.0]],
            generated_text=[["q0", "a", "t"], ["q1", "c", "t"]],
        ),
    )
    assert not diff.identical
    assert diff.where == "forget/avg_gt_loss[1]" and diff.max_abs == pytest.approx(1e-4)
    found = "\n".join(diff.mismatches)
    assert "forget/avg_gt_loss[1]" in found
    assert "forget/generated_text[1][1]: 'b' vs 'c'" in found
    assert "forget/perturb_loss per token[1]: 2 items vs 1" in found
    missing = compare_logs(_log(), _log(extra=[1, 2]))
    assert missing.mismatches == ["forget/extra: field missing from one path"]


def test_report_counts_the_work_of_each_path(study):
    model, tokenizer, _, _, sets = study
    report = bench_evaluation(model, tokenizer, TEMPLATE, sets, max_new_tokens=4, batch_size=8)
    assert report["identical"] and report["questions"] == 12
    fast, naive = report["paths"]["fast"], report["paths"]["naive"]
    # The naive path re-encodes the prompt for every candidate and projects every position
    # onto the vocabulary; the fast one encodes each prompt once and projects answers only.
    assert naive["model_tokens"]["scoring"] > fast["model_tokens"]["scoring"]
    assert naive["vocab_projections"]["scoring"] == naive["model_tokens"]["scoring"]
    assert fast["vocab_projections"]["scoring"] < fast["model_tokens"]["scoring"]
    # One generation step per new token and prompt, at least.
    assert naive["model_tokens"]["generation"] >= report["answer_tokens"]["generated"]
    # The naive path runs one sequence at a time: nothing is padded, every position is real.
    assert naive["real_model_tokens"] == naive["model_tokens"]
    assert naive["padding_share"] == {"scoring": 0.0, "generation": 0.0, "total": 0.0}
    # The fast path pads its batches (sorted by length, so little): real < padded, and the
    # share and rates follow from the counts.
    real, padded = fast["real_model_tokens"]["total"], fast["model_tokens"]["total"]
    assert 0 < real < padded
    assert fast["padding_share"]["total"] == pytest.approx(1 - real / padded, abs=1e-4)
    assert fast["model_tokens_per_s"]["padded"] == pytest.approx(padded / fast["seconds"], 1e-2)
    assert report["matmul_peak_dtype"] == "float32"
    for path in (fast, naive):
        assert path["seconds"] >= path["scoring_seconds"] + path["generation_seconds"] > 0
        assert path["flop_per_s"] > 0 and path["peak_rss_mib"] > 0
    # A tiny model's small matmuls reach a fraction of the machine's dense-matmul rate.
    assert report["matmul_peak_flop_per_s"] > 1e9
    for name, path in report["paths"].items():
        fraction = report["fraction_of_peak"][name]
        assert fraction == pytest.approx(
            path["flop_per_s"] / report["matmul_peak_flop_per_s"], 1e-2
        )
        assert 0 < fraction < 1


def _bench_argv(study, out: Path) -> list[str]:
    _, _, model_dir, data, _ = study
    return [
        # Overrides right after the target: argparse cannot take a second positional list
        # after options.
        "bench", "eval", "eval.max_new_tokens=4", "--model", str(model_dir), "--data", str(data),
        "--out", str(out), "--json",
    ]  # fmt: skip


def test_cli_prints_the_report_as_json(study, tmp_path, capsys):
    assert main(_bench_argv(study, tmp_path)) == 0
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert {
        "speedup",
        "scoring_speedup",
        "generation_speedup",
        "identical",
        "max_abs_diff",
        "peak_rss_mib",
        "questions",
        "answer_tokens",
        "scores",
    } <= set(report)
    for path in ("fast", "naive"):
        assert {
            "seconds",
            "scoring_seconds",
            "generation_seconds",
            "questions_per_s",
            "answer_tokens_per_s",
            "model_tokens",
            "flop_per_s",
            "peak_rss_mib",
        } <= set(report["paths"][path])
    assert report["identical"] is True and report["max_abs_diff"] <= 1e-5
    assert len(report["scores"]) == 13  # 12 sub-scores + model utility
    assert json.loads((tmp_path / "bench_eval.json").read_text())["speedup"] == report["speedup"]


def test_cli_fails_in_one_line_when_the_paths_disagree(study, tmp_path, capsys, monkeypatch):
    real = NaiveBackend.generate

    def off_by_one_word(self, requests):
        return [text + " extra" for text in real(self, requests)]

    monkeypatch.setattr(NaiveBackend, "generate", off_by_one_word)
    assert main(_bench_argv(study, tmp_path)) == 1
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert err.startswith("error: fast and naive evaluation differ") and "\n" not in err
    assert "generated_text" in err and str(tmp_path / "bench_eval.json") in err
    assert "error" in json.loads(captured.out.strip().splitlines()[-1])
    assert json.loads((tmp_path / "bench_eval.json").read_text())["identical"] is False


def test_cli_usage_errors(tmp_path, capsys):
    assert main(["bench", "eval", "--model", str(tmp_path), "--out", str(tmp_path)]) == 2
    assert "--model and --data go together" in capsys.readouterr().err
    assert main(["bench", "evl", "--out", str(tmp_path)]) == 2
    assert "did you mean 'eval'?" in capsys.readouterr().err


def test_the_fast_paths_profile_per_phase_on_the_cpu(study):
    model, tokenizer, _, _, sets = study
    report = bench_evaluation(
        model, tokenizer, TEMPLATE, sets, max_new_tokens=4, batch_size=8, profile=True
    )
    profile = report["paths"]["fast"]["profile"]
    assert set(profile) == {"scoring", "generation"} and "profile" not in report["paths"]["naive"]
    for phase in profile.values():
        # model calls 3-10 of the phase (fewer where the phase has fewer), each a step
        assert 1 <= phase["profiled_steps"] <= 8 and phase["skipped_steps"] == 2
        assert phase["device_busy_share"] is None and phase["seconds_per_step"] > 0
        assert any("mm" in t["name"] for t in phase["top"]), phase["top"]


def test_the_meter_counts_real_tokens_on_the_device_and_reads_them_once(monkeypatch):
    # Each generated token is one forward pass: an int() of its mask's sum there would make the
    # host wait for the device at every token. The count stays a device tensor until it is read.
    import torch

    from forgetbench.eval.bench import Meter
    from host_syncs import SyncCounter

    model = build_tiny_model(toy_tokenizer(), seed=0).eval()
    meter = Meter()
    counter = SyncCounter(monkeypatch)
    prompt = torch.tensor([[5, 6, 7, 8, 9], [5, 6, 7, 8, 9]])
    mask = torch.tensor([[0, 0, 1, 1, 1], [0, 1, 1, 1, 1]])
    with torch.no_grad(), meter.attached(model), meter.phase("generation"):
        counter.on = True
        model(input_ids=prompt, attention_mask=mask)  # 7 real of 10
        # a cached step: the mask spans the cache, its last column is this call's
        step_mask = torch.cat([mask, torch.tensor([[1], [0]])], dim=1)
        model(input_ids=torch.tensor([[3], [3]]), attention_mask=step_mask)
        counter.on = False
    assert [
        c for c in counter.calls if c.startswith(("__int__ in bench.py", "item in bench.py"))
    ] == []
    assert meter.model_tokens["generation"] == 12
    assert meter.real_tokens == {"scoring": 0, "generation": 8}
