"""Packing groups (a metadataset's ``group:``): a buffer per group, per-group buffer sizes, a
group left unpacked, stats per group, and save/restore with every group's buffer."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
import torch

from stoker import (
    DefaultTaskEncoder,
    WorkerConfig,
    get_savable_loader,
    get_train_dataset,
    load_dataset,
    stateless,
    traverse_metadataset,
)
from stoker.errors import ConfigError
from stoker.format.jsonl import prepare_jsonl


@pytest.fixture(scope="module")
def mix(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two JSONL datasets (a: 60 lines, b: 40) in a blend, each its own group; a third
    (c: 30 lines) in a nested blend of group ``outer`` around ``inner``."""
    root = tmp_path_factory.mktemp("groups")
    for name, n in (("a", 60), ("b", 40), ("c", 30)):
        lines = [{"id": f"{name}{i}", "n": 1 + i % 7} for i in range(n)]
        path = root / f"{name}.jsonl"
        path.write_text("".join(json.dumps(line) + "\n" for line in lines))
        prepare_jsonl(str(path))
    mds = root / "mix.yaml"
    mds.write_text(
        "__module__: megatron.energon\n__class__: MetadatasetV2\nsplits:\n  train:\n    blend:\n"
        "      - {weight: 1, path: a.jsonl, group: alpha}\n"
        "      - {weight: 1, path: b.jsonl, group: beta}\n"
        "      - weight: 1\n        group: outer\n        blend:\n"
        "          - {weight: 1, path: c.jsonl, group: inner}\n"
    )
    return mds


class ByGroup(DefaultTaskEncoder):  # type: ignore[type-arg]
    """Packs each buffer whole; records the buffer sizes it was given; a pack lists its ids."""

    packing_capacity = 100

    def __init__(self) -> None:
        super().__init__()
        self.buffers: list[tuple[str, int]] = []

    def packing_sample_size(self, sample: Any) -> int:
        return int(sample["n"])

    @stateless
    def encode_sample(self, sample: Any) -> dict[str, Any]:
        line = sample["json"]
        return {"__restore_key__": sample["__restore_key__"], "id": line["id"], "n": line["n"]}

    def select_samples_to_pack(self, samples: list[Any]) -> list[list[Any]]:
        self.buffers.append((samples[0]["id"][0], len(samples)))
        return [samples]

    @stateless
    def postencode_sample(self, sample: Any) -> dict[str, Any]:
        return {**sample, "post": True}

    @stateless
    def pack_selected_samples(self, samples: list[Any]) -> dict[str, Any]:
        assert all(s["post"] for s in samples)
        return {"ids": [s["id"] for s in samples]}

    def batch(self, samples: list[Any]) -> list[Any]:
        return [s["ids"] if "ids" in s else [s["id"], "alone"] for s in samples]


SIZES = {"alpha": 4, "beta": 3, "outer+inner": 5}


def loader_of(mds: Path, encoder: Any, workers: int = 0, **options: Any) -> Any:
    settings: dict[str, Any] = {
        "batch_size": 2,
        "shuffle_buffer_size": {"alpha": 8, "beta": None, "outer+inner": 3},
        "max_samples_per_sequence": 5,
        "packing_buffer_size": SIZES,
        "virtual_workers": 2,
        **options,
    }
    config = WorkerConfig(rank=0, world_size=1, num_workers=workers)
    return get_savable_loader(
        get_train_dataset(str(mds), worker_config=config, task_encoder=encoder, **settings)
    )


def test_metadataset_groups_join_outer_first(mix: Path) -> None:
    refs = traverse_metadataset(mix, split_part="train")
    assert [r.group for r in refs] == ["alpha", "beta", "outer+inner"]
    config = WorkerConfig(rank=0, world_size=1, num_workers=0)
    found = load_dataset(str(mix)).get_datasets(
        training=True, split_part="train", worker_config=config
    )
    assert [d.group for d in found.datasets] == ["alpha", "beta", "outer+inner"]


def test_each_group_has_its_own_buffer_and_size(mix: Path) -> None:
    encoder = ByGroup()
    with loader_of(mix, encoder) as loader:
        batches = list(itertools.islice(loader, 30))
        stats = loader.stats().packing
    packs = [pack for batch in batches for pack in batch]
    for pack in packs:  # never two groups in one pack, each group's buffer size
        assert len({i[0] for i in pack}) == 1, pack
        assert len(pack) == {"a": 4, "b": 3, "c": 5}[pack[0][0]]
    assert {p[0][0] for p in packs} == {"a", "b", "c"}
    assert {size for _, size in encoder.buffers} == set(SIZES.values())
    for name in SIZES:
        assert stats[f"group/{name}/samples_per_pack"] == SIZES[name]
    assert stats["packs"] == sum(stats[f"group/{name}/packs"] for name in SIZES)


def test_a_group_without_packing_passes_samples_alone(mix: Path) -> None:
    sizes = {**SIZES, "beta": None}
    with loader_of(mix, ByGroup(), packing_buffer_size=sizes) as loader:
        packs = [p for b in itertools.islice(loader, 20) for p in b]
    alone = [p for p in packs if p[-1] == "alone"]
    assert alone and all(p[0].startswith("b") for p in alone)
    assert all(len(p) == 4 or len(p) == 5 for p in packs if p[-1] != "alone")
    with loader_of(mix, ByGroup(), packing_buffer_size=sizes, batch_size=None) as loader:
        items = list(itertools.islice(loader, 20))
        single = [s for s in items if "post" in s]
        assert single, "samples of the unpacked group come one by one"
        again = loader.restore_sample(single[0]["__restore_key__"])
    assert again["id"] == single[0]["id"] and again["post"] is True


def test_a_dict_without_a_group_is_refused_naming_it(mix: Path) -> None:
    with pytest.raises(ConfigError, match="no entry for group 'beta'"):
        loader_of(mix, ByGroup(), packing_buffer_size={"alpha": 4, "outer+inner": 5})
    with pytest.raises(ConfigError, match=r"shuffle_buffer_size.*'outer\+inner'"):
        loader_of(mix, ByGroup(), shuffle_buffer_size={"alpha": 4, "beta": 2})


@pytest.mark.parametrize("workers", [0, 2])
def test_restore_with_groups_continues_exactly(mix: Path, tmp_path: Path, workers: int) -> None:
    with loader_of(mix, ByGroup(), workers) as loader:
        reference = list(itertools.islice(loader, 24))
    for at in (3, 11):
        with loader_of(mix, ByGroup(), workers) as loader:
            head = list(itertools.islice(loader, at))
            torch.save(loader.save_state_rank(), tmp_path / "state.pt")
        assert head == reference[:at]
        state = torch.load(tmp_path / "state.pt", weights_only=True)
        held = json.dumps(state)
        assert "pack" in held  # buffers were saved
        with loader_of(mix, ByGroup(), workers) as loader:
            loader.restore_state_rank(state)
            tail = list(itertools.islice(loader, 24 - at))
        assert tail == reference[at:]


def test_a_state_with_groups_resumes_on_another_worker_count(mix: Path, tmp_path: Path) -> None:
    with loader_of(mix, ByGroup(), 0) as loader:
        reference = list(itertools.islice(loader, 20))
    with loader_of(mix, ByGroup(), 0) as loader:
        list(itertools.islice(loader, 7))
        torch.save(loader.save_state_rank(), tmp_path / "state.pt")
    with loader_of(mix, ByGroup(), 2) as loader:  # the same 2 virtual workers, in 2 processes
        loader.restore_state_rank(torch.load(tmp_path / "state.pt", weights_only=True))
        assert list(itertools.islice(loader, 13)) == reference[7:]
