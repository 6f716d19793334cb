"""The HTML pages in a real headless browser: Debian's Chromium driven by Playwright.

`stoker preview --html` (a gallery of thumbnails that load, full text on click, a tab per split)
and the `stoker bench --html` report (its plots render with a size) are opened in Chromium; no
page may log a console error. `make install` puts Chromium at /usr/bin/chromium; Playwright
downloads no browser of its own. (docs/img/*.png are made by scripts/docs_screenshots.py.)
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from stoker.format.dataset_config import make_dataset_yaml
from stoker.format.prepare import prepare_dataset
from stoker.preview.bench import BenchSettings, run_bench
from stoker.preview.bench_html import render_bench_html
from tests.conftest import write_shard

CHROMIUM = "/usr/bin/chromium"
sync_api = pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.skipif(
    not os.access(CHROMIUM, os.X_OK), reason="no /usr/bin/chromium (make install adds it)"
)


def caption(key: str) -> str:
    """Longer than the preview's 200-character cut, ending in a marker only the full text has."""
    return f"caption of {key}: " + "a shape on a plain background. " * 8 + f"END-{key}"


def jpeg(i: int) -> bytes:
    pixels = np.zeros((48, 64, 3), dtype=np.uint8)
    pixels[:, :, i % 3] = 200
    pixels[8:40, 8 + 4 * i : 24 + 4 * i] = 255
    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, format="JPEG")
    return buf.getvalue()


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """train: 2 shards of 5; val: 1 shard of 4. JPEG + long caption each."""
    root = tmp_path_factory.mktemp("browser") / "shapes"
    for stem, count in (("train_a", 5), ("train_b", 5), ("val_a", 4)):
        keys = [f"{stem}_{i}" for i in range(count)]
        samples = [(k, {"jpg": jpeg(i), "txt": caption(k).encode()}) for i, k in enumerate(keys)]
        write_shard(root / f"{stem}.tar", samples)
    prepare_dataset(
        str(root),
        split_parts=[("train", "train"), ("val", "val")],
        dataset_yaml=make_dataset_yaml("CaptioningSample", {"image": "jpg", "caption": "txt"}),
    )
    return root


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
        yield chromium
        chromium.close()


class Page:
    """A page of ``browser`` at 1200x800 that records console errors and uncaught exceptions."""

    def __init__(self, browser: Any, path: Path) -> None:
        self.errors: list[str] = []
        self.page = browser.new_page(viewport={"width": 1200, "height": 800})
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else 0)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.goto(path.as_uri())
        self.page.wait_for_load_state("load")

    def screenshot(self, tmp_path: Path, name: str) -> None:
        shot = tmp_path / name
        self.page.screenshot(path=str(shot))
        assert shot.stat().st_size > 10_000  # a rendered page, not a blank one


def test_preview_gallery_click_and_tabs(dataset: Path, browser: Any, tmp_path: Path) -> None:
    out = tmp_path / "preview.html"
    result = subprocess.run(
        [sys.executable, "-m", "stoker.cli.main", "preview", str(dataset), "-n", "6",
         "--split-parts", "train,val", "--shuffle", "--seed", "1", "--html", str(out)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    view = Page(browser, out)
    page = view.page
    train, val = page.locator("#tab-0"), page.locator("#tab-1")
    assert train.is_visible() and not val.is_visible()
    assert train.locator(".card").count() == 6
    widths = train.locator(".card img").evaluate_all(
        "imgs => imgs.map(i => i.complete ? i.naturalWidth : 0)"
    )
    assert len(widths) == 6 and all(w > 0 for w in widths)
    assert all(box["width"] > 100 for box in _boxes(train.locator(".card")))
    assert "samples 10" in train.locator("dl.summary").inner_text().replace("\n", " ")
    view.screenshot(tmp_path, "preview.png")

    card = train.locator(".card").nth(2)
    key = card.get_attribute("data-key")
    assert key and f"END-{key}" not in card.inner_text()  # the card shows the cut caption
    card.click()
    dialog = page.locator("dialog#detail")
    assert dialog.is_visible()
    assert f"END-{key}" in dialog.inner_text()  # the full text
    assert "jpg" in dialog.locator("table.parts").inner_text()
    view.screenshot(tmp_path, "preview-detail.png")
    dialog.locator(".close").click()
    assert not dialog.is_visible()

    page.get_by_role("tab", name="val (4)").click()
    assert val.is_visible() and not train.is_visible()
    assert val.locator(".card").count() == 4
    assert all(k.startswith("val_") for k in val.locator(".card").evaluate_all(
        "cards => cards.map(c => c.dataset.key)"
    ))  # fmt: skip
    assert view.errors == []


def test_bench_report_plots_render(dataset: Path, browser: Any, tmp_path: Path) -> None:
    settings = BenchSettings(str(dataset), workers=(0, 2), batches=4, batch_size=2, consumer_ms=5)
    out = tmp_path / "bench.html"
    out.write_text(render_bench_html(run_bench(settings)), encoding="utf-8")
    view = Page(browser, out)
    page = view.page
    assert page.locator("#runs tbody tr").count() == 2
    plots = page.locator("figure svg")
    assert plots.count() == 4  # throughput, data wait, memory, and time per stage (stats)
    for box in _boxes(plots):
        assert box["width"] > 200 and box["height"] > 100
    assert "recommended: num_workers=" in page.locator(".rec").inner_text()
    view.screenshot(tmp_path, "bench.png")
    assert view.errors == []


def _boxes(locator: Any) -> list[dict[str, float]]:
    return [locator.nth(i).bounding_box() for i in range(locator.count())]
