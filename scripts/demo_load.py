"""The demo's loading step: batches from the prepared dataset, as a training loop sees them.

Usage: python scripts/demo_load.py DATASET
"""

from __future__ import annotations

import sys
import time

from stoker import (
    DefaultTaskEncoder,
    SampleDecoder,
    WorkerConfig,
    get_loader,
    get_train_dataset,
    get_val_dataset,
)


class Uint8Images(DefaultTaskEncoder):  # type: ignore[type-arg]
    """Images stay uint8 (convert to float on the accelerator); the rest is the default."""

    decoder = SampleDecoder(image_decode="torchrgb8")


def main(path: str) -> None:
    worker_config = WorkerConfig(rank=0, world_size=1, num_workers=2)
    train = get_train_dataset(
        path,
        worker_config=worker_config,
        batch_size=16,
        shuffle_buffer_size=32,
        max_samples_per_sequence=10,
        task_encoder=Uint8Images(),
    )
    start = time.perf_counter()
    loader = get_loader(train)
    for step, batch in enumerate(loader):
        if step == 0:
            first = time.perf_counter() - start
        if step < 3:
            print(
                f"batch {step}: image {tuple(batch.image.shape)} {batch.image.dtype}, "
                f"captions {batch.caption[:3]}, keys {batch.__key__[:2]}"
            )
        if step == 49:
            break
    seconds = time.perf_counter() - start
    print(f"50 training batches of 16 in {seconds:.2f} s ({800 / seconds:.0f} samples/s), ")
    print(f"first batch after {first:.2f} s (2 worker processes).")
    loader.close()

    val = get_val_dataset(path, worker_config=worker_config, batch_size=16)
    keys = [key for batch in get_loader(val) for key in batch.__key__]
    print(
        f"validation pass: {len(keys)} samples in {len(val)} batches, each sample once: "
        f"{len(keys) == len(set(keys))}"
    )


if __name__ == "__main__":
    main(sys.argv[1])
