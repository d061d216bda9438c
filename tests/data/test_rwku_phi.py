"""rwku.corpus_model=phi3: the RWKU study unlearns on the corpora Phi-3 wrote (`positive_phi.json`,
`pair_phi.json`, `reject_phi.json`, as RWKU's process/data_process.py names them), `data stats`
counts them, and a folder without them is refused in one sentence before any work. The engine's
call is captured: what is trained on is the point, not the training."""

from __future__ import annotations

import json

from forgetbench.benchmarks.corpus import corpus_benchmark
from forgetbench.benchmarks.mini.released import write_released
from forgetbench.cli import main
from forgetbench.config import RunConfig
from forgetbench.data.rwku import load_rwku
from forgetbench.modeling.templates import PromptTemplate
from forgetbench.records import TextRecord
from toy import toy_tokenizer

SPLIT = "2_Leila_Mansour"


def _phi(folder, stem: str) -> None:
    """A Phi-3 file unlike the Llama-3 one: its rows in reverse, each text marked."""
    rows = json.loads((folder / f"{stem}.json").read_text())[::-1]
    for row in rows:
        for key in ("text", "prompt", "instruction"):
            if key in row:
                row[key] = "Phi says: " + row[key]
    (folder / f"{stem}_phi.json").write_text(json.dumps(rows))


def _refused(argv, capsys, names: str) -> str:
    code = main(argv)
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert "Traceback" not in err and len(lines) == 1 and lines[0].startswith("error: "), err
    assert names in lines[0] and code == 2, (code, lines[0])
    return lines[0]


def test_phi3_unlearns_on_phis_corpora_and_a_folder_without_them_is_refused(
    tmp_path, monkeypatch, capsys
):
    from forgetbench.study import unlearn as study_unlearn
    from forgetbench.study.inputs import Study, external_defaults

    data = tmp_path / "Target"
    write_released(data, "rwku", scale="tiny")
    out = tmp_path / "out"
    argv = ["run", "--benchmark", "rwku", "--model", str(tmp_path), "--data", str(data),
            "--out", str(out), "rwku.corpus_model=phi3", "--methods", "grad_ascent"]  # fmt: skip
    line = _refused(argv, capsys, "positive_phi.json, negative_phi.json, pair_phi.json")
    assert "1_Eilidh_Rosenqvist, 2_Leila_Mansour" in line and not out.exists()

    for target in data.iterdir():
        if target.is_dir():
            for stem in ("positive", "negative", "pair", "reject"):
                _phi(target, stem)
    assert main(["data", "stats", "--benchmark", "rwku", "--path", str(data), "--json"]) == 0
    counts = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["rows"]
    items = {r["file"]: r["items"] for r in counts if not r["kind"]}
    assert items["pair_phi.json"] == items["pair.json"] > 0
    assert items["positive_phi.json"] == items["positive.json"] > 0

    captured: dict[str, tuple] = {}

    def engine(out, *, forget, retain, method, refusals, **_):
        captured[method.name] = (forget, refusals)

    monkeypatch.setattr(study_unlearn, "run_unlearning", engine)
    monkeypatch.setattr(study_unlearn, "load_tokenizer", lambda *a, **k: toy_tokenizer())
    study = Study(data, tmp_path, None, {}, PromptTemplate("question_answer"), 256,
                  external_defaults, benchmark="rwku", documents="rwku")  # fmt: skip
    for model in ("phi3", "llama3"):
        for name in ("dpo", "idk", "grad_ascent"):
            options = {"rwku": {"corpus_model": model}}
            if name == "idk":
                options["method"] = {"retain_weight": 0}  # rejection tuning
            config = RunConfig.model_validate(options)
            study_unlearn.unlearn_split(study, config, tmp_path / model, SPLIT, name)
        suffix = "_phi" if model == "phi3" else ""
        assert captured["dpo"][0] == load_rwku(data, SPLIT, "pair" + suffix)
        rejects = load_rwku(data, SPLIT, "reject" + suffix)
        assert captured["idk"][0] == rejects
        assert captured["idk"][1] == tuple(dict.fromkeys(r.answer for r in rejects))
        texts = [r.text for r in load_rwku(data, SPLIT, "positive" + suffix)]
        ga = captured["grad_ascent"][0]
        assert all(isinstance(r, TextRecord) for r in ga)
        # Each text whole (the miniature's are shorter than the study's cut): Phi-3's, in order.
        assert [r.text for r in ga] == texts
        assert ga[0].text.startswith("Phi says: ") == (model == "phi3")
    chosen = corpus_benchmark("rwku").chosen_sets(data, RunConfig.model_validate(
        {"rwku": {"corpus_model": "phi3", "targets": ["2"]}}))  # fmt: skip
    assert list(chosen) == [SPLIT] and chosen[SPLIT](data) == [
        r.text for r in load_rwku(data, SPLIT, "positive_phi")
    ]


def test_run_on_another_benchmark_refuses_the_corpus_model(capsys):
    _refused(
        ["run", "--benchmark", "muse", "rwku.corpus_model=phi3"],
        capsys,
        "read by the RWKU study alone",
    )
