"""A parsed metadataset answers to Energon's names: ``blend[i].path`` / ``.aux``, ``fs_path``."""

from __future__ import annotations

from pathlib import Path

from stoker import EPath
from stoker.flavors.load import load_dataset
from stoker.metadataset.nodes import AuxRef, BlendNode


def test_blend_entries_and_aux_sources_by_energons_names(tmp_path: Path) -> None:
    data = tmp_path / "ds" / ".nv-meta"
    data.mkdir(parents=True)
    (data / ".info.json").write_text("{}")
    (tmp_path / "media").mkdir()
    (tmp_path / "mds.yaml").write_text(
        "__module__: megatron.energon\n__class__: MetadatasetV2\nsplits:\n  train:\n"
        "    blend:\n      - path: ./ds\n        weight: 2\n"
        "        aux:\n          media: filesystem://./media\n"
    )
    mds = load_dataset(tmp_path / "mds.yaml")
    assert not isinstance(mds, str)
    train = mds.splits["train"]
    assert isinstance(train, BlendNode) and train.blend == train.items
    entry = train.blend[0]
    assert isinstance(entry.path, EPath) and entry.path.local_path() == tmp_path / "ds"
    assert entry.aux is not None
    media = entry.aux["media"]
    assert isinstance(media, AuxRef) and media.filesystem
    assert isinstance(media.fs_path, EPath) and media.fs_path.local_path() == tmp_path / "media"
