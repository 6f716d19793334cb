"""Thread workers on gloo ranks: saved on 2 ranks x 2 thread workers, restored on 1 rank x 4.

The same global sequence of micro-batches as the uninterrupted run, as with worker processes
(tests/integration/test_state_distributed.py runs those).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.contract.contract import write_text_dataset
from tests.integration.test_state_distributed import interleave, spawn

dist = pytest.importorskip("torch.distributed")
pytestmark = pytest.mark.skipif(not dist.is_available(), reason="no torch.distributed")

STEPS, AFTER = 4, 8


def test_thread_workers_save_on_2x2_and_restore_on_1x4(tmp_path: Path) -> None:
    root = write_text_dataset(tmp_path / "ds")
    out = tmp_path / "out"
    out.mkdir()
    spec: dict[str, Any] = {"mode": "save", "tag": "save", "dataset": str(root), "out": str(out),
                            "workers": 2, "steps": STEPS, "after": AFTER // 2,
                            "states_file": str(out / "states.pt"),
                            "worker_type": "thread"}  # fmt: skip
    saved = spawn(2, spec)
    for report in saved:
        assert report["head"] + report["tail"] == report["reference"]
    expected = interleave([r["reference"] for r in saved])[STEPS * 2 :]
    restore = {**spec, "mode": "restore", "tag": "restore_1x4", "workers": 4, "after": AFTER,
               "methods": ["global_all"]}  # fmt: skip
    (report,) = spawn(1, restore)
    assert report["global_all"] == expected
    assert len(expected) == AFTER
