"""The live view in a real browser (docs/live.md): Debian's headless Chromium, driven by
Selenium (pointed at /usr/bin/chromium and /usr/bin/chromedriver: nothing is downloaded),
opens the page of `qcn run transient --backend sim --live`, sees its figures update at
least five times a second, moves q_eq from 22 to 44 in the hot spot, and the run's
results show the simulated queue settling at the new level and knobs.csv the change.  A
screenshot is kept (``$QCN_TEST_ARTEFACTS``, default build/test-artefacts/)."""

from __future__ import annotations

import contextlib
import csv
import importlib.util
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest

from topologies.bmv2 import wait_until

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
ARTEFACTS = Path(os.environ.get("QCN_TEST_ARTEFACTS", ROOT / "build" / "test-artefacts"))
SCREENSHOT = "live-view.png"
SPEED = 0.25
"""A quarter of real time: 16 s for the 4 s run, time enough for a browser on a busy
machine."""
T = TypeVar("T")


def browser_missing() -> str:
    """Why this machine cannot run the test, in one line ("" when it can)."""
    absent = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    if absent:
        return f"missing {', '.join(absent)} (Debian's chromium and chromium-driver)"
    absent = [m for m in ("selenium", "bokeh") if importlib.util.find_spec(m) is None]
    if absent:
        return f"{', '.join(absent)} not installed (make venv)"
    return ""


pytestmark = pytest.mark.skipif(bool(browser_missing()), reason=browser_missing())

# BokehJS, asked through the page's own document: a model by name, or None before it loads.
MODEL_TEXT = """
try { const m = Bokeh.documents[0].get_model_by_name(arguments[0]); return m ? m.text : null; }
catch (e) { return null; }
"""
ROWS = """
try { return Bokeh.documents[0].get_model_by_name(arguments[0]).get_length(); }
catch (e) { return null; }
"""
# Each change of the clock's text, stamped in the page's own time (ms).
COUNT_UPDATES = """
window.qcnUpdates = [];
const m = Bokeh.documents[0].get_model_by_name('clock');
m.properties.text.change.connect(() => window.qcnUpdates.push(performance.now()));
"""
# A widget's <input>, wherever Bokeh's shadow roots put it: found by its CSS class.
KNOB_INPUT = """
function find(root, selector) {
  const hit = root.querySelector(selector);
  if (hit) return hit;
  for (const el of root.querySelectorAll('*')) {
    if (el.shadowRoot) { const inner = find(el.shadowRoot, selector); if (inner) return inner; }
  }
  return null;
}
const host = find(document, '.' + arguments[0]);
if (!host) return null;
return (host.shadowRoot && host.shadowRoot.querySelector('input')) || host.querySelector('input');
"""


def wait_for(what: str, probe: Callable[[], T | None], timeout_s: float = 30.0) -> T:
    """Poll ``probe`` until it gives something true."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = probe()
        if got:
            return got
        time.sleep(0.05)
    pytest.fail(f"timed out waiting for {what}")


@contextmanager
def chromium() -> Iterator[Any]:
    from selenium import webdriver  # noqa: PLC0415
    from selenium.webdriver.chrome.service import Service  # noqa: PLC0415

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1400,1250"):  # fmt: skip
        options.add_argument(arg)
    browser = webdriver.Chrome(options=options, service=Service(executable_path=str(CHROMEDRIVER)))
    try:
        yield browser
    finally:
        browser.quit()


def simulated_time(browser: Any) -> float | None:
    text = browser.execute_script(MODEL_TEXT, "clock") or ""
    m = re.search(r"t = ([\d.]+) s", text)
    return float(m.group(1)) if m else None


def test_a_browser_watches_the_transient_and_moves_q_eq_from_22_to_44_in_the_hot_spot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from selenium.common.exceptions import StaleElementReferenceException  # noqa: PLC0415
    from selenium.webdriver.common.keys import Keys  # noqa: PLC0415

    from qcn.core import scenario as scenarios  # noqa: PLC0415
    from qcn.live import knob_css  # noqa: PLC0415

    monkeypatch.setenv("SE_OFFLINE", "true")  # Selenium's manager fetches nothing either
    out = tmp_path / "transient"
    run = subprocess.Popen(
        [sys.executable, "-m", "qcn", "run", "transient", "--backend", "sim", "--live",
         "--duration", "4", "--live-speed", str(SPEED), "--out", str(out), "--quiet"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
    )  # fmt: skip
    try:
        assert run.stdout is not None
        url = next(
            ln.split("live view at ", 1)[1].split()[0] for ln in run.stdout if "live view at" in ln
        )
        with chromium() as browser:
            browser.get(url)
            # The figures update, at least five times a second (counted in the page).
            wait_for("the run to start", lambda: simulated_time(browser))
            browser.execute_script(COUNT_UPDATES)
            time.sleep(1.5)
            updates = browser.execute_script("return window.qcnUpdates")
            last_second = [t for t in updates if t > updates[-1] - 1000]
            assert len(last_second) >= 5, updates
            # In the hot spot (2-4 s), q_eq from 22 to 44 on the page's knob.
            wait_for("the hot spot", lambda: (simulated_time(browser) or 0) >= 2.3)
            port = str(scenarios.load("transient").bottleneck_port)

            def logged() -> bool:
                return "q_eq_pkts 22 -> 44" in (
                    browser.execute_script(MODEL_TEXT, "knob log") or ""
                )

            # As a user types; and again, as a user would, if the page redrew the field
            # under the keys (a busy machine, 2026-11-25: the change never reached it).
            for _ in range(3):
                with contextlib.suppress(StaleElementReferenceException):
                    knob = wait_for("the q_eq knob", lambda: browser.execute_script(
                        KNOB_INPUT, knob_css(port, "q_eq_pkts")))  # fmt: skip
                    knob.send_keys(Keys.END, Keys.BACKSPACE * 4, "44", Keys.ENTER)
                if wait_until(logged, 3.0):
                    break
            wait_for("the change on the page", logged)
            assert browser.execute_script(ROWS, "queue data") >= 200  # 10 ms rows, 2.3 s on
            time.sleep(0.3)  # (a few frames of the settling queue in the screenshot)
            ARTEFACTS.mkdir(parents=True, exist_ok=True)
            browser.save_screenshot(str(ARTEFACTS / SCREENSHOT))
        _stdout, stderr = run.communicate(timeout=60)
        assert run.returncode == 0, stderr
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    with (out / "knobs.csv").open() as f:
        (change,) = list(csv.DictReader(f))
    at = float(change["time_s"])
    assert (change["port"], change["field"], change["old"], change["new"]) == (
        port, "q_eq_pkts", "22", "44",
    )  # fmt: skip
    assert 2.3 <= at < 3.0, f"the change reached the model at {at} s (a machine this slow?)"
    with (out / "queue.csv").open() as f:
        queue = [(float(r["time_s"]), float(r["queue_pkts"])) for r in csv.DictReader(f)]
    settled = [q for t, q in queue if at + 0.5 <= t < 3.95]
    assert 38 <= sum(settled) / len(settled) <= 52  # about 44 within a simulated second
    assert (ARTEFACTS / SCREENSHOT).stat().st_size > 10_000
