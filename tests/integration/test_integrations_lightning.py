"""stoker's LightningDataModule under a real Lightning Trainer (CPU): exact resume from checkpoints.

A run that crashes and is resumed from its last checkpoint must train on exactly the batches an
uninterrupted run trains on, step by step, across an epoch boundary and with validation runs in
between; every validation run sees the whole validation split.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch

pl = pytest.importorskip("pytorch_lightning")

from stoker import WorkerConfig, get_loader, get_train_dataset  # noqa: E402
from stoker.integrations.lightning import StokerDataModule  # noqa: E402
from stoker.model.source_info import SourceInfo  # noqa: E402
from stoker.storage.options import LoaderOptions  # noqa: E402
from tests.integration._images import make_image_dataset  # noqa: E402
from tests.integration._integ_lightning import Crash, CrashAt, KeyRecorder, trainer  # noqa: E402

# Lightning 2.6 calls a torch.utils._pytree API that torch 2.13 deprecates: not our bug.
pytestmark = pytest.mark.filterwarnings(
    r"ignore:`isinstance\(treespec, LeafSpec\)` is deprecated:FutureWarning"
)

STEPS = 16  # two epochs of 10 batches would be 20: the run ends mid-epoch 2
EVERY = 5  # checkpoints at steps 5 (mid-epoch) and 10 (the end of epoch 1)
CRASH = 12  # 2 steps after the last checkpoint


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, list[str]]]:
    root = tmp_path_factory.mktemp("lightning") / "ds"
    keys = make_image_dataset(
        root, {"train": {"train_a": 11, "train_b": 9}, "val": {"val_a": 5}, "test": {"test_a": 3}}
    )
    return root, keys


def data_module(root: Path, num_workers: int = 1) -> StokerDataModule:
    return StokerDataModule(
        str(root),
        batch_size=2,
        num_workers=num_workers,
        shuffle_buffer_size=8,
        max_samples_per_sequence=4,
        virtual_workers=2,  # fixed, so that a run may resume with another number of workers
    )


def position(dm: StokerDataModule) -> dict[str, object]:
    (state,) = dm.state_dict()["train"]["ranks"]
    return {k: state[k] for k in ("epoch", "t", "yielded", "streams")}


@dataclass
class Runs:
    """An uninterrupted fit, and a fit that crashed 2 steps after its checkpoint at EVERY."""

    full: KeyRecorder
    full_position: dict[str, object]
    crashed: KeyRecorder
    folder: Path


def checkpoints(folder: Path) -> pl.Callback:
    return pl.callbacks.ModelCheckpoint(dirpath=folder, every_n_train_steps=EVERY, save_top_k=-1)


@pytest.fixture(scope="module")
def runs(
    dataset: tuple[Path, dict[str, list[str]]], tmp_path_factory: pytest.TempPathFactory
) -> Runs:
    root, _ = dataset
    folder = tmp_path_factory.mktemp("runs")
    full, full_dm = KeyRecorder(), data_module(root)
    trainer(STEPS, str(folder / "full")).fit(full, datamodule=full_dm)
    crashed, crashed_dm = KeyRecorder(), data_module(root)
    with pytest.raises(Crash):
        trainer(STEPS, str(folder), [checkpoints(folder / "ckpt"), CrashAt(CRASH)]).fit(
            crashed, datamodule=crashed_dm
        )
    crashed_dm.teardown("fit")  # a crashed fit leaves its loaders' workers running
    return Runs(full, position(full_dm), crashed, folder)


def checkpoint_of_step(runs: Runs, step: int) -> Path:
    (path,) = (runs.folder / "ckpt").glob(f"*step={step}.ckpt")
    return path


def test_runs_train_on_the_planned_batches(
    dataset: tuple[Path, dict[str, list[str]]], runs: Runs
) -> None:
    _, keys = dataset
    assert len(runs.full.train_keys) == STEPS
    first_pass = sorted(k for step in runs.full.train_keys[:10] for k in step)
    assert first_pass == sorted(keys["train"])  # one pass = one epoch of 10 batches
    assert runs.crashed.train_keys == runs.full.train_keys[:CRASH]
    checkpoint = torch.load(checkpoint_of_step(runs, EVERY), weights_only=True)
    (saved,) = checkpoint["StokerDataModule"]["train"]["ranks"]
    assert (saved["t"], saved["yielded"]) == (EVERY, EVERY)  # no batch prefetched beyond


# Lightning keeps the state twice: the data module's, and the training loader's in its fit loop
# (the loader is stateful). Either one alone resumes exactly, mid-epoch and at an epoch's end.
@pytest.mark.parametrize(
    ("step", "drop"), [(5, None), (5, "data module"), (5, "fit loop"), (10, None)]
)
# A resumed run writes its checkpoints next to those it resumes from, as Lightning users do.
@pytest.mark.filterwarnings("ignore:Checkpoint directory .* exists and is not empty:UserWarning")
def test_resumed_fit_trains_on_the_batches_of_the_uninterrupted_fit(
    dataset: tuple[Path, dict[str, list[str]]],
    runs: Runs,
    tmp_path: Path,
    step: int,
    drop: str | None,
) -> None:
    checkpoint = torch.load(checkpoint_of_step(runs, step), weights_only=True)
    if drop == "data module":
        del checkpoint["StokerDataModule"]
    elif drop == "fit loop":
        del checkpoint["loops"]["fit_loop"]["state_dict"]["combined_loader"]
    path = tmp_path / "resume.ckpt"
    torch.save(checkpoint, path)

    resumed = KeyRecorder()
    dm = data_module(dataset[0], num_workers=2)  # another worker count resumes the same stream
    run = trainer(STEPS, str(runs.folder), [checkpoints(runs.folder / "ckpt")])
    run.fit(resumed, datamodule=dm, ckpt_path=path)
    assert resumed.train_keys == runs.full.train_keys[step:]
    assert position(dm) == runs.full_position


def test_every_validation_run_is_a_full_pass(
    dataset: tuple[Path, dict[str, list[str]]], tmp_path: Path
) -> None:
    root, keys = dataset
    model = KeyRecorder()
    trainer(12, str(tmp_path)).fit(model, datamodule=data_module(root, num_workers=0))
    sanity, *runs = model.val_keys  # 2 sanity batches, then one run per epoch of 10 steps
    assert len(runs) == 1
    assert sorted(runs[0]) == keys["val"]  # every sample once; the order interleaves the streams
    assert sanity == runs[0][:4]  # the sanity check is the start of the same pass


def test_loader_options_reach_the_loaders(dataset: tuple[Path, dict[str, list[str]]]) -> None:
    options = LoaderOptions(prefetch_bytes=1 << 20, batch_slots_mb=0)
    dm = StokerDataModule(str(dataset[0]), batch_size=2, num_workers=0, options=options)
    train, val = dm.train_dataloader(), dm.val_dataloader()
    assert train.loader.options is options and val.loader.options is options
    assert len(next(iter(train)).__key__) == 2  # loads with them
    train.loader.close()


@pytest.mark.parametrize("workers", [0, 2])
def test_flat_stats_reach_the_trainer_logger(
    dataset: tuple[Path, dict[str, list[str]]], tmp_path: Path, workers: int
) -> None:
    """``log_stats_every_n_steps`` logs ``stats().flat()`` through the module's ``log_dict``:
    the trainer's CSV logger holds ``data/samples`` growing by the batch size per step."""
    import csv

    root, _ = dataset
    dm = StokerDataModule(str(root), batch_size=2, num_workers=workers, log_stats_every_n_steps=1)
    fit = pl.Trainer(
        accelerator="cpu",
        devices=1,
        max_steps=4,
        default_root_dir=str(tmp_path),
        logger=pl.loggers.CSVLogger(str(tmp_path), name="csv"),
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=False,
        log_every_n_steps=1,
        limit_val_batches=0,
    )
    fit.fit(KeyRecorder(), datamodule=dm)
    stats = dm.stats()
    dm.teardown("fit")
    (metrics,) = tmp_path.glob("csv/*/metrics.csv")
    with metrics.open() as f:
        rows = [r for r in csv.DictReader(f) if r.get("data/samples")]
    assert [float(r["data/samples"]) for r in rows] == [2.0, 4.0, 6.0, 8.0]
    assert all(0.0 <= float(r["data/wait_frac"]) <= 1.0 for r in rows)
    assert stats is not None and stats.samples == 8


class SourceRecorder(KeyRecorder):
    """Also records the sources of each training batch, as the step sees them."""

    def __init__(self) -> None:
        super().__init__()
        self.sources: list[list[tuple[SourceInfo, ...]]] = []

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        self.sources.append(batch.__sources__)
        return super().training_step(batch, batch_idx)


# KeyRecorder validates; this fit has no validation data, on purpose.
@pytest.mark.filterwarnings("ignore:You defined a `validation_step` but have no `val_dataloader`")
@pytest.mark.parametrize("workers", [0, 2])
def test_a_loader_goes_straight_into_trainer_fit(
    dataset: tuple[Path, dict[str, list[str]]], tmp_path: Path, workers: int
) -> None:
    """``Trainer.fit(model, train_dataloaders=get_loader(...))``, no data module: Lightning
    moves every batch to the device with ``apply_to_collection``, which walks the batch and
    the ``SourceInfo`` of each of its samples (it refuses frozen dataclasses)."""
    root, keys = dataset
    dataset_ = get_train_dataset(
        str(root),
        worker_config=WorkerConfig(rank=0, world_size=1, num_workers=workers),
        batch_size=2,
        shuffle_buffer_size=8,
        max_samples_per_sequence=4,
    )
    model = SourceRecorder()
    with get_loader(dataset_) as loader:
        fit = pl.Trainer(
            accelerator="cpu",
            devices=1,
            max_steps=6,
            default_root_dir=str(tmp_path),
            logger=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            enable_checkpointing=False,
        )
        fit.fit(model, train_dataloaders=loader)
    assert len(model.train_keys) == 6
    assert {k for step in model.train_keys for k in step} <= set(keys["train"])
    for step_keys, sources in zip(model.train_keys, model.sources, strict=True):
        # one tuple of sources per sample, each naming the sample's own shard and files
        for key, (source,) in zip(step_keys, sources, strict=True):
            assert type(source) is SourceInfo
            assert source.shard_name == f"{key.rsplit('_', 1)[0]}.tar"
            assert source.file_names == (f"{key}.jpg", f"{key}.txt")


def test_lightning_walks_a_batch_into_its_tensors_and_keeps_its_sources() -> None:
    from lightning_utilities.core.apply_func import apply_to_collection

    from stoker.model.batch import Batch
    from stoker.model.samples import CaptioningSample

    @dataclass
    class CaptionBatch(Batch):
        image: torch.Tensor
        caption: list[str]

    def sample(i: int) -> CaptioningSample:
        source = SourceInfo(dataset_path="/d", index=i, shard_name="a.tar", file_names=("i.jpg",))
        image = torch.full((3, 2, 2), i, dtype=torch.uint8)
        return CaptioningSample(
            __key__=f"k{i}", __restore_key__=(), __sources__=(source,), image=image, caption="c"
        )

    batch = CaptionBatch.from_samples([sample(0), sample(1)])
    moved = apply_to_collection(batch, torch.Tensor, lambda t: t + 1)
    assert torch.equal(moved.image, batch.image + 1)
    assert moved.__sources__ == batch.__sources__
    assert [s.index for s in moved.__sources__] == [0, 1]
