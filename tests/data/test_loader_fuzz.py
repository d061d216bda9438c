"""Fuzzing every file reader: random bytes, random JSON values, rows shaped almost like the real
ones, and truncated valid files must each either load or raise a ForgetbenchError (which the CLI
prints as one line) — never any other exception."""

from __future__ import annotations

import contextlib
import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from forgetbench.benchmarks.mini import load_format, mini_stats
from forgetbench.config import load_config
from forgetbench.data.logs import read_eval_log
from forgetbench.data.lume import load_lume, load_mia_documents, lume_stats
from forgetbench.data.tofu import load_tofu, tofu_stats
from forgetbench.errors import ForgetbenchError
from forgetbench.eval.summary import compare
from forgetbench.io import read_json, read_json_records
from forgetbench.methods.refusals import load_refusals
from forgetbench.results import load_results

FUZZ = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])

scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(10**6), 10**6)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20)
)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
# Documents that break naive readers: nesting past the recursion limit (open and closed),
# an integer int() refuses (> 4300 digits), NaN literals, lone surrogates, NUL bytes.
nasty = st.sampled_from(
    [
        b"[" * 5000,
        b"[" * 5000 + b"]" * 5000,
        b'{"a": ' * 5000 + b"1" + b"}" * 5000,
        b'{"question": ' + b"9" * 5000 + b"}",
        b'{"question": NaN, "answer": Infinity}',
        b'{"question": "\\ud800", "answer": "\\udfff"}',
        b"\x00" * 10,
    ]
)
index_keys = st.sampled_from(["0", "1", "2", "-1", "01", "x", "", "1_0", "١"])


def _rows(keys: tuple[str, ...]) -> st.SearchStrategy[dict[str, Any]]:
    """Rows holding some of the real keys, each with a value of the right type or any other."""
    good = st.text(max_size=12)
    value = good | json_values | st.lists(good, max_size=3)
    return st.dictionaries(st.sampled_from(keys), value, max_size=len(keys)).flatmap(
        lambda row: st.just(row)
    )


def _jsonl(rows: list[Any]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


def _file_contents(rows: st.SearchStrategy[Any]) -> st.SearchStrategy[bytes]:
    """Random bytes, a random JSON document, JSON Lines of (almost) rows, a JSON array of them,
    or a valid-looking file cut short."""
    lines = st.lists(rows, min_size=1, max_size=4)
    whole = lines.map(_jsonl) | lines.map(lambda r: json.dumps(r).encode())
    truncated = st.tuples(whole, st.floats(0, 1)).map(lambda t: t[0][: int(len(t[0]) * t[1])])
    return st.one_of(
        st.binary(max_size=300),
        json_values.map(lambda v: json.dumps(v).encode()),
        whole,
        truncated,
        nasty,
        whole.map(lambda b: b"\xef\xbb\xbf" + b),  # a byte-order mark
    )


def _load_or_refuse(call: Callable[[], Any]) -> None:
    with contextlib.suppress(ForgetbenchError):
        call()


def _in_folder(files: dict[str, bytes], call: Callable[[Path], Any]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for name, data in files.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_bytes(data)
        _load_or_refuse(lambda: call(root))


TOFU_KEYS = ("question", "answer", "paraphrased_answer", "perturbed_answer", "author")
LUME_KEYS = ("id", "input", "output", "task", "document")
FORMAT_KEYS = ("prompt", "options", "label", "question", "answer", "prefix", "span", "author")


@FUZZ
@given(_file_contents(json_values))
def test_json_readers(data):
    _in_folder({"f.json": data}, lambda root: read_json(root / "f.json"))
    _in_folder({"f.json": data}, lambda root: read_json_records(root / "f.json"))


@FUZZ
@given(_file_contents(_rows(TOFU_KEYS)), st.sampled_from(["forget10", "forget10_perturbed", "x"]))
def test_tofu(data, split):
    _in_folder({"f.jsonl": data}, lambda root: load_tofu(root / "f.jsonl", split))
    _in_folder({"forget10_perturbed.json": data}, lambda root: tofu_stats(root))


@FUZZ
@given(_file_contents(_rows(LUME_KEYS)), _file_contents(_rows(LUME_KEYS)))
def test_lume(forget, retain):
    files = {"forget.jsonl": forget, "retain.jsonl": retain}
    _in_folder(files, lambda root: load_lume(root, "forget", task=1))
    _in_folder(files, lume_stats)
    _in_folder({"member.jsonl": forget, "nonmember.jsonl": retain}, load_mia_documents)
    _in_folder({"forget.jsonl": forget, "holdout.jsonl": retain}, load_mia_documents)


FIELDS = ("avg_gt_loss", "avg_paraphrased_loss", "average_perturb_loss", "rougeL_recall")
numbers = st.floats(allow_nan=True, allow_infinity=True) | st.integers(-5, 5)
per_question = st.dictionaries(
    index_keys, numbers | st.lists(numbers, max_size=3) | json_values, max_size=3
)
set_tables = st.dictionaries(
    st.sampled_from((*FIELDS, "generated_text")), per_question | json_values, max_size=5
)
tofu_logs = st.dictionaries(
    st.sampled_from(["eval_log_forget.json", "eval_log.json", "eval_real_author_wo_options.json"]),
    set_tables | json_values,
    max_size=3,
)
metric_names = st.sampled_from(
    ["forget_Q_A_Prob", "forget_Q_A_PARA_Prob", "forget_Q_A_PERT_Prob", "forget_Q_A_ROUGE"]
)
entries = st.dictionaries(
    st.sampled_from(["avg_loss", "rouge1_recall", "rougeL_recall", "input", "generation"]),
    numbers | st.lists(numbers, max_size=3) | st.text(max_size=5),
    max_size=5,
)
open_unlearning_logs = st.dictionaries(
    metric_names,
    st.fixed_dictionaries(
        {"value_by_index": st.dictionaries(index_keys, entries | json_values, max_size=3)}
    )
    | json_values,
    max_size=4,
)


def _log_contents() -> st.SearchStrategy[bytes]:
    docs = tofu_logs | open_unlearning_logs | set_tables
    whole = docs.map(lambda d: json.dumps(d).encode())
    truncated = st.tuples(whole, st.floats(0, 1)).map(lambda t: t[0][: int(len(t[0]) * t[1])])
    return st.one_of(st.binary(max_size=300), whole, truncated, nasty)


def _read_and_compare(path: Path) -> None:
    log = read_eval_log(path)
    compare(log, log)  # what `forgetbench compare` does next with the logs it read


@FUZZ
@given(_log_contents(), st.sampled_from(["eval_log_aggregated.json", "eval_log_forget.json"]))
def test_eval_logs(data, name):
    _in_folder({name: data}, lambda root: _read_and_compare(root / name))
    _in_folder({name: data}, _read_and_compare)  # the folder form


@FUZZ
@given(_file_contents(_rows(FORMAT_KEYS)), st.sampled_from(["mcqa", "cloze", "analogy_qa"]))
def test_miniature_formats(data, name):
    _in_folder(
        {f"formats/{name}_forget.jsonl": data}, lambda root: load_format(root, name, "forget")
    )


manifests = st.fixed_dictionaries(
    {
        "files": st.dictionaries(
            st.sampled_from(["pretrain.jsonl", "tofu/full.json", "lume/forget.jsonl", "../x", ""]),
            st.fixed_dictionaries({"sha256": st.text(max_size=4), "records": st.integers(0, 3)})
            | json_values,
            max_size=3,
        )
    }
)


@FUZZ
@given(
    st.one_of(
        st.binary(max_size=200), (manifests | json_values).map(lambda m: json.dumps(m).encode())
    ),
    _file_contents(_rows(("text", "kind", *TOFU_KEYS, *LUME_KEYS))),
)
def test_miniature_manifest_and_files(manifest, data):
    files = {
        "manifest.json": manifest,
        "pretrain.jsonl": data,
        "tofu/full.json": data,
        "lume/forget.jsonl": data,
    }
    _in_folder(files, lambda root: mini_stats(root, verify=False))
    _in_folder(files, mini_stats)


results_rows = st.dictionaries(
    st.sampled_from(["split", "method", "model", "forget/truth_ratio", "step", "is_reference"]),
    json_values,
    max_size=5,
)
results_docs = st.dictionaries(
    st.sampled_from(["rows", "examples", "timings", "metric_versions", "config", "benchmark"]),
    st.lists(results_rows, max_size=3) | json_values,
    max_size=5,
)


@FUZZ
@given(
    st.one_of(
        st.binary(max_size=300), (results_docs | json_values).map(lambda d: json.dumps(d).encode())
    )
)
def test_results_file(data):
    _in_folder({"results.json": data}, load_results)


config_docs = st.dictionaries(
    st.sampled_from(["seed", "scale", "train", "unlearn", "benchmark", "method", "eval", "x"]),
    st.dictionaries(st.sampled_from(["lr", "epochs", "method", "split", "beta", "y"]), json_values)
    | json_values,
    max_size=4,
)


@FUZZ
@given(
    st.one_of(
        st.binary(max_size=300),
        st.text(max_size=200).map(str.encode),
        config_docs.map(lambda d: yaml.safe_dump(d).encode()),
    )
)
def test_config_yaml(data):
    _in_folder({"run.yaml": data}, lambda root: load_config(root / "run.yaml"))


@FUZZ
@given(st.binary(max_size=300) | st.text(max_size=200).map(str.encode))
def test_refusals_file(data):
    _in_folder({"refusals.txt": data}, lambda root: load_refusals(root / "refusals.txt"))
