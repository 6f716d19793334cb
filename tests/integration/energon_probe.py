"""Load every split of a prepared dataset with the real Megatron-Energon; print a JSON line each.

Run in a subprocess by ``test_energon_interop.py`` (Energon imports torch and may warn, which
pytest would turn into errors). Usage: ``python energon_probe.py PATH SPLIT [SPLIT ...]``.

Each line: ``{"split", "key", "caption", "shape", "mean"}`` where ``shape`` is the image
tensor's shape (C, H, W) and ``mean`` the mean of each channel on a 0..255 scale.
"""

from __future__ import annotations

import json
import sys
from typing import Any


def probe(path: str, split: str) -> list[dict[str, Any]]:
    from megatron.energon import WorkerConfig, get_loader, get_val_dataset

    worker_config = WorkerConfig(rank=0, world_size=1, num_workers=0)
    dataset = get_val_dataset(path, split_part=split, worker_config=worker_config, batch_size=1)
    rows = []
    for batch in get_loader(dataset):
        # A batch of one CaptioningSample: list fields hold one item, tensors have a batch dim.
        image = batch.image[0]
        scale = 255.0 if image.is_floating_point() else 1.0
        mean = (image.double() * scale).mean(dim=(1, 2)).tolist()
        rows.append(
            {
                "split": split,
                "key": batch.__key__[0],
                "caption": batch.caption[0],
                "shape": list(image.shape),
                "mean": mean,
            }
        )
    return rows


def main(argv: list[str]) -> int:
    path, splits = argv[0], argv[1:]
    for split in splits:
        for row in probe(path, split):
            print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
