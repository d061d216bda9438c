"""Hand-made results of a MUSE and a WMDP study, in the rows `forgetbench run` writes; each number
was picked so that every criterion has a model that meets it and one that does not (worked out
in the tests' comments)."""

from __future__ import annotations

from typing import Any

HOSTILE = "<i>evil</i> & [bold]x[/bold]"


def _muse(method: str, step: int, verbmem: float, knowmem_f: float, privleak: float,
          knowmem_r: float) -> dict[str, Any]:  # fmt: skip
    return {"split": "news", "method": method, "step": step, "muse/verbmem_f": verbmem,
            "muse/knowmem_f": knowmem_f, "muse/knowmem_r": knowmem_r, "muse/privleak": privleak,
            "muse/mia/min_k": 0.5 - privleak / 200}  # fmt: skip


def muse_results() -> dict[str, Any]:
    rows = [
        _muse("finetuned", 0, 60.0, 50.0, -80.0, 40.0),
        _muse("retain", 0, 20.0, 10.0, 0.0, 38.0),
        _muse("npo", 5, 30.0, 12.0, -20.0, 39.0),
        _muse("npo", 10, 15.5, 8.25, 3.5, 36.5),
        _muse("grad_ascent", 10, 0.0, 0.0, 45.25, 2.0),
    ]

    def seq(method: str, mode: str, k: int, knowmem_r: float, verbmem: float) -> dict[str, Any]:
        return {"split": f"scal_{k}", "method": method, "step": 10 * (mode != "reference"),
                "mode": mode, "request": k, "muse/knowmem_r": knowmem_r,
                "muse/verbmem_f": verbmem}  # fmt: skip

    sequence = [
        seq("finetuned", "reference", 1, 40.0, 60.0),
        seq("finetuned", "reference", 2, 40.0, 60.0),
        seq("npo", "sequential", 1, 37.0, 15.5),
        seq("npo", "sequential", 2, 35.0, 12.0),  # below 0.9 x 40 = 36: not sustained
        seq("npo", "one-shot", 1, 37.0, 15.5),
        seq("npo", "one-shot", 2, 36.5, 18.25),
    ]
    return {"benchmark": "muse", "scale": "tiny", "rows": rows, "sequence": sequence}


def _wmdp(method: str, step: int, bio: float, cyber: float, chem: float, mmlu: float,
          split: str = "wmdp") -> dict[str, Any]:  # fmt: skip
    return {"split": split, "method": method, "step": step, "wmdp/bio": bio, "wmdp/cyber": cyber,
            "wmdp/chem": chem, "wmdp/all": (bio + cyber + chem) / 3, "mmlu/all": mmlu}  # fmt: skip


def wmdp_results() -> dict[str, Any]:
    rows = [
        _wmdp("finetuned", 0, 0.75, 0.5, 0.625, 0.5),
        _wmdp("retain", 0, 0.25, 0.25, 0.25, 0.48),
        _wmdp("rmu", 10, 0.5, 0.25, 0.5, 0.5),
        _wmdp("rmu", 20, 0.25, 0.25, 0.5, 0.46),
        _wmdp(HOSTILE, 20, 0.25, 0.125, 0.25, 0.3),
    ]
    return {"benchmark": "wmdp", "scale": "tiny", "rows": rows}
