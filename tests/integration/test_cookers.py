"""Crude data cooked by the task encoder's cookers, with aux stores from a metadataset.

The worked example of ``docs/cookers.md``: JSONL lines name images; a cooker builds a
``CaptioningSample`` from each line's text and the image fetched from an aux store (a prepared
image dataset, or a plain folder). Also: two crude tar datasets told apart by subflavors and
cooked by two cookers, errors through the error policy, and save/restore over cooked data.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from stoker import (
    CaptioningSample,
    Cooker,
    ErrorPolicy,
    FileStore,
    SampleDecoder,
    SampleError,
    TaskEncoder,
    TextSample,
    WorkerConfig,
    basic_sample_keys,
    cooker,
    get_loader,
    get_train_dataset,
    stateless,
)
from stoker.errors import ConfigError
from stoker.format.dataset_config import make_dataset_yaml
from stoker.format.jsonl import prepare_jsonl
from stoker.format.prepare import prepare_dataset
from stoker.runtime.loader import Loader
from tests.conftest import write_shard
from tests.contract.contract import run_contract
from tests.integration._images import colour_of

HEADER = "__module__: megatron.energon\n__class__: MetadatasetV2\nsplits:\n"
LINES = 24


# --- the worked example (docs/cookers.md) -------------------------------------------------------
@stateless
def cook_caption(sample: dict[str, Any], images: FileStore, files: FileStore) -> CaptioningSample:
    """One JSONL line -> a captioned image fetched from the aux store the line names."""
    line = sample["json"]
    store = images if line["store"] == "images" else files
    image = store.get(line["image"], sample)  # decoded by extension; source recorded
    return CaptioningSample(**basic_sample_keys(sample), image=image, caption=line["caption"])


class CaptionEncoder(TaskEncoder[Any, Any, Any, Any]):
    decoder = SampleDecoder(image_decode="torchrgb8")
    cookers = (Cooker(cook_caption, has_subflavors={"source": "captions"}),)


# -------------------------------------------------------------------------------------------------


def png(colour: tuple[int, int, int]) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (8, 6), colour).save(buf, format="PNG")
    return buf.getvalue()


def image_name(i: int) -> str:
    return f"img_{i:03d}.png" if i % 2 == 0 else f"sub/file_{i:03d}.png"


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("cookers")
    # Even lines: images in a prepared dataset (members img_000.png, ...); odd: a plain folder.
    samples = [(f"img_{i:03d}", {"png": png(colour_of(image_name(i)))}) for i in range(0, LINES, 2)]
    write_shard(base / "images" / "images_0.tar", samples)
    prepare_dataset(
        str(base / "images"),
        split_parts=[("train", "images_")],
        dataset_yaml=make_dataset_yaml("CrudeWebdataset"),
    )
    for i in range(1, LINES, 2):
        path = base / "folder" / image_name(i)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(png(colour_of(image_name(i))))
    lines = [
        {
            "caption": f"caption {i}",
            "image": image_name(i),
            "store": "images" if i % 2 == 0 else "files",
        }
        for i in range(LINES)
    ]
    write_jsonl(base / "captions.jsonl", lines)
    write_jsonl(base / "broken.jsonl", [*lines[:3], {**lines[0], "image": "img_999.png"}])
    for name, text in (("crude_a", "Hello World"), ("crude_b", "Good Night")):
        shard = [(f"{name}_{i:02d}", {"txt": f"{text} {i}".encode()}) for i in range(10)]
        write_shard(base / name / "part_0.tar", shard)
        prepare_dataset(
            str(base / name),
            split_parts=[("train", "part_")],
            dataset_yaml=make_dataset_yaml("CrudeWebdataset"),
        )
    (base / "example.yaml").write_text(
        HEADER + "  train:\n    path: ./captions.jsonl\n    subflavors: {source: captions}\n"
        "    aux:\n      images: ./images\n      files: filesystem://./folder\n"
    )
    return base


def write_jsonl(path: Path, lines: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    prepare_jsonl(str(path))


def config(workers: int) -> WorkerConfig:
    return WorkerConfig(rank=0, world_size=1, num_workers=workers)


def train(path: Path, workers: int = 0, **options: Any) -> Any:
    options = {"batch_size": None, "shuffle_buffer_size": 8, "max_samples_per_sequence": 4,
               "task_encoder": CaptionEncoder(), "repeat": False, **options}  # fmt: skip
    return get_train_dataset(str(path), worker_config=config(workers), **options)


@pytest.mark.parametrize("workers", [0, 2])
def test_jsonl_text_with_aux_images(root: Path, workers: int) -> None:
    dataset = get_train_dataset(
        str(root / "example.yaml"),
        worker_config=config(workers),
        batch_size=4,
        shuffle_buffer_size=8,
        max_samples_per_sequence=4,
        task_encoder=CaptionEncoder(),
        repeat=False,
    )
    seen: dict[str, tuple[int, ...]] = {}
    with get_loader(dataset) as loader:
        for batch in loader:
            assert isinstance(batch, CaptioningSample)
            assert tuple(batch.image.shape[1:]) == (3, 6, 8)
            for caption, image in zip(batch.caption, batch.image, strict=True):
                seen[caption] = tuple(image[:, 3, 4].tolist())
    assert len(seen) == LINES
    for i in range(LINES):
        assert seen[f"caption {i}"] == colour_of(image_name(i)), i


def test_aux_fetch_is_recorded_in_sources(root: Path) -> None:
    dataset = train(root / "example.yaml")
    with get_loader(dataset) as loader:
        sample = next(iter(loader))
    files = [name for source in sample.__sources__ for name in source.file_names]
    assert sample.__subflavors__ == {"source": "captions"}
    assert any(name.endswith(".png") for name in files)


# --- a crude tar dataset with two subflavors, two cookers ---------------------------------------
@stateless
def cook_shout(sample: dict[str, Any]) -> TextSample:
    return TextSample(**basic_sample_keys(sample), text=sample["txt"].upper())


@stateless
@cooker(need_primary=True)
def cook_whisper(sample: dict[str, Any], primary: FileStore) -> TextSample:
    # ".txt" is a part of the current sample in its own dataset
    return TextSample(**basic_sample_keys(sample), text=primary.get(".txt").lower())


def never(sample: dict[str, Any]) -> TextSample:
    raise AssertionError("the first matching cooker must win")


class VoiceEncoder(TaskEncoder[Any, Any, Any, Any]):
    cookers = (
        Cooker(cook_shout, has_subflavors={"voice": "shout"}),
        Cooker(cook_whisper, has_subflavors={"voice": "whisper"}),
        Cooker(never),
    )


@pytest.mark.parametrize("workers", [0, 2])
def test_two_subflavors_two_cookers(root: Path, workers: int) -> None:
    (root / "voices.yaml").write_text(
        HEADER + "  train:\n    blend_epochized:\n"
        "      - repetitions: 1\n        path: ./crude_a\n        subflavors: {voice: shout}\n"
        "      - repetitions: 1\n        path: ./crude_b\n        subflavors: {voice: whisper}\n"
    )
    dataset = get_train_dataset(
        str(root / "voices.yaml"),
        worker_config=config(workers),
        batch_size=5,
        shuffle_buffer_size=4,
        max_samples_per_sequence=3,
        task_encoder=VoiceEncoder(),
        repeat=False,
    )
    with get_loader(dataset) as loader:
        texts = sorted(text for batch in loader for text in batch.text)
    assert texts == sorted(
        [f"HELLO WORLD {i}" for i in range(10)] + [f"good night {i}" for i in range(10)]
    )


# --- errors and state ----------------------------------------------------------------------------
def test_no_matching_cooker_is_a_sample_error(root: Path) -> None:
    (root / "other.yaml").write_text(
        HEADER + "  train:\n    path: ./captions.jsonl\n    subflavors: {source: other}\n"
        "    aux:\n      images: ./images\n      files: filesystem://./folder\n"
    )
    dataset = train(root / "other.yaml", error_policy=ErrorPolicy(mode="raise"))
    with (
        pytest.raises(SampleError, match="no cooker matches") as info,
        get_loader(dataset) as loader,
    ):
        next(iter(loader))
    assert "'source': 'other'" in str(info.value)
    assert "cook_caption (has_subflavors={'source': 'captions'})" in str(info.value)


def test_missing_aux_file_is_skipped_by_the_policy(root: Path) -> None:
    (root / "broken.yaml").write_text(
        HEADER + "  train:\n    path: ./broken.jsonl\n    subflavors: {source: captions}\n"
        "    aux:\n      images: ./images\n      files: filesystem://./folder\n"
    )

    def load(policy: ErrorPolicy) -> list[str]:
        dataset = train(root / "broken.yaml", error_policy=policy)
        with get_loader(dataset) as loader:
            return [sample.caption for sample in loader]

    assert sorted(load(ErrorPolicy(mode="skip"))) == ["caption 0", "caption 1", "caption 2"]
    with pytest.raises(SampleError, match=r"has no file 'img_999\.png'") as info:
        load(ErrorPolicy(mode="raise"))
    assert "images" in str(info.value)


def test_aux_on_a_missing_dataset_is_refused_at_load(root: Path) -> None:
    (root / "bad_aux.yaml").write_text(
        HEADER + "  train:\n    path: ./captions.jsonl\n    aux:\n      images: ./nowhere\n"
    )
    with pytest.raises(ConfigError, match="prepared dataset"):
        train(root / "bad_aux.yaml")


@pytest.mark.parametrize("workers", [0, 2])
def test_cooked_data_restores_exactly(root: Path, workers: int) -> None:
    def make() -> Loader:
        dataset = get_train_dataset(
            str(root / "example.yaml"),
            worker_config=config(workers),
            batch_size=3,
            shuffle_buffer_size=6,
            max_samples_per_sequence=4,
            task_encoder=CaptionEncoder(),
            virtual_workers=2,
        )
        return get_loader(dataset)

    run_contract(make, total=20, midpoints=[0, 5, 8, 13])
