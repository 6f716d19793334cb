"""`stoker mix --html` in a real headless browser (Debian's Chromium driven by Playwright): one
line per dataset that follows the planned share, a dashed marker at each schedule point, no
console error. `make install` puts Chromium at /usr/bin/chromium."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from stoker.cli.main import cli

CHROMIUM = "/usr/bin/chromium"
sync_api = pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.skipif(
    not os.access(CHROMIUM, os.X_OK), reason="no /usr/bin/chromium (make install adds it)"
)
YAML = (
    "__module__: megatron.energon\n__class__: MetadatasetV2\nsplits:\n  train:\n    blend:\n"
    "      - weight: 100\n        path: ./flat\n"
    "      - weight: {linear: {0: 100, 1000: 0}}\n        path: ./ramp\n"
    "      - weight: {step: {0: 0, 1500: 100}}\n        path: ./late\n"
)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
        yield chromium
        chromium.close()


def test_mix_page_plots_shares_and_marks_schedule_points(browser: Any, tmp_path: Path) -> None:
    (tmp_path / "plan.yaml").write_text(YAML)
    out = tmp_path / "mix.html"
    result = CliRunner().invoke(
        cli, ["mix", str(tmp_path / "plan.yaml"), "--steps", "2000", "--html", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert "http" not in out.read_text().replace("http://www.w3.org/2000/svg", "")
    errors: list[str] = []
    page = browser.new_page(viewport={"width": 1200, "height": 800})
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else 0)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(out.as_uri())
    page.wait_for_load_state("load")
    lines = page.locator("polyline.share")
    assert lines.count() == 3
    assert lines.evaluate_all("els => els.map(e => e.dataset.dataset)") == ["flat", "ramp", "late"]
    plot = page.locator("#plot").bounding_box()
    assert plot["width"] > 600 and plot["height"] > 300
    # Drawn heights: y grows downwards; the plot's 0 % line is the x axis.
    ys = lines.evaluate_all(
        "els => els.map(e => Array.from(e.points).map(p => p.y))"
    )  # per line, the y of each point
    zero = max(max(y) for y in ys)
    flat, ramp, late = (np.asarray(y) for y in ys)
    height = zero - flat  # drawn height of flat's share at each point
    mid = len(flat) * 1250 // 2000  # a point between the ramp's end and the late start
    assert abs(height[0] - (zero - ramp[0])) < 3  # flat and ramp share 50 / 50 at first
    assert abs(height[mid] - 2 * height[0]) < 3  # then flat alone: 100 %, twice as high
    assert abs(ramp[-1] - zero) < 1 and abs(late[0] - zero) < 1  # 0 % drawn on the axis
    assert abs((zero - late[-1]) - height[0]) < 3  # late and flat share 50 / 50 at the end
    knots = page.locator("line.knot")
    assert sorted(knots.evaluate_all("els => els.map(e => +e.dataset.step)")) == [1000, 1500]
    xs = knots.evaluate_all("els => els.map(e => e.getBoundingClientRect().x)")
    assert xs[0] < xs[1]  # 1000 is left of 1500
    assert "*" in page.locator("tr.knot-row td").first.evaluate(
        "e => getComputedStyle(e, '::after').content"
    )
    assert page.locator("table tr").count() > 10
    assert errors == []
