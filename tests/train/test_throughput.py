"""`forgetbench bench train` on a given model shape: forgetbench's loop and HF's Trainer on the same
recipe must lose the same per step (the real check that the recipes match), and the report's
token counts, padding share and FLOP rate follow from the batches. No timing assertions."""

import json
from dataclasses import replace

import pytest
from transformers import AutoTokenizer

from forgetbench.cli import main
from forgetbench.data.tofu import load_tofu
from forgetbench.device import configure
from forgetbench.modeling.builtin import build_tiny_model
from forgetbench.train.loop_config import LoopConfig
from forgetbench.train.mini import TEMPLATE
from forgetbench.train.order import epoch_order
from forgetbench.train.stages import encode_qa
from forgetbench.train.throughput import train_throughput

pytestmark = pytest.mark.slow

# 6 steps of 2 micro-batches of 4: accumulation, warm-up and decay all take part. A learning rate
# of 1e-3 moves the tiny model's loss by ~0.1 in 6 steps, so agreement is not the trivial
# agreement of two models that did not move.
ARGV = [
    "bench", "train", "model.size=tiny", "train.lr=1e-3", "train.batch_size=8",
    "train.per_device_batch_size=4", "train.warmup_epochs=0.5", "--scale", "tiny", "--steps",
    "6", "--json",
]  # fmt: skip


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench-train")
    assert main([*ARGV, "--out", str(out)]) == 0
    saved = json.loads((out / "bench_train.json").read_text())
    return out, saved


def test_forgetbench_and_hf_trainer_lose_the_same(report):
    _, r = report
    ours, theirs = r["forgetbench"]["losses"], r["hf_trainer"]["losses"]
    assert r["steps"] == 6 and len(ours) == len(theirs) == 6
    assert ours[-1] < ours[0] - 0.05  # the model learnt something
    assert r["losses_agree"] and r["max_loss_diff"] <= r["loss_tolerance"] == 1e-5
    assert r["max_loss_diff"] == max(abs(a - b) for a, b in zip(ours, theirs, strict=True))
    assert r["accumulation"] == 2 and r["examples"] == 48


def test_token_counts_padding_and_flops_follow_from_the_batches(report):
    out, r = report
    # Rebuild the batches by hand: the first 48 questions of `full`, encoded as the miniature
    # does, in the loop's epoch order, 4 a micro-batch, each padded to its longest.
    tokenizer = AutoTokenizer.from_pretrained(next((out / "models").glob("tokenizer*")))
    records = load_tofu(out / "data" / "tofu", "full")[:48]
    examples = encode_qa(records, tokenizer, TEMPLATE, max_length=512)
    config = LoopConfig(lr=1e-3, epochs=1, batch_size=8, per_device_batch_size=4)
    lengths = [len(examples[i].input_ids) for i in epoch_order(config, 48, 0)]
    batches = [lengths[i : i + 4] for i in range(0, 48, 4)]
    real = sum(lengths)
    padded = sum(4 * max(b) for b in batches)
    assert r["tokens"] == {"real": real, "padded": padded}
    assert r["padding"]["share"] == pytest.approx(1 - real / padded, abs=1e-4)
    assert r["padding"]["batch_max"] == pytest.approx(
        max(1 - sum(b) / (4 * max(b)) for b in batches), abs=1e-4
    )
    n = sum(p.numel() for p in build_tiny_model(tokenizer, scale="tiny").parameters())
    assert r["n_params"] == n
    for run in (r["forgetbench"], r["hf_trainer"]):
        # Steady state: the 10 micro-batches after the first optimizer step.
        steady = sum(4 * max(b) for b in batches[2:])
        rate = run["tokens_per_s"]["padded"]
        assert rate == pytest.approx(steady / run["steady_seconds"], 1e-2)
        assert run["tokens_per_s"]["real"] < rate
        assert run["flop_per_s"] == pytest.approx(6 * n * rate, 1e-2)
        assert run["share_of_peak"] == pytest.approx(
            run["flop_per_s"] / r["matmul_peak_flop_per_s"], 1e-2
        )
        assert 0 < run["share_of_peak"] < 1 and run["peak_rss_mib"] > 0
    assert r["compute_dtype"] == "float32" and r["matmul_peak_flop_per_s"] > 1e9


def _first_questions(report):
    """The tiny study's tokenizer and its first 32 finetuning questions, encoded."""
    out, _ = report
    tokenizer = AutoTokenizer.from_pretrained(next((out / "models").glob("tokenizer*")))
    records = load_tofu(out / "data" / "tofu", "full")[:32]
    return tokenizer, encode_qa(records, tokenizer, TEMPLATE, max_length=512)


def _throughput(tokenizer, examples, config, out, **options):
    return train_throughput(
        lambda: build_tiny_model(tokenizer, scale="tiny"),
        examples,
        config=config,
        pad_id=tokenizer.pad_token_id,
        out=out,
        **options,
    )


def test_a_different_recipe_is_caught(report, tmp_path, monkeypatch):
    """HF's side without the warm-up (its schedule is built in `throughput`, ours in the loop):
    the loss difference exceeds the tolerance and the report says the losses disagree."""
    import forgetbench.train.throughput as throughput

    tokenizer, examples = _first_questions(report)
    config = LoopConfig(lr=1e-3, epochs=1, batch_size=8, per_device_batch_size=4)
    monkeypatch.setattr(throughput, "warmup_steps", lambda *_: 0)
    r = _throughput(tokenizer, examples, config, tmp_path)
    assert not r["losses_agree"] and r["max_loss_diff"] > 100 * r["loss_tolerance"]


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--scale", "tiny", "--steps", "3"], "--steps times a given model"),
        (["model.size=tiny", "train.lora=true"], "does not use train.lora"),
        (["model.size=tiny", "train.epochs=2"], "does not use train.epochs"),
        (["--model", "some/model"], "needs --data"),
    ],
)
def test_bench_train_refuses_what_it_would_not_read(argv, said, tmp_path, capsys):
    assert main(["bench", "train", *argv, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err
    assert not (tmp_path / "bench_train.json").exists()


def test_length_grouped_batches_pad_less_with_both_trainers(report, tmp_path):
    """`group_by_length`: 32 questions in HF's length-grouped order (batches of 8, one
    megabatch), fewer padded positions than the random order's, and HF's Trainer, fed the same
    order, still loses the same."""
    tokenizer, examples = _first_questions(report)
    lengths = [len(e.input_ids) for e in examples]
    plain = LoopConfig(lr=1e-3, epochs=1, batch_size=8, per_device_batch_size=4)
    config = replace(plain, group_by_length=True)

    def padded(order):
        return sum(4 * max(lengths[i] for i in order[k : k + 4]) for k in range(0, 32, 4))

    r = _throughput(tokenizer, examples, config, tmp_path)
    grouped = padded(epoch_order(config, 32, 0, lengths=lengths))
    assert r["group_by_length"]
    assert r["tokens"] == {"real": sum(lengths), "padded": grouped}
    assert grouped < padded(epoch_order(plain, 32, 0))
    assert r["losses_agree"] and r["max_loss_diff"] <= 1e-5


def test_padding_free_batches_lose_what_hf_trainers_padded_ones_do(report, tmp_path):
    """`model.padding_free=true`: our loop packs each micro-batch into one row, HF's Trainer
    pads the same batches; every step's loss agrees to float32 rounding."""
    tokenizer, examples = _first_questions(report)
    config = LoopConfig(lr=1e-3, epochs=1, batch_size=8, per_device_batch_size=4)
    configure("cpu", padding_free=True)
    r = _throughput(tokenizer, examples[:16], config, tmp_path)  # 2 steps
    assert r["padding_free"] and r["padding"]["share"] > 0.05  # there was padding to leave out
    assert r["losses_agree"] and r["max_loss_diff"] <= 1e-5
    assert report[1]["padding_free"] is False  # the CPU's default


def test_the_cpu_profile_of_both_trainers_and_rates_after_it(report, tmp_path):
    """`profile`: steps 2-4 of each trainer under torch.profiler (the CPU profile here: host
    operators, no device figures); the rates are timed from the end of step 4 on, over the 4
    steps left, so the profiler's overhead stays out of them."""
    tokenizer, examples = _first_questions(report)
    config = LoopConfig(lr=1e-3, epochs=1, batch_size=4, per_device_batch_size=4)
    r = _throughput(tokenizer, examples, config, tmp_path, profile=True)
    assert r["steps"] == 8 and r["losses_agree"]
    lengths = [len(examples[i].input_ids) for i in epoch_order(config, 32, 0)]
    steady = sum(4 * max(lengths[k : k + 4]) for k in range(16, 32, 4))
    for run in (r["forgetbench"], r["hf_trainer"]):
        profile = run["profile"]
        assert profile["profiled_steps"] == 3 and profile["device"] == "cpu"
        assert profile["device_busy_share"] is None and profile["host_syncs_per_step"] is None
        assert 0 < profile["seconds_per_step"] < run["seconds"]
        names = [t["name"] for t in profile["top"]]
        assert any(n in names for n in ("aten::mm", "aten::addmm", "aten::bmm")), names
        assert sum(t["share"] for t in profile["top"]) <= 1.0
        assert run["tokens_per_s"]["padded"] == pytest.approx(steady / run["steady_seconds"], 1e-2)


def test_bench_train_takes_the_miniatures_root_as_data_as_eval_does(report, tmp_path):
    from forgetbench.modeling.loading import save_model

    out, _ = report
    tokenizer = AutoTokenizer.from_pretrained(next((out / "models").glob("tokenizer*")))
    model = save_model(build_tiny_model(tokenizer, scale="tiny"), tokenizer, tmp_path / "m")
    argv = ["bench", "train", "--model", str(model), "--data", str(out / "data"), "--steps", "2",
            "train.batch_size=4", "train.per_device_batch_size=4", "--json"]  # fmt: skip
    assert main([*argv, "--out", str(tmp_path / "bench")]) == 0
    saved = json.loads((tmp_path / "bench" / "bench_train.json").read_text())
    assert saved["steps"] == 2 and saved["examples"] == 8 and saved["losses_agree"]
