"""Data for the Megatron-LM multimodal patterns: a captioning dataset, an SFT VQA dataset read
through a ``sample_loader.py``, and an SFT blend over both (a Metadataset YAML with weights and
subflavors, the shape of Megatron-LM's ``examples/multimodal/sft_dataset.yaml``).

Shared by the test (which prepares the data and checks the batches) and the client script (which
tokenizes the same way).
"""

from __future__ import annotations

import io
import json
from pathlib import Path

from tests.conftest import write_shard

COLOURS = ["red", "green", "blue", "yellow"]
SHAPES = ["circle", "square", "triangle"]
WORDS = ["a", "what", "colour", "is", "the", *COLOURS, *SHAPES]
#: Placeholder tokens per image (Megatron-LM repeats the image token per embedding).
IMAGE_TOKENS = 2
IMAGE_TOKEN = -200
IGNORE = -100
SAMPLE_LOADER = '''\
def sample_loader(raw: dict) -> dict:
    """The VQA fields of an SFT sample: image, question and answer from the json part."""
    return {"image": raw["png"], "context": raw["json"]["q"], "answers": [raw["json"]["a"]]}


def part_filter(part: str) -> bool:
    return part in ("png", "json")
'''


def tokenize(text: str) -> list[int]:
    """Word ids (1-based indices into :data:`WORDS`)."""
    return [WORDS.index(word) + 1 for word in text.split()]


def detokenize(tokens: list[int]) -> str:
    return " ".join(WORDS[t - 1] for t in tokens)


def caption(index: int) -> str:
    return f"a {COLOURS[index % 4]} {SHAPES[index % 3]}"


def question(index: int) -> tuple[str, str]:
    return f"what colour is the {SHAPES[index % 3]}", COLOURS[index % 4]


def target_of(key: str) -> str:
    """The words a sample with ``key`` trains on: the caption, or the answer."""
    kind, index = key.split("_")[0], int(key.rsplit("_", 1)[1])
    return caption(index) if kind == "cap" else question(index)[1]


def image_bytes(index: int, fmt: str) -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (8 + 4 * (index % 2), 8), (index * 20 % 256, 64, 128)).save(buffer, fmt)
    return buffer.getvalue()


def write_captions(root: Path, train: int = 16, val: int = 4) -> Path:
    """A captioning dataset (``jpg`` + ``txt``) with ``train``/``val`` shards."""
    from stoker import prepare_dataset

    samples = [(f"cap_{i:04d}", {"jpg": image_bytes(i, "JPEG"), "txt": caption(i).encode()})
               for i in range(train + val)]  # fmt: skip
    write_shard(root / "train-000.tar", samples[: train // 2])
    write_shard(root / "train-001.tar", samples[train // 2 : train])
    write_shard(root / "val-000.tar", samples[train:])
    prepare_dataset(
        str(root),
        split_parts=[("train", "train-"), ("val", "val-")],
        dataset_yaml={
            "sample_type": {"__module__": "megatron.energon", "__class__": "CaptioningSample"},
            "field_map": {"image": "jpg", "caption": "txt"},
        },
    )
    return root


def write_sft(root: Path, train: int = 12, val: int = 4) -> Path:
    """An SFT dataset (``png`` + ``json`` + an ignored ``meta`` part) read by a sample loader."""
    from stoker import prepare_dataset

    samples = []
    for i in range(train + val):
        q, a = question(i)
        parts = {"png": image_bytes(i, "PNG"), "json": json.dumps({"q": q, "a": a}).encode()}
        samples.append((f"sft_{i:04d}", {**parts, "meta": b"not read"}))
    write_shard(root / "train-000.tar", samples[:train])
    write_shard(root / "val-000.tar", samples[train:])
    (root / ".nv-meta").mkdir(parents=True, exist_ok=True)
    (root / ".nv-meta" / "sample_loader.py").write_text(SAMPLE_LOADER)
    prepare_dataset(str(root), split_parts=[("train", "train-"), ("val", "val-")])
    (root / ".nv-meta" / "dataset.yaml").write_text(
        "sample_type:\n  __module__: megatron.energon\n  __class__: VQASample\n"
        "sample_loader: sample_loader.py:sample_loader\n"
        "part_filter: sample_loader.py:part_filter\n"
    )
    return root


def write_sft_blend(root: Path) -> Path:
    """Both datasets and the SFT blend YAML over them (train 1:2 by weight, val both)."""
    captions = write_captions(root / "captions")
    sft = write_sft(root / "sft")
    blend = root / "sft_blend.yaml"
    blend.write_text(
        f"""__module__: megatron.energon
__class__: Metadataset
splits:
  train:
    datasets:
      - weight: 1.
        path: {captions}
        subflavors:
          augmentation: false
          source: captions
      - weight: 2.
        path: {sft}
        subflavors:
          augmentation: false
          source: sft
  val:
    datasets:
      - weight: 1.
        path: {captions}
        subflavors:
          source: captions
      - weight: 1.
        path: {sft}
        subflavors:
          source: sft
"""
    )
    return blend


def write_pretrain(root: Path, captions: Path) -> Path:
    """The pretraining metadataset (Megatron-LM's ``pretrain_dataset.yaml``): one dataset."""
    path = root / "pretrain_dataset.yaml"
    path.write_text(
        f"""__module__: megatron.energon
__class__: Metadataset
splits:
  train:
    datasets:
      - weight: 1.
        path: {captions}
        subflavors:
          augmentation: false
          source: captions
  val:
    datasets:
      - weight: 1.
        path: {captions}
        subflavors:
          augmentation: false
          source: captions
"""
    )
    return path
