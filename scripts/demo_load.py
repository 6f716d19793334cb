"""The demo's loading step: batches from the prepared dataset, as a training loop sees them.

Usage: python scripts/demo_load.py DATASET
"""

from __future__ import annotations

import json
import sys
import time

from stoker import (
    DefaultTaskEncoder,
    LoaderDataset,
    SampleDecoder,
    WorkerConfig,
    get_loader,
    get_savable_loader,
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
    print(f"50 training batches of 16 in {seconds:.2f} s ({800 / seconds:.0f} samples/s),")
    print(f"first batch after {first:.2f} s (2 worker processes).")
    loader.close()

    save_and_restore(train)

    val = get_val_dataset(path, worker_config=worker_config, batch_size=16)
    keys = [key for batch in get_loader(val) for key in batch.__key__]
    print(
        f"validation pass: {len(keys)} samples in {len(val)} batches, each sample once: "
        f"{len(keys) == len(set(keys))}"
    )


def save_and_restore(train: LoaderDataset) -> None:
    """Save mid-epoch, restore into a new loader, and check the next batches match."""
    loader = get_savable_loader(train)
    batches = iter(loader)
    for _ in range(20):
        next(batches)
    start = time.perf_counter()
    state = loader.save_state_rank()
    saved_ms = (time.perf_counter() - start) * 1e3
    expected = [next(batches).__key__ for _ in range(3)]
    loader.close()

    start = time.perf_counter()
    restored = get_savable_loader(train)
    restored.restore_state_rank(json.loads(json.dumps(state)))
    resumed = iter(restored)
    got = [next(resumed).__key__]
    restore_s = time.perf_counter() - start
    got += [next(resumed).__key__ for _ in range(2)]
    restored.close()
    print(
        f"saved after 20 batches in {saved_ms:.2f} ms ({len(json.dumps(state))} bytes of JSON); "
        f"restored to the first batch in {restore_s:.2f} s; next 3 batches match: {got == expected}"
    )


if __name__ == "__main__":
    main(sys.argv[1])
