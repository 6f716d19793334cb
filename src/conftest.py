"""The data the docstring examples of ``src/stoker`` run on (``make test`` runs them).

Every example runs in one folder, made once per session, that holds what the examples name:

- ``raw/``: 60 JPEG images with a caption file each (``000000.jpg`` + ``000000.txt``), what a
  user starts from before :func:`stoker.format.pack.pack`;
- ``coco-wds/`` and ``coyo-wds/``: those packed and prepared as ``CaptioningSample`` datasets
  (``coco-wds``: 60 samples, 40/10/10 in train/val/test; ``coyo-wds``: 20, 10/10 in
  train/val);
- ``coco-recap/``: the images of ``coco-wds`` again, with longer captions, all in ``train``;
- ``mix.yaml``: a metadataset blending them 0.7 : 0.3 for training (both in ``val``);
- ``joined.yaml``: a metadataset joining ``coco-wds`` and ``coco-recap`` by sample key;
- ``texts.jsonl``: 100 lines ``{"text": ...}``;
- ``corpus_text_document.bin`` / ``.idx``: 1,000 Megatron documents (megatron-core's writer);
- ``laion/``: a Parquet dataset of 24 rows ``{"caption", "width"}`` in two files;
- ``clips/clip_007.mp4``: a 10 s, 30 fps H.264 video of 64x48 frames, its metadata stored by
  ``prepare-media``.

Names ready in every example: ``wc`` (one rank, no workers), ``path`` (``"coco-wds"``),
``train_ds`` / ``val_ds`` (batches of 4), ``loader`` (a loader of ``val_ds``) and
``mp4_bytes`` (the clip's bytes), ``tokenizer`` and ``image_processor`` (those of
``examples/vlm_data.py``).
"""

from __future__ import annotations

import json
import random
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

COLOURS = {"red": (220, 40, 40), "green": (40, 170, 60), "blue": (40, 80, 220)}
SHAPES = ("circle", "square")

MIX = """\
__module__: megatron.energon
__class__: MetadatasetV2
splits:
  train:
    blend:
      - weight: 0.7
        path: coco-wds
        subflavors: {source: coco}
      - weight: 0.3
        path: coyo-wds
  val:
    blend:
      - path: coco-wds
        subflavors: {source: coco}
      - path: coyo-wds
"""

JOINED = """\
__module__: megatron.energon
__class__: MetadatasetV2
splits:
  train:
    join:
      - path: coco-wds
      - path: coco-recap
    joiner: {__module__: stoker, __class__: CaptioningSample}
"""


def _raw(root: Path, count: int, seed: int, caption: str = "a {} {}") -> None:
    from PIL import Image, ImageDraw

    rng = random.Random(seed)
    root.mkdir(parents=True)
    for i in range(count):
        colour, shape = rng.choice(list(COLOURS)), rng.choice(SHAPES)
        image = Image.new("RGB", (64, 48), (245, 245, 240))
        box = (16, 8, 48, 40)
        draw = ImageDraw.Draw(image)
        (draw.ellipse if shape == "circle" else draw.rectangle)(box, fill=COLOURS[colour])
        image.save(root / f"{i:06d}.jpg", quality=90)
        (root / f"{i:06d}.txt").write_text(caption.format(colour, shape))


def _captioning(raw: Path, out: Path, ratio: str) -> None:
    from stoker.format.dataset_config import make_dataset_yaml
    from stoker.format.pack import pack
    from stoker.format.prepare import prepare_dataset

    pack(str(raw), str(out), samples_per_shard=10)
    yaml = make_dataset_yaml("CaptioningSample", {"image": "jpg", "caption": "txt"})
    prepare_dataset(str(out), split_ratio=ratio, dataset_yaml=yaml)


def _parquet(root: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    (root / "data").mkdir(parents=True)
    for f in range(2):
        rows = range(12 * f, 12 * f + 12)
        table = pa.table({"caption": [f"caption {i}" for i in rows], "width": list(rows)})
        pq.write_table(table, root / "data" / f"train-{f:05d}-of-00002.parquet", row_group_size=6)


def _tokens(prefix: Path) -> None:
    import torch

    with warnings.catch_warnings():  # megatron-core warns that Apex is missing
        warnings.simplefilter("ignore")
        from megatron.core.datasets.indexed_dataset import IndexedDatasetBuilder

    rng = np.random.default_rng(0)
    builder = IndexedDatasetBuilder(f"{prefix}.bin", dtype=np.int32)
    for _ in range(1000):
        tokens = rng.integers(1, 30000, int(rng.integers(1, 41)))
        builder.add_item(torch.from_numpy(np.append(tokens, 0)))
        builder.end_document()
    builder.finalize(f"{prefix}.idx")


def _video(path: Path) -> None:
    from tests.integration._media import make_video

    path.parent.mkdir(parents=True)
    path.write_bytes(make_video("mp4", frames=300, audio=False))


@pytest.fixture(scope="session")
def docs_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder of the examples' data (see the module's docstring)."""
    from stoker.media.extract import MediaFilter
    from stoker.media.filesystem import prepare_folder_media

    root = tmp_path_factory.mktemp("docs-data")
    _raw(root / "raw", 60, seed=0)
    _captioning(root / "raw", root / "coco-wds", "8,1,1")
    _raw(root / "raw-coyo", 20, seed=1)
    _captioning(root / "raw-coyo", root / "coyo-wds", "1,1,0")
    _raw(root / "raw-recap", 60, seed=0, caption="a photo of a {} {} on white")
    _captioning(root / "raw-recap", root / "coco-recap", "1,0,0")
    (root / "mix.yaml").write_text(MIX)
    (root / "joined.yaml").write_text(JOINED)
    lines = (json.dumps({"text": f"line {i}"}) for i in range(100))
    (root / "texts.jsonl").write_text("\n".join(lines) + "\n")
    _tokens(root / "corpus_text_document")
    _parquet(root / "laion")
    _video(root / "clips" / "clip_007.mp4")
    prepare_folder_media(str(root / "clips"), MediaFilter.parse(extension=True))
    return root


@pytest.fixture(scope="session")
def vlm(docs_data: Path) -> tuple[Any, Any]:
    """The tokenizer (trained on the training captions of ``coco-wds``) and the image
    processor of ``examples/vlm_data.py``."""
    from examples.vlm_data import ResizeNormalize, WordTokenizer, captions

    return WordTokenizer(captions(str(docs_data / "coco-wds"))), ResizeNormalize(16)


@pytest.fixture(autouse=True)
def _examples_namespace(
    docs_data: Path,
    vlm: tuple[Any, Any],
    doctest_namespace: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from stoker import WorkerConfig, get_loader, get_train_dataset, get_val_dataset

    monkeypatch.chdir(docs_data)
    wc = WorkerConfig(rank=0, world_size=1, num_workers=0)
    val_ds = get_val_dataset("coco-wds", split_part="val", worker_config=wc, batch_size=4)
    doctest_namespace.update(
        wc=wc,
        path="coco-wds",
        val_ds=val_ds,
        train_ds=get_train_dataset(
            "coco-wds",
            worker_config=wc,
            batch_size=4,
            shuffle_buffer_size=10,
            max_samples_per_sequence=10,
        ),
        loader=get_loader(val_ds),
        tokenizer=vlm[0],
        image_processor=vlm[1],
        mp4_bytes=(docs_data / "clips" / "clip_007.mp4").read_bytes(),
    )
