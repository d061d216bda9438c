"""Render a forgetbench report.html in headless Chromium and save a full-page PNG screenshot.

    python scripts/report_screenshot.py runs/demo docs/report.png      # folder holding report.html
    python scripts/report_screenshot.py runs/demo/report.html out.png --width 1280
    python scripts/report_screenshot.py runs/demo docs/report.png --height 1400  # the top only

Talks to Chromium over the Chrome DevTools Protocol on a pipe (`--remote-debugging-pipe`: JSON
messages ended by a NUL byte on file descriptors 3 and 4), so it needs only the standard library and
no free port. `render()` also reports what the browser saw (console errors, requests, the size of
each plot), which is what tests/report/test_browser.py checks.
"""

from __future__ import annotations

import argparse
import base64
import fcntl
import json
import os
import select
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHROMIUM = "/usr/bin/chromium"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--mute-audio",
)
# What the page reports about itself once loaded; rects are in page (not viewport) coordinates.
_INSPECT = """JSON.stringify({
  figures: [...document.querySelectorAll('figure.plot')].map(f => {
    const svg = f.querySelector('svg');
    const r = svg ? svg.getBoundingClientRect() : {left: 0, top: 0, width: 0, height: 0};
    return {id: f.id, x: r.left + scrollX, y: r.top + scrollY, width: r.width, height: r.height,
            shapes: svg ? svg.querySelectorAll('path, use').length : 0};
  }),
  scripts: document.querySelectorAll('script').length,
  text: document.body.innerText,
  width: document.documentElement.scrollWidth,
  height: document.documentElement.scrollHeight,
})"""


@dataclass
class Rendered:
    """What Chromium saw when it loaded a page."""

    errors: list[str] = field(default_factory=list)  # console errors, exceptions, failed loads
    requests: list[str] = field(default_factory=list)  # every URL the page asked for
    figures: list[dict[str, Any]] = field(default_factory=list)  # figure.plot: id, x, y, size
    scripts: int = 0
    text: str = ""
    png: bytes = b""  # the full page


class DevTools:
    """A minimal Chrome DevTools Protocol client over `--remote-debugging-pipe`."""

    def __init__(self, chromium: str, *, timeout: float = 60.0) -> None:
        self.timeout = timeout
        self.events: list[dict[str, Any]] = []
        self._next_id = 0
        self._buffer = b""
        self._profile = tempfile.TemporaryDirectory(prefix="forgetbench-chromium-")
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 (closed in close())
        to_browser, self._write = os.pipe()
        self._read, from_browser = os.pipe()
        # Above 4, so that moving one end onto 3 or 4 cannot overwrite the other before it moves.
        to_browser, from_browser = (_above(fd, 10) for fd in (to_browser, from_browser))
        # bash (dash takes single-digit descriptors only) moves our pipe ends to the descriptors 3
        # and 4 that Chromium expects.
        command = " ".join(
            [
                "exec",
                shlex.quote(chromium),
                *FLAGS,
                shlex.quote(f"--user-data-dir={self._profile.name}"),
            ]
            + ["--remote-debugging-pipe", "about:blank", f"3<&{to_browser}", f"4>&{from_browser}"]
        )
        self.process = subprocess.Popen(
            ["/bin/bash", "-c", command],
            pass_fds=(to_browser, from_browser),
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=self._log,
        )
        os.close(to_browser)
        os.close(from_browser)

    def send(
        self, method: str, params: dict[str, Any] | None = None, session: str | None = None
    ) -> Any:
        """Call `method` and return its result; events that arrive meanwhile go to `self.events`."""
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._write, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._receive()
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error'].get('message')}")
                return reply.get("result", {})
            if "method" in reply:
                self.events.append(reply)

    def wait_for(self, event: str, session: str | None = None) -> dict[str, Any]:
        """The first `event` (already received or yet to come) for `session`."""
        while True:
            for message in self.events:
                if message.get("method") == event and message.get("sessionId") == session:
                    return message
            self.events.append(self._receive())

    def close(self) -> None:
        try:
            if self.process.poll() is None:
                self.send("Browser.close")
        except (OSError, RuntimeError, TimeoutError):
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self._write)
        os.close(self._read)
        self._log.close()
        self._profile.cleanup()

    def _receive(self) -> dict[str, Any]:
        deadline = time.monotonic() + self.timeout
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._read], [], [], left)[0]:
                raise TimeoutError(f"Chromium did not answer within {self.timeout:.0f} s")
            chunk = os.read(self._read, 1 << 20)
            if not chunk:
                self._log.seek(0)
                tail = self._log.read().decode(errors="replace")[-2000:]
                raise RuntimeError(f"Chromium exited (code {self.process.poll()}):\n{tail}")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def __enter__(self) -> DevTools:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _above(fd: int, lowest: int) -> int:
    """`fd` moved to a descriptor number >= `lowest`."""
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD, lowest)
    os.close(fd)
    return moved


def render(
    page: Path,
    *,
    chromium: str = CHROMIUM,
    width: int = 1280,
    height: int | None = None,
    timeout: float = 60.0,
) -> Rendered:
    """Load `page` in headless Chromium and return what it saw, with a screenshot of the whole
    page or of its top `height` pixels."""
    with DevTools(chromium, timeout=timeout) as browser:
        target = browser.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = browser.send("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"
        ]
        for domain in ("Page", "Runtime", "Log", "Network"):
            browser.send(f"{domain}.enable", session=session)
        metrics = {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": False}
        browser.send("Emulation.setDeviceMetricsOverride", metrics, session=session)
        browser.send("Page.navigate", {"url": Path(page).resolve().as_uri()}, session=session)
        browser.wait_for("Page.loadEventFired", session)
        seen = json.loads(
            browser.send(
                "Runtime.evaluate", {"expression": _INSPECT, "returnByValue": True}, session
            )["result"]["value"]
        )
        tall = seen["height"] if height is None else min(height, seen["height"])
        clip = {"x": 0, "y": 0, "width": seen["width"], "height": tall, "scale": 1}
        shot = browser.send(
            "Page.captureScreenshot",
            {"format": "png", "captureBeyondViewport": True, "clip": clip},
            session,
        )
        rendered = Rendered(
            figures=seen["figures"],
            scripts=seen["scripts"],
            text=seen["text"],
            png=base64.b64decode(shot["data"]),
        )
        for event in browser.events:
            rendered.errors.extend(_error(event))
            if event.get("method") == "Network.requestWillBeSent":
                rendered.requests.append(event["params"]["request"]["url"])
    return rendered


def _error(event: dict[str, Any]) -> list[str]:
    method, params = event.get("method"), event.get("params", {})
    if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
        return [
            " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", []))
        ]
    if method == "Runtime.exceptionThrown":
        details = params.get("exceptionDetails", {})
        return [details.get("exception", {}).get("description") or details.get("text", "exception")]
    if method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
        return [params["entry"].get("text", "")]
    if method == "Network.loadingFailed":
        return [f"failed to load: {params.get('errorText')}"]
    return []


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "report", type=Path, help="report.html, or the results folder that holds it"
    )
    parser.add_argument("png", type=Path, help="where to write the screenshot")
    parser.add_argument("--width", type=int, default=1280, help="viewport width in CSS pixels")
    parser.add_argument(
        "--height", type=int, default=None, help="only the top HEIGHT pixels (default: the page)"
    )
    parser.add_argument("--chromium", default=CHROMIUM, help="the Chromium binary")
    args = parser.parse_args(argv)
    page = args.report / "report.html" if args.report.is_dir() else args.report
    if not page.is_file():
        print(
            f"error: {page} does not exist — run `forgetbench report` on the results folder first",
            file=sys.stderr,
        )
        return 2
    if not Path(args.chromium).is_file():
        print(
            f"error: {args.chromium} not found — install it (apt-get install chromium)",
            file=sys.stderr,
        )
        return 2
    rendered = render(page, chromium=args.chromium, width=args.width, height=args.height)
    args.png.parent.mkdir(parents=True, exist_ok=True)
    args.png.write_bytes(rendered.png)
    for error in rendered.errors:
        print(f"warning: the page logged an error: {error}", file=sys.stderr)
    print(f"wrote {args.png} ({len(rendered.figures)} plots)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
