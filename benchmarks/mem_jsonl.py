"""Memory of the loader's process tree over one JSONL file of many short lines.

A JSONL file's ``.idx`` holds 8 bytes per line: 80 MB at 10^7 lines, 800 MB at 10^8. This
script writes such a file once (``--lines``, ~30 bytes a line, under ``--data-dir``), then for
each tool and W runs a fresh process that reads ``--batches`` batches of 256 and samples the
tree's summed RSS and PSS every 20 batches, and the time to the first batch (imports included).

Usage::

    python benchmarks/mem_jsonl.py                            # 10^7 lines; stoker, W = 0 2 4
    python benchmarks/mem_jsonl.py --tools stoker,energon --workers 0 2
    python benchmarks/mem_jsonl.py --tools base,stoker --baseline-src /tmp/base/src
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

REPO = Path(__file__).resolve().parent.parent
RESULT = "MEM-RESULT "


def ensure_file(data_dir: Path, lines: int) -> Path:
    """``lines-<lines>.jsonl`` and its index (written once)."""
    from stoker.format.jsonl import prepare_jsonl

    path = data_dir / f"lines-{lines}.jsonl"
    if not Path(f"{path}.idx").exists():
        data_dir.mkdir(parents=True, exist_ok=True)
        print(f"writing {path} ...", flush=True)
        with open(path, "w") as f:
            for start in range(0, lines, 10**6):
                stop = min(lines, start + 10**6)
                f.write("".join(f'{{"id":{i},"text":"t{i}"}}\n' for i in range(start, stop)))
        prepare_jsonl(str(path))
    return path


def child(tool: str, workers: int, path: str, batches: int) -> dict[str, Any]:
    import psutil

    from _text import open_loader

    me = psutil.Process()
    started = time.perf_counter()
    loader = open_loader("stoker" if tool == "base" else tool, "jsonl", workers, Path(path))
    first = None
    rss = pss = 0
    for i, _ in enumerate(loader):
        first = first if first is not None else time.perf_counter() - started
        if i % 20 == 0:
            now = [0, 0]
            for p in (me, *me.children(recursive=True)):
                try:
                    info = p.memory_full_info()
                except psutil.Error:
                    continue
                now[0] += info.rss
                now[1] += info.pss
            rss, pss = max(rss, now[0]), max(pss, now[1])
        if i + 1 == batches:
            break
    return {"first_s": first, "rss_mb": rss / 2**20, "pss_mb": pss / 2**20}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", type=Path, default=REPO / "bench-data")
    parser.add_argument("--lines", type=float, default=1e7)
    parser.add_argument("--tools", default="stoker", help="stoker, energon, base")
    parser.add_argument("--workers", type=int, nargs="+", default=[0, 2, 4])
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--baseline-src", type=Path, help="the src folder --tools base runs")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        spec = json.loads(args.child)
        print(RESULT + json.dumps(child(**spec)), flush=True)
        return
    path = ensure_file(args.data_dir, int(args.lines))
    print(f"{path.name}: index {os.path.getsize(f'{path}.idx') / 2**20:.0f} MB")
    for workers in args.workers:
        for tool in args.tools.split(","):
            src = args.baseline_src if tool == "base" else REPO / "src"
            spec = {"tool": tool, "workers": workers, "path": str(path), "batches": args.batches}
            env = {
                **os.environ,
                "PYTHONPATH": f"{src}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
            }
            out = subprocess.run(
                [sys.executable, __file__, "--child", json.dumps(spec)],
                capture_output=True, text=True, env=env, check=True, timeout=900,
            ).stdout  # fmt: skip
            got = json.loads(out.split(RESULT, 1)[1])
            print(
                f"  {tool:<8} W={workers}: tree peak RSS {got['rss_mb']:6.0f} MB, "
                f"PSS {got['pss_mb']:5.0f} MB, first batch {got['first_s']:.2f} s",
                flush=True,
            )


if __name__ == "__main__":
    main()
