"""Joins by sample key: Energon's docs example, list and dict forms, nonmatch modes, the cached
join index (`stoker prepare mds.yaml`), subsets and exact restore."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from stoker import WorkerConfig, get_loader, get_train_dataset, get_val_dataset
from stoker.cli.prepare import command as prepare_command
from stoker.errors import ConfigError
from stoker.format.dataset_config import make_dataset_yaml
from stoker.format.prepare import prepare_dataset
from stoker.runtime.loader import Loader
from tests.conftest import write_shard
from tests.contract.contract import run_contract

HEADER = "__module__: megatron.energon\n__class__: MetadatasetV2\nsplits:\n"
TYPES = "tests.integration.join_types"


def _prepare(folder: Path, shards: dict[str, list[int]], text: str, extra: int = 0) -> None:
    for name, ids in shards.items():
        samples = [(f"k{i:04d}", {"txt": f"{text}{i}".encode()}) for i in ids]
        if name.endswith("1"):
            samples += [(f"x{j}", {"txt": b"extra"}) for j in range(extra)]
        write_shard(folder / f"{name}.tar", samples)
    prepare_dataset(
        str(folder),
        split_parts=[("train", "train_"), ("val", "val_")],
        dataset_yaml=make_dataset_yaml("TextSample", {"text": "txt"}),
    )


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """images: k0000-k0079 (train, 2 shards), k0080-k0119 (val); captions: even keys only,
    in another order and shard layout, plus keys the images lack."""
    base = tmp_path_factory.mktemp("joins")
    _prepare(base / "images", {"train_0": list(range(40)), "train_1": list(range(40, 80)),
                               "val_0": list(range(80, 120))}, "img")  # fmt: skip
    evens = list(range(0, 80, 2))[::-1]
    _prepare(base / "captions", {"train_0": evens[:25], "train_1": evens[25:],
                                 "val_0": list(range(80, 120, 2))}, "cap", extra=5)  # fmt: skip
    return base


def write_yaml(root: Path, name: str, body: str) -> str:
    (root / name).write_text(HEADER + body)
    return str(root / name)


def list_join(nonmatch: str, joiner: str = "JoinedSample", module: str = TYPES) -> str:
    return (
        "  train:\n    join:\n      - path: images\n      - path: captions\n"
        f"        nonmatch: {nonmatch}\n"
        f"    joiner:\n      __module__: {module}\n      __class__: {joiner}\n"
    )


def read_all(path: str, workers: int = 0, **options: Any) -> list[Any]:
    wc = WorkerConfig(rank=0, world_size=1, num_workers=workers)
    ds = get_val_dataset(path, split_part="train", worker_config=wc, batch_size=None, **options)
    with get_loader(ds) as loader:
        return sorted(loader, key=lambda s: s.__key__)


@pytest.mark.parametrize("workers", [0, 2])
def test_docs_example_skip_yields_exactly_the_matching_keys(root: Path, workers: int) -> None:
    samples = read_all(write_yaml(root, "docs.yaml", list_join("skip")), workers)
    assert [s.__key__ for s in samples] == [f"k{i:04d}" for i in range(0, 80, 2)]
    assert all(type(s).__name__ == "JoinedSample" for s in samples)
    assert [(s.text1, s.text2) for s in samples[:2]] == [("img0", "cap0"), ("img2", "cap2")]
    assert all(s.__restore_key__[1].endswith("images") for s in samples)


def test_nonmatch_none_passes_none(root: Path) -> None:
    samples = read_all(write_yaml(root, "none.yaml", list_join("none")))
    assert len(samples) == 80
    assert [(s.text1, s.text2) for s in samples[:3]] == [
        ("img0", "cap0"), ("img1", None), ("img2", "cap2")]  # fmt: skip


def test_nonmatch_error_names_a_missing_key(root: Path) -> None:
    path = write_yaml(root, "error.yaml", list_join("error"))
    with pytest.raises(ConfigError, match=r"'k0001'.*captions.*40 of 80"):
        read_all(path)


def test_dict_form_passes_named_samples(root: Path) -> None:
    body = (
        "  train:\n    nonmatch: skip\n    join:\n      image: {path: images}\n"
        "      text: {path: captions}\n"
        f"    joiner: {{__module__: {TYPES}, __class__: NamedJoin}}\n"
    )
    samples = read_all(write_yaml(root, "named.yaml", body), 2)
    assert len(samples) == 40
    assert (samples[1].image, samples[1].caption) == ("img2", "cap2")


def test_function_builtin_and_default_joiners(root: Path) -> None:
    fn = write_yaml(root, "fn.yaml", list_join("none", "upper_joiner"))
    upper = read_all(fn, allowed_modules=(TYPES,))  # a function: its module must be allowed
    assert [s.text for s in upper[:2]] == ["IMG0|CAP0", "IMG1|-"]
    builtin = list_join("skip", "TextSample", "megatron.energon")
    assert read_all(write_yaml(root, "builtin.yaml", builtin))[0].text == "cap0"
    default = (
        "  train:\n    join:\n      - path: images\n      - {path: captions, nonmatch: skip}\n"
    )
    assert read_all(write_yaml(root, "default.yaml", default))[0].text == "cap0"


def test_joiner_allow_list(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A metadataset's joiner follows dataset.yaml's allow-list rules: Sample subclasses from
    installed modules pass; a function or any other callable needs its module allowed (or
    STOKER_TRUST_METADATASET=1, the switch that trusts the user's own metadataset)."""
    fn = write_yaml(root, "fn_refused.yaml", list_join("none", "upper_joiner"))
    with pytest.raises(ConfigError, match="neither a Sample") as refused:
        read_all(fn)
    assert refused.value.path == fn
    assert "STOKER_TRUST_METADATASET=1" in (refused.value.hint or "")
    system = write_yaml(root, "system.yaml", list_join("none", "system", "os"))
    with pytest.raises(ConfigError, match=r"joiner names os\.system"):
        read_all(system)
    monkeypatch.setenv("STOKER_ALLOWED_MODULES", TYPES)
    assert read_all(fn)[0].text == "IMG0|CAP0"
    monkeypatch.delenv("STOKER_ALLOWED_MODULES")
    monkeypatch.setenv("STOKER_TRUST_METADATASET", "1")
    assert read_all(fn)[0].text == "IMG0|CAP0"


def test_subset_counts_joined_samples(root: Path) -> None:
    body = list_join("skip") + "    subset: {range: ['25%', '50%']}\n"
    samples = read_all(write_yaml(root, "subset.yaml", body))
    assert [s.__key__ for s in samples] == [f"k{i:04d}" for i in range(20, 40, 2)]


def test_prepare_writes_the_index_and_loads_use_it(
    tmp_path: Path, root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = write_yaml(root, "prepared.yaml", list_join("skip"))
    result = CliRunner().invoke(prepare_command, [path, "--no-progress"])
    assert result.exit_code == 0, result.output
    assert "built in" in result.output and "matched 40/80" in result.output
    files = sorted((root / "prepared.yaml.cache").glob("stoker_join_*.npz"))
    assert len(files) == 1
    again = CliRunner().invoke(prepare_command, [path, "--no-progress"])
    assert "up to date" in again.output
    caplog.set_level(logging.INFO, logger="stoker.sources.joins")
    assert len(read_all(path)) == 40
    assert "building the join index" not in caplog.text  # a cache hit
    # another split part of the primary: another index; the prepared one does not match, and
    # loading refuses (as Energon) until the YAML is prepared again, which drops the stale file
    (root / "prepared.yaml").write_text(
        HEADER + list_join("skip").replace("train:", "train:\n    split_part: val")
    )
    with pytest.raises(ConfigError, match=r"does not match(.|\n)*stoker prepare"):
        read_all(path)
    assert CliRunner().invoke(prepare_command, [path, "--no-progress"]).exit_code == 0
    assert [s.__key__ for s in read_all(path)][:2] == ["k0080", "k0082"]
    assert len(list((root / "prepared.yaml.cache").iterdir())) == 1
    assert "building the join index" not in caplog.text


def test_changed_dataset_uuid_invalidates_the_index(root: Path) -> None:
    path = write_yaml(root, "uuid.yaml", list_join("skip"))
    runner = CliRunner()
    runner.invoke(prepare_command, [path, "--no-progress"])
    uuid = root / "captions" / ".nv-meta" / "index.uuid"
    old = uuid.read_text()
    try:
        uuid.write_text("another-uuid")
        assert "built in" in runner.invoke(prepare_command, [path, "--no-progress"]).output
    finally:
        uuid.write_text(old)


@pytest.mark.parametrize("workers", [0, 2])
def test_joined_loader_restores_exactly(root: Path, workers: int) -> None:
    path = write_yaml(root, "contract.yaml", list_join("none", "upper_joiner"))

    def make() -> Loader:
        wc = WorkerConfig(rank=0, world_size=1, num_workers=workers)
        return get_loader(get_train_dataset(
            path, worker_config=wc, batch_size=4, shuffle_buffer_size=8,
            max_samples_per_sequence=5, virtual_workers=2,
            allowed_modules=(TYPES,)))  # fmt: skip

    run_contract(make, total=50, midpoints=[0, 7, 19, 33])
