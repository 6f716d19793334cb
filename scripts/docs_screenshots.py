"""Screenshots of the HTML pages for the docs (docs/img/*.png), taken by headless Chromium.

Made from the demo data (`make demo` writes demo-data/shards):

    stoker preview demo-data/shards -n 18 --shuffle --seed 4 --split-parts train,val \\
        --html /tmp/preview.html
    stoker bench demo-data/shards --workers 0,1,2 --consumer-ms 20 --html /tmp/bench.html
    python scripts/docs_screenshots.py /tmp/preview.html /tmp/bench.html docs/img

Needs /usr/bin/chromium (`make install` adds it) and the playwright package (dev group).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from playwright.sync_api import sync_playwright


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("preview", type=Path)
    parser.add_argument("bench", type=Path)
    parser.add_argument("out", type=Path)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium")
        page = browser.new_page(viewport={"width": 1100, "height": 640})
        page.goto(args.preview.resolve().as_uri())
        page.screenshot(path=str(args.out / "preview.png"))
        page.locator("#tab-0 .card").nth(1).click()
        page.screenshot(path=str(args.out / "preview-detail.png"))
        page = browser.new_page(viewport={"width": 1100, "height": 760})
        page.goto(args.bench.resolve().as_uri())
        page.screenshot(path=str(args.out / "bench.png"), full_page=True)
        browser.close()
    print(f"wrote preview.png, preview-detail.png and bench.png to {args.out}")


if __name__ == "__main__":
    main()
