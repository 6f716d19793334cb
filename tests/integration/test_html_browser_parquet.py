"""`stoker preview --html` of a Parquet dataset with a Hugging Face ``Image`` column, in headless
Chromium: every card's thumbnail loads, the caption column is the card's text, and the detail
dialog lists the columns with their sizes; no console error."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_html_browser import CHROMIUM, Page, browser, caption, jpeg

datasets = pytest.importorskip("datasets")
pytestmark = pytest.mark.skipif(
    not os.access(CHROMIUM, os.X_OK), reason="no /usr/bin/chromium (make install adds it)"
)
__all__ = ["browser"]  # the fixture, shared with the tar gallery's tests


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One file of 6 rows: a JPEG ``image`` column (48x64), a long ``text`` caption, a number."""
    root = tmp_path_factory.mktemp("pq-browser") / "shapes"
    (root / "data").mkdir(parents=True)
    features = datasets.Features(
        {"image": datasets.Image(), "text": datasets.Value("string"), "n": datasets.Value("int64")}
    )
    table = datasets.Dataset.from_dict(
        {
            "image": [{"bytes": jpeg(i), "path": None} for i in range(6)],
            "text": [caption(f"row{i}") for i in range(6)],
            "n": list(range(6)),
        },
        features=features,
    )
    table.to_parquet(str(root / "data" / "train-00000-of-00001.parquet"))
    return root


def test_parquet_preview_gallery(folder: Path, browser: Any, tmp_path: Path) -> None:
    out = tmp_path / "preview.html"
    result = subprocess.run(
        [sys.executable, "-m", "stoker.cli.main", "preview", str(folder), "-n", "6",
         "--html", str(out)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    view = Page(browser, out)
    page = view.page
    cards = page.locator("#tab-0 .card")
    assert cards.count() == 6
    widths = cards.locator("img").evaluate_all(
        "imgs => imgs.map(i => i.complete ? i.naturalWidth : 0)"
    )
    assert len(widths) == 6 and all(w > 0 for w in widths)
    assert "Parquet (crude)" in page.content()
    view.screenshot(tmp_path, "parquet-preview.png")

    card = cards.nth(3)
    assert "caption of row3" in card.inner_text() and "END-row3" not in card.inner_text()
    card.click()
    dialog = page.locator("dialog#detail")
    assert dialog.is_visible()
    assert "END-row3" in dialog.inner_text()
    columns = dialog.locator("table.parts").inner_text()
    assert "image" in columns and "text" in columns
    assert "int 3" in dialog.locator("table.fields").inner_text()  # the number column
    assert view.errors == []
