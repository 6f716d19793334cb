"""A metadataset of token datasets, read as Energon's clients do: ``load_config`` (served by the
alias) then ``get_datasets``, whose factories are ``DefaultBinIdxDatasetFactory`` objects that keep
the reference's subset and subflavors and load the sequences megatron-core reads."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from stoker import DefaultBinIdxDatasetFactory, MetadatasetV2, WorkerConfig, get_loader
from stoker.energon_alias.dataset_config import load_config
from stoker.errors import ConfigError
from stoker.flavors.val_datasets import SourceDatasetFactory
from tests.integration._remote import prepare_local
from tests.integration._tokens import reference, write_tokens

WC = WorkerConfig(rank=0, world_size=1, num_workers=0)


def test_get_datasets_gives_token_factories_with_subset_and_subflavors(tmp_path: Path) -> None:
    prefix = write_tokens(tmp_path / "corpus", np.int32, 20)
    prepare_local(tmp_path, "wds", 2, 3)
    mds = tmp_path / "mds.yaml"
    mds.write_text(
        "__module__: megatron.energon\n__class__: MetadatasetV2\nsplits:\n  train:\n"
        "    blend:\n"
        "      - weight: 3\n        path: corpus.bin\n        subset: {range: ['0%', '50%']}\n"
        "        subflavors: {kind: tokens}\n"
        "      - weight: 1\n        path: wds\n"
    )
    loaded = load_config(mds, default_type=MetadatasetV2, default_kwargs={"path": mds})
    loaded.post_initialize()
    found = loaded.get_datasets(training=False, split_part="train", worker_config=WC)
    (tokens, weight_t), (images, weight_i) = [(d.dataset, d.weight) for d in found.datasets]
    assert (weight_t, weight_i) == (0.75, 0.25)  # normalized, as Energon's
    assert isinstance(tokens, DefaultBinIdxDatasetFactory)
    assert isinstance(images, SourceDatasetFactory) and len(images) == 3
    ref = reference(prefix)
    half = len(ref) // 2
    assert len(tokens) == half and tokens.subflavors == {"kind": "tokens"}
    with get_loader(tokens.build()) as loader:
        got = list(loader)
    assert [int(s["__key__"]) for s in got] == list(range(half))
    assert all(np.array_equal(s["tokens"], ref[i]) for i, s in enumerate(got))
    assert got[0]["__subflavors__"] == {"kind": "tokens"}


def test_load_config_refuses_what_is_not_a_metadataset(tmp_path: Path) -> None:
    prefix = write_tokens(tmp_path / "corpus", np.int32, 3)
    with pytest.raises(ConfigError, match="reads a metadataset YAML") as caught:
        load_config(f"{prefix}.bin", default_type=MetadatasetV2)
    assert "get_dataset_from_config" in str(caught.value)
