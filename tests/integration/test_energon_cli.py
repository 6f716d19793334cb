"""stoker's CLI where Energon's users meet it: checkpoint redist, lint/preview --split-parts,
prepare-media on a plain folder (read and written by the real Energon too), and the command
objects served at Energon's module paths, invoked as Energon's own tests invoke them.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml
from click.testing import CliRunner
from PIL import Image

from stoker import WorkerConfig, get_savable_loader, get_train_dataset
from stoker.cli.energon_tools import (
    analyze_debug_command,
    checkpoint_command,
    command_redist,
    info_command,
    lint_command,
    main,
    prepare_command,
    prepare_media_command,
    preview_command,
)
from stoker.cli.main import cli
from stoker.format.dataset_config import make_dataset_yaml
from stoker.format.prepare import prepare_dataset
from stoker.media.av_decoder import AVDecoder
from stoker.sources.aux import SystemFileStore
from tests.conftest import make_dataset, write_shard
from tests.integration._media import make_audio, make_video

TEXT = make_dataset_yaml("TextSample", {"text": "txt"})


def prepared(root: Path, ratio: str = "2,1,0", shards: int = 3, per_shard: int = 4) -> Path:
    make_dataset(root, shards=shards, per_shard=per_shard)
    prepare_dataset(str(root), split_ratio=ratio, dataset_yaml=TEXT)
    return root


# --- checkpoint redist: Energon's layout ------------------------------------------------------


def _loader(path: Path, rank: int, world: int, workers: int) -> Any:
    config = WorkerConfig(rank=rank, world_size=world, num_workers=workers)
    dataset = get_train_dataset(
        str(path),
        batch_size=2,
        shuffle_buffer_size=None,
        max_samples_per_sequence=None,
        worker_config=config,
        virtual_workers=4,
    )
    return get_savable_loader(dataset)


def _keys(batches: list[Any]) -> list[str]:
    return sorted(k for batch in batches for k in batch.__key__)


def test_redist_writes_one_file_per_rank_as_energon(tmp_path: Path) -> None:
    data = prepared(tmp_path / "ds", ratio="1,0,0", shards=4, per_shard=8)
    ckpt, out = tmp_path / "ckpt", tmp_path / "redist"
    ckpt.mkdir()
    after: list[list[Any]] = []
    for rank in range(2):  # 2 ranks x 2 workers, as saved by a training run
        loader = _loader(data, rank, 2, 2)
        it = iter(loader)
        _ = [next(it) for _ in range(2)]
        torch.save(loader.save_state_rank(), ckpt / f"state_rank{rank}.pt")
        after.append([next(it) for _ in range(2)])
        del it, loader
    # Energon's invocation: files, then the output folder; here given as a folder.
    result = CliRunner().invoke(command_redist, ["--new-world-size", "4", str(ckpt), str(out)])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == [f"state_rank{r}.pt" for r in range(4)]
    resumed = []
    for rank in range(4):  # the total of 4 workers spread over 4 ranks: 1 each
        state = torch.load(out / f"state_rank{rank}.pt", weights_only=True)
        assert state["topology"]["num_workers"] == 1 and state["topology"]["world_size"] == 4
        loader = _loader(data, rank, 4, 1)
        loader.restore_state_rank(state)
        it = iter(loader)
        resumed.append(next(it))
        del it, loader
    # The next global batch (8 samples) is the same, whatever the number of ranks.
    assert _keys(resumed) == _keys([after[0][0], after[1][0], after[0][1], after[1][1]])


def test_redist_single_file_and_megatron_style(tmp_path: Path) -> None:
    data = prepared(tmp_path / "ds", ratio="1,0,0", shards=4, per_shard=8)
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    for rank in range(2):
        loader = _loader(data, rank, 2, 0)
        it = iter(loader)
        _ = [next(it) for _ in range(2)]
        wrapped = {"dataloader_state_dict": loader.save_state_rank(), "iteration": 7}
        torch.save(wrapped, ckpt / f"dp_rank_{rank:03d}.pt")
    out = tmp_path / "out"
    result = CliRunner().invoke(
        cli, ["checkpoint", "redist", str(ckpt), str(out), "--new-world-size", "1"]
    )
    assert result.exit_code == 0, result.output
    assert [p.name for p in out.iterdir()] == ["dp_rank_000.pt"]  # the input's numbering
    state = torch.load(out / "dp_rank_000.pt", weights_only=True)
    assert state["dataloader_state_dict"]["topology"]["world_size"] == 1  # still wrapped
    single = tmp_path / "all.pt"
    flag = CliRunner().invoke(
        cli,
        ["checkpoint", "redist", str(ckpt), str(single), "--new-world-size", "2", "--single-file"],
    )
    assert flag.exit_code == 0, flag.output
    assert [s["topology"]["rank"] for s in torch.load(single, weights_only=True)] == [0, 1]
    info = CliRunner().invoke(cli, ["checkpoint", "info", str(ckpt), "--json"])
    assert info.exit_code == 0 and json.loads(info.output)["ranks"] == 2
    asked = CliRunner().invoke(checkpoint_command, ["redist", str(ckpt), str(out)], input="2\n")
    assert asked.exit_code == 0 and "Current DP world size: 2" in asked.output
    assert sorted(p.name for p in out.iterdir()) == ["dp_rank_000.pt", "dp_rank_001.pt"]


# --- lint and preview --split-parts -----------------------------------------------------------


def test_lint_split_parts_checks_and_decodes_only_those(tmp_path: Path) -> None:
    data = prepared(tmp_path / "ds", ratio="2,1,0")
    # Text that is not UTF-8, in the val shard only: only decoding finds it.
    write_shard(
        data / "shard_002.tar",
        [(f"s2_{i:05d}", {"txt": b"\xff\xfe", "json": b"{}"}) for i in range(4)],
    )
    (data / "shard_002.tar.idx").unlink()
    prepare_dataset(str(data), split_ratio="2,1,0", dataset_yaml=TEXT, overwrite=True)
    train = CliRunner().invoke(cli, ["lint", str(data), "--split-parts", "train", "--no-progress"])
    assert train.exit_code == 0, train.output
    assert "checked 2 shards, 8 samples (8 decoded)" in train.output
    val = CliRunner().invoke(cli, ["lint", str(data), "--split-parts=val", "--no-progress"])
    assert val.exit_code == 1
    assert "shard_002.tar, sample 's2_00000'" in val.output and "cannot be loaded" in val.output
    unknown = CliRunner().invoke(cli, ["lint", str(data), "--split-parts=dev", "--no-progress"])
    assert unknown.exit_code == 1 and "unknown split part 'dev'" in unknown.output
    energon = CliRunner().invoke(lint_command, [str(data), "--split-parts=train"])
    assert energon.exit_code == 0, energon.output


def test_preview_split_parts_in_turn(tmp_path: Path) -> None:
    data = prepared(tmp_path / "ds", ratio="2,1,0")
    result = CliRunner().invoke(
        cli, ["preview", str(data), "--split-parts", "train,val,test", "-n", "1"]
    )
    assert result.exit_code == 0, result.output
    assert "[train]" in result.output and "[val]" in result.output
    assert "s0_00000" in result.output and "s2_00000" in result.output
    assert "Dataset test is empty. Skipping." in result.output
    as_json = CliRunner().invoke(cli, ["preview", str(data), "--split-parts=val", "--json"])
    assert [r["split_part"] for r in json.loads(as_json.stdout)] == ["val"]
    # Energon's preview: one sample, then "Continue?"; "n" ends this split part.
    energon = CliRunner().invoke(preview_command, [str(data), "--split-parts=train"], input="n\n")
    assert energon.exit_code == 0, energon.output
    assert "Sample 0\n - __key__ (<class 'str'>): 's0_00000'\n" in energon.output
    assert " - text (<class 'str'>): 'caption s0_0'" in energon.output
    assert "Sample 1" not in energon.output and "Exiting Preview" in energon.output
    walk = CliRunner().invoke(preview_command, [str(data)], input="y\nn\ny\n")
    assert walk.output.count("Exiting Preview") == 2  # train, then val (two samples each)
    assert "Dataset test is empty. Skipping." in walk.output


# --- prepare-media on a plain folder, with the real Energon on either side ---------------------


def _media_folder(root: Path) -> Path:
    (root / "clips").mkdir(parents=True)
    (root / "clips" / "a.mp4").write_bytes(make_video("mp4", frames=30))
    (root / "b.wav").write_bytes(make_audio("wav", seconds=1.0))
    Image.new("RGB", (20, 10), (255, 0, 0)).save(root / "c.png")
    (root / "notes.txt").write_text("not media")
    return root


def test_prepare_media_folder_read_by_aux_store(tmp_path: Path) -> None:
    folder = _media_folder(tmp_path / "raw")
    result = CliRunner().invoke(
        prepare_media_command, [str(folder), "--num-workers", "2", "--media-metadata-by-extension"]
    )
    assert result.exit_code == 0 and "Done" in result.stdout, result.output
    assert "3 media files from the folder" in result.stdout
    store = SystemFileStore(str(folder))
    video = store.get_media_metadata("clips/a.mp4")
    decoded = AVDecoder((folder / "clips/a.mp4").read_bytes())
    exact = decoded.get_metadata(get_audio_num_samples=True).audio_num_samples
    assert (video.video_num_frames, video.video_fps, video.audio_num_samples) == (30, 30.0, exact)
    assert store.get_media_metadata("./b.wav").audio_num_samples == 16000
    assert (store.get_media_metadata("c.png").width, store.get_media_metadata("c.png").format) == (
        20,
        "PNG",
    )


@pytest.mark.energon
def test_media_metadata_of_a_folder_between_energon_and_stoker(tmp_path: Path) -> None:
    pytest.importorskip("megatron.energon")
    from megatron.energon.cache.file_store import SystemFileStore as EnergonStore
    from megatron.energon.epathlib import EPath
    from megatron.energon.media.extractor import MediaFilterConfig
    from megatron.energon.media.filesystem_prepare import prepare_filesystem_dataset

    by_energon = _media_folder(tmp_path / "e")
    stored = prepare_filesystem_dataset(
        EPath(by_energon), MediaFilterConfig.parse(None, False, True), progress=False, workers=1
    )
    by_stoker = _media_folder(tmp_path / "s")
    result = CliRunner().invoke(
        cli, ["prepare-media", str(by_stoker), "--media-metadata-by-extension", "--no-progress"]
    )
    assert result.exit_code == 0, result.output
    names = ["clips/a.mp4", "b.wav", "c.png"]
    assert stored == len(names)
    for name in names:
        written_by_energon = SystemFileStore(str(by_energon)).get_media_metadata(name)
        written_by_stoker = EnergonStore(EPath(by_stoker)).get_media_metadata(name)
        assert type(written_by_energon).__name__ == type(written_by_stoker).__name__
        ours, theirs = asdict(written_by_energon), asdict(written_by_stoker)
        for field, value in theirs.items():
            if isinstance(value, float):
                assert ours[field] == pytest.approx(value, abs=0.07), (name, field)  # AAC padding
            else:
                assert ours[field] == value, (name, field)


# --- the command objects at Energon's module paths ---------------------------------------------


def test_energon_invocations(tmp_path: Path) -> None:
    data = make_dataset(tmp_path / "ds", shards=2, per_shard=5)
    runner = CliRunner()
    missing = runner.invoke(prepare_command, [str(data), "--non-interactive"])
    assert missing.exit_code == 1  # Energon's status: --split-ratio missing
    args = [str(data), "--non-interactive", "--force-overwrite", "--split-ratio=1,0,0"]
    typed = runner.invoke(
        prepare_command, [*args, "--sample-type=TextSample", '--field-map={"text": "txt"}']
    )
    assert typed.exit_code == 0 and "Done" in typed.stdout, typed.output
    crude = runner.invoke(
        prepare_command,
        [*args, "--sample-type=CrudeWebdataset", "--dataset-yaml-name=dataset_crude.yaml"],
    )
    assert crude.exit_code == 0, crude.output
    assert "CrudeWebdataset" in (data / ".nv-meta/dataset_crude.yaml").read_text()
    info = runner.invoke(info_command, [str(data)])
    assert info.exit_code == 0
    assert all(s in info.stdout for s in ("10 samples", "2 shards", str(data), "train"))
    crude_info = runner.invoke(info_command, [str(data), "--dataset-config", "dataset_crude.yaml"])
    assert "sample type   crude" in crude_info.stdout
    debug = runner.invoke(analyze_debug_command, [str(tmp_path / "missing.jsonl")])
    assert debug.exit_code == 1 and "no such file" in debug.output
    assert sorted(main.commands) == sorted(
        [
            "analyze-debug",
            "checkpoint",
            "info",
            "lint",
            "mount",
            "prepare",
            "prepare-media",
            "preview",
        ]
    )
    assert yaml.safe_load((data / ".nv-meta/dataset.yaml").read_text())["field_map"] == {
        "text": "txt"
    }


def test_prepare_filesystem_dataset_with_energon_names(tmp_path: Path) -> None:
    from stoker.media.extract import MediaFilterConfig, MediaFilterStrategy
    from stoker.media.prepare import prepare_filesystem_dataset

    folder = _media_folder(tmp_path / "raw")
    media = MediaFilterConfig(strategy=MediaFilterStrategy.GLOB, patterns=["*.wav", "*.PNG"])
    assert media.should_consider_media("x.png") and not media.should_consider_all()
    assert prepare_filesystem_dataset(folder, media, progress=False, workers=2) == 2
    assert SystemFileStore(str(folder)).get_media_metadata("b.wav").audio_sample_rate == 16000
    extension = MediaFilterConfig.parse(None, False, True)
    assert extension.extract_metadata(folder / "c.png").height == 10  # type: ignore[union-attr]
