"""report.html in a real browser: headless Chromium loads it without a console error or a network
request, draws every plot at a sensible size, and shows hostile strings as text."""

from __future__ import annotations

import importlib.util
import io
import os
import sys
from pathlib import Path

import pytest
from synthetic import HOSTILE_QUESTION, figure_ids

CHROMIUM = Path("/usr/bin/chromium")
SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "report_screenshot.py"

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def chromium() -> str:
    """The Chromium binary. Missing, these tests skip on a developer's machine but fail under CI,
    which installs it (`make test` as root), so a broken install cannot pass as a skip."""
    if not CHROMIUM.is_file():
        reason = f"{CHROMIUM} not found: install Debian's chromium (`make test` does it as root)"
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the browser tests: {reason}")
        pytest.skip(reason)
    return str(CHROMIUM)


@pytest.fixture(scope="module")
def screenshot_script():
    """scripts/report_screenshot.py as a module: its DevTools client is what the test drives."""
    spec = importlib.util.spec_from_file_location("report_screenshot", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def rendered(screenshot_script, chromium: str, built_report: Path):
    return screenshot_script.render(built_report, chromium=chromium, width=1280)


def test_loads_without_console_errors_or_requests(rendered, built_report: Path):
    assert rendered.errors == []
    assert rendered.requests == [built_report.resolve().as_uri()]  # the page itself, nothing else
    assert rendered.scripts == 0


def test_every_plot_is_drawn(rendered):
    assert [f["id"] for f in rendered.figures] == figure_ids()
    for figure in rendered.figures:
        assert figure["width"] > 400 and figure["height"] > 250, figure
        assert figure["shapes"] > 50, figure  # axes, ticks, glyphs and lines made it into the DOM


def test_screenshot_shows_every_plot(rendered):
    from PIL import Image

    image = Image.open(io.BytesIO(rendered.png)).convert("RGB")
    assert image.width == 1280 and image.height > 3000
    for figure in rendered.figures:
        box = (
            figure["x"],
            figure["y"],
            figure["x"] + figure["width"],
            figure["y"] + figure["height"],
        )
        crop = image.crop(tuple(round(v) for v in box))
        colours = crop.getcolors(maxcolors=1 << 16)
        # A blank or failed SVG is one or two flat colours; a drawn plot has anti-aliased lines.
        assert colours is None or len(colours) > 20, figure["id"]


def test_hostile_strings_are_shown_as_text(rendered):
    assert HOSTILE_QUESTION in rendered.text
    assert "tiny-llama <test>" in rendered.text


def test_script_writes_a_png(
    screenshot_script, chromium: str, built_report: Path, tmp_path: Path, capsys
):
    out = tmp_path / "shots" / "report.png"
    assert screenshot_script.main([str(built_report.parent), str(out), "--chromium", chromium]) == 0
    assert out.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert "12 plots" in capsys.readouterr().out


def test_script_refuses_a_folder_without_a_report(screenshot_script, tmp_path: Path, capsys):
    assert screenshot_script.main([str(tmp_path), str(tmp_path / "x.png")]) == 2
    assert "report.html does not exist" in capsys.readouterr().err
