"""Files that some docs code blocks expect beside the demo data (``<!-- setup: NAME -->``).

Each setup gets the block's working folder, which already holds a copy of the demo data
(``demo-data/raw`` and the prepared ``demo-data/shards``), and the test's fixture request; it adds
what its block reads and returns environment variables the block runs with.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest

Env = dict[str, str]


def unprepared(work: Path, request: pytest.FixtureRequest) -> Env:
    """``demo-data/shards`` as `stoker pack` left it: shards without ``.nv-meta``."""
    shutil.rmtree(work / "demo-data/shards/.nv-meta")
    for index in (work / "demo-data/shards").glob("*.tar.idx"):
        index.unlink()
    return {}


def texts_jsonl(work: Path, request: pytest.FixtureRequest) -> Env:
    """``demo-data/texts.jsonl``: 300 documents of 20-1500 characters, indexed."""
    from stoker.format.jsonl import prepare_jsonl

    path = work / "demo-data/texts.jsonl"
    with path.open("w") as f:
        for i in range(300):
            f.write(json.dumps({"text": f"document {i} " + "word " * (4 + i * 37 % 300)}) + "\n")
    prepare_jsonl(str(path))
    return {}


def loader_states(work: Path, request: pytest.FixtureRequest) -> Env:
    """``ckpt/state_rank{0,1}.pt`` (2 ranks, 4 virtual workers) and ``loader_states.pt``."""
    script = """
import torch
from stoker import WorkerConfig, get_savable_loader, get_train_dataset

states = []
for rank in range(2):
    wc = WorkerConfig(rank=rank, world_size=2, num_workers=0)  # as 2 x 2 workers, in-process
    ds = get_train_dataset("demo-data/shards", worker_config=wc, batch_size=4, virtual_workers=4,
                           shuffle_buffer_size=10, max_samples_per_sequence=10)
    loader = get_savable_loader(ds)
    for step, _ in enumerate(loader):
        if step == 3:
            break
    states.append(loader.save_state_rank())
    torch.save(states[-1], f"ckpt/state_rank{rank}.pt")
    loader.close()
torch.save(states, "loader_states.pt")
"""
    (work / "ckpt").mkdir()
    subprocess.run([sys.executable, "-c", script], cwd=work, check=True, timeout=120)
    return {}


def aux_captions(work: Path, request: pytest.FixtureRequest) -> Env:
    """docs/cookers.md's worked example: its metadataset YAML as ``example.yaml``, the prepared
    image dataset ``images/``, the folder ``folder/`` and ``captions.jsonl`` naming images in both.
    """
    from PIL import Image

    from stoker import prepare_dataset
    from stoker.format.jsonl import prepare_jsonl

    page = (Path(__file__).parents[2] / "docs/cookers.md").read_text()
    (work / "example.yaml").write_text(page.split("```yaml\n", 1)[1].split("```", 1)[0])
    jpgs = sorted((work / "demo-data/raw").rglob("*.jpg"))[:8]
    pngs = [f"img_{i:03d}.png" for i in range(4)] + [f"sub/file_{i:03d}.png" for i in range(4, 8)]
    (work / "images").mkdir()
    (work / "folder/sub").mkdir(parents=True)
    with tarfile.open(work / "images/images-0.tar", "w") as tar:
        for jpg, png in zip(jpgs, pngs, strict=True):
            target = work / ("folder" if png.startswith("sub/") else "images") / png
            Image.open(jpg).save(target)
            if not png.startswith("sub/"):
                tar.add(target, arcname=png)
                target.unlink()
    prepare_dataset(str(work / "images"), split_ratio="1,0,0")
    with (work / "captions.jsonl").open("w") as f:
        for i, png in enumerate(pngs):
            store = "files" if png.startswith("sub/") else "images"
            f.write(json.dumps({"caption": f"caption {i}", "image": png, "store": store}) + "\n")
    prepare_jsonl(str(work / "captions.jsonl"))
    return {}


def s3_bucket(work: Path, request: pytest.FixtureRequest) -> Env:
    """The prepared demo dataset at ``s3://my-bucket/datasets/coco`` on the session's S3 server
    (tests/s3server.py), reached through the standard AWS variables."""
    weed = request.getfixturevalue("weed")
    s3 = weed.client()
    if "my-bucket" not in [b["Name"] for b in s3.list_buckets()["Buckets"]]:
        s3.create_bucket(Bucket="my-bucket")
    shards = work / "demo-data/shards"
    for path in sorted(p for p in shards.rglob("*") if p.is_file()):
        key = f"datasets/coco/{path.relative_to(shards).as_posix()}"
        s3.put_object(Bucket="my-bucket", Key=key, Body=path.read_bytes())
    return {
        "AWS_ENDPOINT_URL": weed.endpoint,
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_REGION": "us-east-1",
        "STOKER_CACHE_DIR": str(work / "cache"),
    }


SETUPS: dict[str, Callable[[Path, pytest.FixtureRequest], Env]] = {
    "unprepared": unprepared,
    "texts.jsonl": texts_jsonl,
    "loader states": loader_states,
    "aux captions": aux_captions,
    "s3 bucket": s3_bucket,
}
