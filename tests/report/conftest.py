"""Fixtures of the report tests: the synthetic results folder and its report, built once."""

from __future__ import annotations

from pathlib import Path

import pytest
from synthetic import synthetic_results, write_results


@pytest.fixture(scope="session")
def built_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """report.html of the synthetic results, built once (drawing every plot takes seconds)."""
    from forgetbench.report.html import build_report

    return build_report(
        write_results(tmp_path_factory.mktemp("report") / "run", synthetic_results())
    )
