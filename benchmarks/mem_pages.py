"""Where a loader's process tree keeps its memory: its distinct pages, by kind and by sharer.

``bench_loader.py`` sums PSS over the tree, and PSS divides a page among *every* process that
maps it: a library page (libtorch's code) that another job on the machine also maps counts half
or less, so the same loader measures ~50 MB less while someone else runs torch. This script
counts each physical page the tree maps once, whoever else maps it, and says which of the
main process (M) and the workers (W0, W1, ...) map it:

- by kind: ``heap`` (glibc's main arena), ``anon`` (other private anonymous memory: Python's
  object arenas, thread arenas, large buffers), ``shm`` (shared memory: batch slots, segments),
  one line per torch library and ``so`` for the other libraries;
- for each worker's private pages: ``cow`` (a page it inherited from the main process and wrote
  to, so it has its own copy now; the main process keeps the original) or ``new`` (memory it
  allocated after the fork).

The loader runs in a child process (one of ``bench_loader.py``'s tools, or ``dataloader``: a
torch ``DataLoader`` over a trivial dataset, the floor of any loader built on it) and keeps
taking batches, as a training loop does, while its pages are read (``/proc/PID/pagemap``; the
physical page numbers need root). Usage::

    python benchmarks/mem_pages.py --tool stoker --dtype uint8 --workers 2
    python benchmarks/mem_pages.py --tool stoker-base --baseline-src /tmp/base/src
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _loaders import BASELINE, LOADERS, Config, import_tool, open_loader

REPO = Path(__file__).resolve().parent.parent
READY = "MEM-PAGES-READY"
PAGE_MB = 4096 / 2**20
PRESENT, PFN_MASK = 1 << 63, (1 << 55) - 1


# --- child side: a loader that keeps going --------------------------------------------------------


def child_main(spec: dict[str, Any]) -> None:
    """Take ``warmup`` batches, say so, then keep taking batches until stdin closes."""
    config = Config(**spec["config"])
    if config.tool == "dataloader":
        batches = _trivial_dataloader(config.workers)
    else:
        import_tool(config.tool)
        batches = iter(open_loader(config, Path(spec["path"])))
    for _ in range(spec["warmup"]):
        batch = next(batches)
    print(READY, flush=True)
    import select

    while not select.select([sys.stdin], [], [], 0)[0]:
        batch = next(batches)
    del batch
    os._exit(0)  # the parent has read what it wanted


def _trivial_dataloader(workers: int) -> Any:
    import torch.utils.data

    class Counting(torch.utils.data.IterableDataset[Any]):
        def __iter__(self) -> Any:
            i = 0
            while True:
                i += 1
                time.sleep(0.001)
                yield torch.tensor([i])

    return iter(torch.utils.data.DataLoader(Counting(), batch_size=None, num_workers=workers))


# --- parent side: the pages --------------------------------------------------------------------


def kind_of(name: str) -> str:
    if not name:
        return "anon"
    if name == "[heap]":
        return "heap"
    if name.startswith("["):
        return "other"
    if name.startswith(("/dev/zero", "/dev/shm", "/memfd:")) or name.endswith("(deleted)"):
        return "shm"
    base = os.path.basename(name)
    if ".so" in base:
        return base.split(".so")[0] if "torch" in base else "so"
    return "other"


def pages(pid: int) -> dict[int, tuple[int, str]]:
    """Virtual page address -> (physical page number, kind) of each present page of ``pid``."""
    maps = []
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            fields = line.split(maxsplit=5)
            lo, hi = (int(x, 16) for x in fields[0].split("-"))
            maps.append((lo, hi, kind_of(fields[5].strip() if len(fields) > 5 else "")))
    out: dict[int, tuple[int, str]] = {}
    with open(f"/proc/{pid}/pagemap", "rb") as f:
        for lo, hi, kind in maps:
            f.seek((lo >> 12) * 8)
            try:
                data = f.read(((hi - lo) >> 12) * 8)
            except OSError:  # [vsyscall]
                continue
            for i, (entry,) in enumerate(struct.iter_unpack("Q", data)):
                if entry & PRESENT and entry & PFN_MASK:
                    out[lo + (i << 12)] = (entry & PFN_MASK, kind)
    return out


def account(pids: list[int]) -> dict[str, Any]:
    """Distinct pages by kind and sharers, and each worker's private pages as cow/new."""
    labels = ["M"] + [f"W{i}" for i in range(len(pids) - 1)]
    per = [pages(pid) for pid in pids]
    sharers: dict[int, set[int]] = collections.defaultdict(set)
    kind: dict[int, str] = {}
    for i, mapped in enumerate(per):
        for pfn, k in mapped.values():
            sharers[pfn].add(i)
            kind.setdefault(pfn, k)
    table: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for pfn, who in sharers.items():
        table[kind[pfn]]["+".join(labels[i] for i in sorted(who))] += 1
    private = {}
    main = per[0]
    for i in range(1, len(per)):
        counts: collections.Counter[str] = collections.Counter()
        for va, (pfn, k) in per[i].items():
            if k in ("heap", "anon") and sharers[pfn] == {i}:
                counts[f"{k} {'cow' if va in main else 'new'}"] += 1
        private[labels[i]] = {k: round(n * PAGE_MB, 1) for k, n in sorted(counts.items())}
    kinds = {
        k: {who: round(n * PAGE_MB, 1) for who, n in c.most_common()} for k, c in table.items()
    }
    total = round(len(sharers) * PAGE_MB, 1)
    return {"total_mb": total, "kinds": kinds, "worker_private_mb": private}


def measure(args: argparse.Namespace, tool: str) -> dict[str, Any]:
    """Start ``tool``'s loader in a child, let it warm up, and account its tree's pages."""
    config = {"tool": tool, "workers": args.workers, "dtype": args.dtype}
    spec = {"config": config, "path": str(args.data_dir / "photos-20x1000"), "warmup": args.warmup}
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    if tool == BASELINE:
        env["PYTHONPATH"] = os.pathsep.join([str(args.baseline_src), env.get("PYTHONPATH", "")])
    cmd = [sys.executable, __file__, "--child", json.dumps(spec)]
    # the child's errors go to a file: its workers complain when it is killed at the end
    with tempfile.TemporaryFile() as errors:
        proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors, env=env, cwd=REPO
        )
        try:
            assert proc.stdout is not None
            if not any(line.decode().startswith(READY) for line in proc.stdout):
                errors.seek(0)
                raise RuntimeError(f"{tool}: the child failed\n{errors.read().decode()[-4000:]}")
            time.sleep(args.settle)
            return {"tool": tool, **tree_pages(proc.pid)}
        finally:
            proc.kill()
            proc.wait()


def tree_pages(pid: int) -> dict[str, Any]:
    """PSS of each process of ``pid``'s tree (itself first) and :func:`account` of its pages."""
    import psutil

    root = psutil.Process(pid)
    pids = [root.pid] + [p.pid for p in root.children(recursive=True)]
    pss = [round(psutil.Process(p).memory_full_info().pss / 2**20, 1) for p in pids]
    return {"pss_mb": pss, **account(pids)}


def report(result: dict[str, Any]) -> None:
    pss = result["pss_mb"]
    print(
        f"{result['tool']}: {result['total_mb']:.1f} MB of distinct pages; "
        f"PSS {sum(pss):.1f} MB ({' + '.join(map(str, pss))})"
    )
    for kind, by in sorted(result["kinds"].items(), key=lambda kv: -sum(kv[1].values())):
        parts = ", ".join(f"{who} {mb}" for who, mb in by.items() if mb >= 0.3)
        if sum(by.values()) >= 0.3:
            print(f"  {kind:<18} {sum(by.values()):7.1f} MB  [{parts}]")
    for worker, counts in result["worker_private_mb"].items():
        print(f"  {worker} private: {', '.join(f'{k} {v}' for k, v in counts.items())}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tools", default="stoker", help=f"comma-separated: {LOADERS}, ...")
    parser.add_argument("--dtype", default="uint8", choices=("uint8", "float"))
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=60, help="batches before reading pages")
    parser.add_argument("--settle", type=float, default=1.0, help="seconds after the warm-up")
    parser.add_argument("--data-dir", type=Path, default=REPO / "bench-data")
    parser.add_argument("--baseline-src", type=Path, help="src/ folder of tool stoker-base")
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child_main(json.loads(args.child))
        return 0
    if os.geteuid() != 0:
        print("physical page numbers need root (/proc/PID/pagemap)", file=sys.stderr)
        return 2
    results = [measure(args, tool) for tool in args.tools.split(",") if tool]
    for result in results:
        report(result)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
