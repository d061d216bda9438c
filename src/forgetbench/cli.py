"""The `forgetbench` command. Every failure the user can cause becomes one line on stderr:
`error: <what> — <what to do>` and a non-zero exit; with `--json` the last stdout line is always
one JSON object (the result, or `{"error": ...}`)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from forgetbench import __version__
from forgetbench.config import BENCHMARKS, METHOD_NAMES, SCALES, RunConfig, load_config
from forgetbench.errors import ForgetbenchError, NotImplementedYet, UnknownNameError
from forgetbench.metrics.tofu import TRUTH_RATIO_FORMS

Handler = Callable[[argparse.Namespace], dict[str, Any]]


class _Parser(argparse.ArgumentParser):
    """argparse prints usage plus a message over several lines; we want one sentence."""

    def error(self, message: str) -> NoReturn:
        raise _UsageError(f"{self.prog}: {message}", f"see '{self.prog} --help'")


class _UsageError(ForgetbenchError):
    pass


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    as_json = "--json" in argv
    try:
        args = build_parser().parse_args(argv)
        if not getattr(args, "handler", None):
            build_parser().print_help()
            return 2
        result = args.handler(args)
    except ForgetbenchError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        if as_json:
            print(json.dumps({"error": exc.message}))
        return exc.exit_code
    except KeyboardInterrupt:
        print("error: interrupted — finished stages are kept; re-run to resume", file=sys.stderr)
        return 130
    if as_json:
        print(json.dumps(result, default=str))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="forgetbench", description="Machine unlearning benchmarks for LLMs.")
    parser.add_argument("--version", action="version", version=f"forgetbench {__version__}")
    commands = parser.add_subparsers(title="commands", metavar="COMMAND", parser_class=_Parser)

    def command(name: str, handler: Handler, help_text: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help_text, description=help_text)
        sub.add_argument(
            "--json", action="store_true", help="print one JSON object as the last line"
        )
        sub.set_defaults(handler=handler)
        return sub

    data = command("data", _not_built("data"), "inspect benchmark data")
    data_commands = data.add_subparsers(
        title="data commands", metavar="ACTION", parser_class=_Parser
    )
    stats = data_commands.add_parser("stats", help="count records per split/task/kind")
    stats.add_argument("--json", action="store_true")
    stats.add_argument("--benchmark", required=True, help="|".join(BENCHMARKS))
    stats.add_argument("--path", required=True, help="the benchmark's data folder")
    stats.set_defaults(handler=_data_stats)
    generate = data_commands.add_parser(
        "generate", help="write the built-in miniature benchmark (offline, seeded)"
    )
    generate.add_argument("--json", action="store_true")
    generate.add_argument("--scale", default="tiny", help="tiny|small|full (default: tiny)")
    generate.add_argument("--seed", type=int, default=0, help="same seed, same bytes (default: 0)")
    generate.add_argument(
        "--out", required=True, help="output folder (new, or one generated alike)"
    )
    generate.set_defaults(handler=_data_generate)

    compare = command(
        "compare", _compare, "TOFU scores of a candidate log against a retain model's log"
    )
    compare.add_argument(
        "--reference", required=True, help="retain model's eval log (file or folder)"
    )
    compare.add_argument(
        "--candidate", required=True, help="evaluated model's eval log (file or folder)"
    )
    compare.add_argument("--truth-ratio-form", choices=TRUTH_RATIO_FORMS, default="tofu_code")
    compare.add_argument(
        "--allow-question-mismatch",
        action="store_true",
        help="run the KS tests even if the two logs hold different questions",
    )

    show = command("config", _config, "print the resolved run config (defaults + file + overrides)")
    _config_options(show)

    finetune = command(
        "finetune",
        _finetune,
        "finetune a model on a TOFU-layout split (full -> finetuned, retainNN -> retain model)",
    )
    _config_options(finetune)
    finetune.add_argument("--no-progress", action="store_true", help="no progress bar")

    unlearn = command("unlearn", _unlearn, "run an unlearning method on a forget split")
    _config_options(unlearn)
    unlearn.add_argument("--no-progress", action="store_true", help="no progress bar")

    evaluate = command("eval", _eval, "TOFU evaluation of one model: per-question logs + summary")
    _config_options(evaluate)
    evaluate.add_argument("--retain-log", help="a retain model's eval log, for forget quality")

    for name, help_text in (
        ("sanity", "TOFU appendix E sanity checks"),
        ("run", "the whole study: data, models, methods, metrics, report"),
    ):
        _config_options(command(name, _not_built(name), help_text))
    bench = command("bench", _bench, "speed benchmarks (times and peak memory; not tests)")
    bench.add_argument("target", help="what to time: train (pretrain + finetune + retain90)")
    _config_options(bench)

    report = command(
        "report", _not_built("report"), "rebuild the HTML report from a results folder"
    )
    report.add_argument("results", help="results folder")
    return parser


def _config_options(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("--config", help="YAML run config")
    sub.add_argument("--scale", help="|".join(SCALES))
    sub.add_argument("--benchmark", help="|".join(BENCHMARKS))
    sub.add_argument("--model", help="Hugging Face id or local path")
    sub.add_argument("--data", help="data folder or Hugging Face dataset id")
    sub.add_argument("--split", help="forget split, e.g. forget10")
    sub.add_argument("--method", help="unlearning method")
    sub.add_argument("--methods", help="comma-separated unlearning methods")
    sub.add_argument("--epochs", type=int)
    sub.add_argument("--lr", type=float)
    sub.add_argument("--seed", type=int)
    sub.add_argument("--out", help="output folder")
    sub.add_argument(
        "overrides", nargs="*", metavar="KEY=VALUE", help="config overrides, e.g. train.lr=2e-5"
    )


_OPTION_KEYS = {
    "scale": "scale",
    "benchmark": "benchmark.name",
    "model": "model.name",
    "data": "benchmark.path",
    "split": "benchmark.split",
    "method": "unlearn.method",
    "epochs": "unlearn.epochs",
    "lr": "unlearn.lr",
    "seed": "seed",
    "out": "out",
}


def _resolve_config(args: argparse.Namespace) -> RunConfig:
    overrides = list(args.overrides)
    for option, key in _OPTION_KEYS.items():
        value = getattr(args, option, None)
        if value is not None:
            overrides.append(f"{key}={json.dumps(value) if isinstance(value, str) else value}")
    for method in (args.methods or "").split(","):
        if method.strip() and method.strip() not in METHOD_NAMES:
            raise UnknownNameError("method", method.strip(), METHOD_NAMES)
    return load_config(args.config, overrides)


def _config(args: argparse.Namespace) -> dict[str, Any]:
    config = _resolve_config(args).model_dump()
    if not args.json:
        print(json.dumps(config, indent=2))
    return config


def _not_built(name: str) -> Handler:
    def handler(args: argparse.Namespace) -> dict[str, Any]:
        if name == "data":
            raise _UsageError("forgetbench data: missing action", "try 'forgetbench data stats'")
        if name != "report":
            _resolve_config(args)  # bad options still fail as themselves, before the notice
        raise NotImplementedYet(
            f"forgetbench {name} is not implemented yet",
            "see the README for what works today ('forgetbench compare', 'forgetbench data stats')",
        )

    return handler


def _finetune(args: argparse.Namespace) -> dict[str, Any]:
    from forgetbench.train.stages import finetune_split

    _quiet_transformers()
    config = _resolve_config(args)
    if not args.out:
        raise _UsageError(
            "forgetbench finetune: --out is required",
            "pass the run folder; finished stages there are reused",
        )
    split = args.split or "full"
    progress = not (args.no_progress or args.json)
    if config.benchmark.name == "mini" and not args.model and not args.data:
        result = _finetune_mini(config, split=split, out=Path(args.out), progress=progress)
    else:
        if not args.data:
            raise _UsageError(
                "forgetbench finetune: --data is required",
                "pass a TOFU-layout folder, a JSON(L) file or a Hugging Face dataset id "
                "(or neither --model nor --data for the built-in miniature benchmark)",
            )
        if not args.model:
            raise _UsageError(
                "forgetbench finetune: --model is required",
                "pass a Hugging Face id or a saved model folder",
            )
        result = finetune_split(
            config, model=args.model, data=args.data, split=split, out=args.out, progress=progress
        )
    summary = {
        "stage": result.name,
        "model_dir": str(result.model_dir),
        "cached": result.cached,
        "steps": len(result.losses),
        "first_loss": result.losses[0] if result.losses else None,
        "final_loss": result.losses[-1] if result.losses else None,
        "seconds": round(result.seconds, 2),
    }
    if not args.json:
        state = "reused cached" if result.cached else "trained"
        print(
            f"{state} {result.name}: {result.model_dir} ({summary['steps']} steps, loss {summary['first_loss']:.4f} -> {summary['final_loss']:.4f})"
        )
    return summary


def _quiet_transformers() -> None:
    """Our progress bars show the training; transformers' load/save bars only flicker. Called by
    the model commands, not in main(), so light commands never import transformers."""
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()


def _unlearn(args: argparse.Namespace) -> dict[str, Any]:
    from forgetbench.train.study import unlearn_command

    _quiet_transformers()
    config = _resolve_config(args)
    if not args.out:
        raise _UsageError(
            "forgetbench unlearn: --out is required",
            "pass the run folder; finished stages there are reused",
        )
    result = unlearn_command(
        config,
        model=args.model,
        data=args.data,
        split=config.benchmark.split,
        out=args.out,
        progress=not (args.no_progress or args.json),
    )
    summary = {
        "method": config.unlearn.method,
        "split": config.benchmark.split,
        "model_dir": str(result.model_dir),
        "cached": result.cached,
        "steps": len(result.losses),
        "first_loss": result.losses[0] if result.losses else None,
        "final_loss": result.losses[-1] if result.losses else None,
        "snapshots": [{"step": step, "model_dir": str(path)} for step, path in result.snapshots],
        "seconds": round(result.seconds, 2),
    }
    if not args.json:
        state = "reused cached" if result.cached else "ran"
        print(
            f"{state} {summary['method']} on {summary['split']}: {result.model_dir} "
            f"({summary['steps']} steps, {len(result.snapshots)} trajectory points)"
        )
    return summary


def _eval(args: argparse.Namespace) -> dict[str, Any]:
    from forgetbench import __version__
    from forgetbench.data.logs import AGGREGATED_NAME, read_eval_log, write_eval_log
    from forgetbench.eval.summary import compare, summarize
    from forgetbench.eval.tofu_eval import evaluate_tofu, tofu_eval_sets
    from forgetbench.io import atomic_write_json
    from forgetbench.metrics import METRICS
    from forgetbench.modeling import load_model, resolve_template

    _quiet_transformers()
    config = _resolve_config(args)
    for option in ("model", "data", "out"):
        if not getattr(args, option):
            raise _UsageError(
                f"forgetbench eval: --{option} is required", "see 'forgetbench eval --help'"
            )
    out = Path(args.out)
    if (out / AGGREGATED_NAME).exists():
        raise _UsageError(
            f"{out / AGGREGATED_NAME} already exists",
            "pass another --out; finished evaluations are never overwritten",
        )
    retain_log = read_eval_log(args.retain_log) if args.retain_log else None  # fail before the work
    sets = tofu_eval_sets(args.data, config.benchmark.split)
    model, tokenizer = load_model(
        args.model, dtype=config.model.dtype, trust_remote_code=config.model.trust_remote_code
    )
    template = resolve_template(config.model.template, tokenizer, args.model)
    log = evaluate_tofu(
        model, tokenizer, template, sets,
        max_new_tokens=config.eval.max_new_tokens, batch_size=config.eval.batch_size,
        max_length=config.train.max_length, source=str(out / AGGREGATED_NAME),
    )  # fmt: skip
    write_eval_log(out / AGGREGATED_NAME, log)
    form = config.eval.truth_ratio_form
    scores = compare(retain_log, log, form=form) if retain_log else summarize(log, form=form)
    summary = {
        "model": args.model,
        "data": args.data,
        "split": config.benchmark.split,
        "retain_log": args.retain_log,
        "log": str(out / AGGREGATED_NAME),
        "scores": scores,
        "forgetbench": __version__,
        "metric_versions": {name: info.version for name, info in METRICS.items()},
        "config": config.model_dump(),
    }
    atomic_write_json(out / "summary.json", summary)
    if not args.json:
        from forgetbench.report.console import print_comparison

        if retain_log:
            print_comparison({"candidate": args.model, "reference": args.retain_log, **scores})
        else:
            print(json.dumps(scores, indent=2))
        print(f"per-question log: {out / AGGREGATED_NAME}")
    return summary


def _finetune_mini(config: RunConfig, *, split: str, out: Path, progress: bool) -> Any:
    """The built-in default: generate the miniature world, pretrain the tiny base model on its
    background corpus, then finetune (`full`) or train a retain model (`retainNN`)."""
    from forgetbench.benchmarks.mini import generate_mini
    from forgetbench.train.mini import finetune_mini, pretrain_base

    data = out / "data"
    generate_mini(data, scale=config.scale, seed=config.seed)
    base = pretrain_base(out, data, scale=config.scale, seed=config.seed, progress=progress)
    return finetune_mini(
        out,
        data,
        base.model_dir,
        split=split,
        scale=config.scale,
        seed=config.seed,
        progress=progress,
    )


def _bench(args: argparse.Namespace) -> dict[str, Any]:
    from forgetbench.report.console import print_rows
    from forgetbench.train.bench import bench_training

    config = _resolve_config(args)
    if args.target != "train":
        raise UnknownNameError("benchmark target", args.target, ("train",))
    if not args.out:
        raise _UsageError("forgetbench bench: --out is required", "pass a scratch run folder")
    result = bench_training(
        Path(args.out), scale=config.scale, seed=config.seed, progress=not args.json
    )
    if not args.json:
        print_rows(result["stages"], title=f"training benchmark, scale {config.scale}")
        print(
            f"total {result['total_seconds']:.1f} s, peak memory {result['peak_rss_mib']:.0f} MiB; "
            f"finetuned ROUGE-L on full {result['finetuned_full_rougeL']:.3f}, "
            f"retain model on forget10 {result['retain_forget10_rougeL']:.3f}"
        )
    return result


def _data_stats(args: argparse.Namespace) -> dict[str, Any]:
    from forgetbench.report.console import print_rows

    if args.benchmark not in BENCHMARKS:
        raise UnknownNameError("benchmark", args.benchmark, BENCHMARKS)
    path = Path(args.path)
    if args.benchmark == "lume":
        from forgetbench.data.lume import lume_stats

        rows = lume_stats(path)
    elif args.benchmark == "tofu":
        from forgetbench.data.tofu import tofu_stats

        rows = tofu_stats(path)
    else:
        from forgetbench.benchmarks.mini import mini_stats

        rows = mini_stats(path)
    if not args.json:
        print_rows(rows, title=f"{args.benchmark} data in {path}")
    return {"benchmark": args.benchmark, "path": str(path), "rows": rows}


def _data_generate(args: argparse.Namespace) -> dict[str, Any]:
    from forgetbench.benchmarks.mini import generate_mini, get_scale

    get_scale(args.scale)  # an unknown scale fails before anything is built
    out = Path(args.out)
    existed = (out / "manifest.json").is_file()
    manifest = generate_mini(out, scale=args.scale, seed=args.seed)
    counts = {path: entry["records"] for path, entry in manifest["files"].items()}
    status = "unchanged" if existed else "written"
    if not args.json:
        verb = "already up to date" if existed else "wrote"
        print(
            f"{verb}: miniature benchmark (scale {args.scale}, seed {args.seed}) in {out}: "
            f"{len(counts)} files, {counts['tofu/full.json']} TOFU questions, "
            f"{counts['tofu/forget10.json']} in forget10"
        )
    return {"out": str(out), "status": status, **manifest}


def _compare(args: argparse.Namespace) -> dict[str, Any]:
    from forgetbench.data.logs import read_eval_log
    from forgetbench.eval.summary import compare
    from forgetbench.report.console import print_comparison

    result = compare(
        read_eval_log(args.reference),
        read_eval_log(args.candidate),
        form=args.truth_ratio_form,
        allow_question_mismatch=args.allow_question_mismatch,
    )
    result = {"reference": str(args.reference), "candidate": str(args.candidate), **result}
    if not args.json:
        print_comparison(result)
    return result


if __name__ == "__main__":
    raise SystemExit(main())
