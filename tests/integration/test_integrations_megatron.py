"""The Megatron-style multimodal data module on the demo dataset, with a real tokenizer.

Single-process tests take micro-batches through ``MultiModalDataModule`` exactly as Megatron's
training loop does (``next()`` on the train and validation iterators); the context-parallel test
runs four real gloo processes with megatron-core's parallel state (CP 2 x DP 2).
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
import itertools
import json
import re
import socket
from collections.abc import Iterable
from pathlib import Path

import pytest
import torch

pytest.importorskip("tokenizers")  # the `integrations` dependency group

from examples.vlm_data import ResizeNormalize, WordTokenizer, captions, make_demo_dataset

from stoker import (
    TextSample,
    VQASample,
    WorkerConfig,
    get_loader,
    get_train_dataset,
    get_val_dataset,
)
from stoker.errors import ConfigError
from stoker.integrations.megatron import (
    EnergonDataloader,
    EnergonMultiModalDataModule,
    MultiModalDataModule,
    cyclic_iter,
)
from stoker.integrations.sequences import MultiModalBatch
from stoker.integrations.task_encoder import MultiModalSampleConfig, MultiModalTaskEncoder
from stoker.integrations.topology import data_parallel_place
from stoker.runtime.loader import Loader
from stoker.storage.options import LoaderOptions

CAPTION = re.compile(r"a (red|green|blue|yellow|purple) (circle|square|triangle)")
IMAGE = -200
#: Current Megatron-Bridge's EnergonMultiModalDataModule parameters, in order.
BRIDGE_PARAMETERS = [
    "path", "tokenizer", "seq_length", "micro_batch_size", "num_workers", "num_val_workers",
    "pin_memory", "shuffle_buffer_size", "max_samples_per_sequence", "multimodal_sample_config",
    "task_encoder", "decoder_seq_length", "packing_buffer_size", "validation_task_encoder",
    "pg_collection",
]  # fmt: skip
#: Bridge 0.3's (the newest on the package index): two more, image_processor and global_batch_size.
BRIDGE_03_PARAMETERS = [*BRIDGE_PARAMETERS[:2], "image_processor", *BRIDGE_PARAMETERS[2:4],
                        "global_batch_size", *BRIDGE_PARAMETERS[4:-1]]  # fmt: skip


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> str:
    """60 demo samples in 6 shards: 40 train, 10 val, 10 test."""
    root = tmp_path_factory.mktemp("megatron") / "demo"
    return str(make_demo_dataset(root, count=60, samples_per_shard=10))


@pytest.fixture(scope="module")
def tokenizer(dataset: str) -> WordTokenizer:
    return WordTokenizer(captions(dataset))


def data_module(dataset: str, tokenizer: WordTokenizer, **options: object) -> MultiModalDataModule:
    settings: dict[str, object] = {
        "seq_length": 16,
        "micro_batch_size": 4,
        "num_workers": 0,
        "shuffle_buffer_size": 10,
        "max_samples_per_sequence": 5,
        "multimodal_sample_config": MultiModalSampleConfig(image_tokens_per_image=2),
    }
    settings.update(options)
    return MultiModalDataModule(dataset, tokenizer, ResizeNormalize(16), **settings)  # type: ignore[arg-type]


def keys(iterator: EnergonDataloader, batches: int) -> list[list[str]]:
    return [next(iterator).__key__ for _ in range(batches)]


def flat(lists: Iterable[list[str]]) -> list[str]:
    return list(itertools.chain.from_iterable(lists))


def installed_bridge_parameters() -> list[str] | None:
    """The parameters of the installed Bridge's data module, read from its source (importing it
    imports megatron-core)."""
    spec = importlib.util.find_spec("megatron.bridge")
    if spec is None or not spec.submodule_search_locations:
        return None
    source = Path(spec.submodule_search_locations[0], "data/energon/base_energon_datamodule.py")
    for node in ast.walk(ast.parse(source.read_text())):
        if isinstance(node, ast.FunctionDef) and node.name == "__init__":
            return [a.arg for a in node.args.args[1:]]
    return None


def test_constructor_takes_current_and_old_bridge_arguments(dataset: str) -> None:
    assert EnergonMultiModalDataModule is MultiModalDataModule
    parameters = inspect.signature(MultiModalDataModule).parameters
    assert list(parameters) == [
        *BRIDGE_PARAMETERS,
        "image_processor",
        "global_batch_size",
        "kwargs",
    ]
    assert parameters["image_processor"].kind is inspect.Parameter.KEYWORD_ONLY
    assert installed_bridge_parameters() in (BRIDGE_03_PARAMETERS, BRIDGE_PARAMETERS)

    image_processor = ResizeNormalize(8)
    current = {"path": dataset, "tokenizer": "tok", "seq_length": 16, "micro_batch_size": 4,
               "num_workers": 3}  # fmt: skip
    old = {"image_processor": image_processor, "global_batch_size": 8}
    calls: dict[str, tuple[tuple[object, ...], dict[str, object]]] = {
        "current, positional": ((dataset, "tok", 16, 4, 3), {}),
        "current, keyword": ((), current),
        "current + image_processor": ((dataset, "tok", 16, 4, 3), old),
        "0.3, positional": ((dataset, "tok", image_processor, 16, 4, 8, 3), {}),
        "0.3, keyword": ((), {**current, **old}),
    }
    for name, (args, kwargs) in calls.items():
        data = MultiModalDataModule(*args, **kwargs, virtual_workers=6)
        with_processor = "0.3" in name or "+" in name
        seen = (data.seq_length, data.micro_batch_size, data.num_workers, data.num_val_workers)
        assert seen == (16, 4, 3, 3), name
        assert data.image_processor is (image_processor if with_processor else None), name
        assert data.global_batch_size == (8 if with_processor else None), name
        assert data.kwargs == {"virtual_workers": 6}, name
        assert (data.init_global_step, data.train_dataloader_object) == (0, None), name
        assert data.val_dataloader_object is None, name
    with pytest.raises(TypeError, match="multiple values for argument 'image_processor'"):
        MultiModalDataModule(dataset, "tok", image_processor, 16, image_processor=image_processor)
    with pytest.raises(ConfigError, match="global_batch_size=0"):
        MultiModalDataModule(dataset, "tok", global_batch_size=0)


def test_loader_objects_are_the_savable_loaders(dataset: str, tokenizer: WordTokenizer) -> None:
    """Bridge's attributes hold the loaders: ``save_state_rank`` / ``restore_state_rank`` on
    ``train_dataloader_object`` (as Bridge 0.3 users resume) move the iterator."""
    data = data_module(dataset, tokenizer, num_workers=1)
    train, val = data.build()
    assert isinstance(data.train_dataloader_object, Loader)
    assert isinstance(data.val_dataloader_object, Loader)
    assert data.train_dataloader() is train and data.val_dataloader() is val
    keys(train, 3)
    state = data.train_dataloader_object.save_state_rank()
    expected = keys(train, 4)
    resumed = data_module(dataset, tokenizer, num_workers=1)
    iterator = resumed.train_dataloader()
    assert resumed.train_dataloader_object is not None
    resumed.train_dataloader_object.restore_state_rank(state)
    assert keys(iterator, 4) == expected
    for loader in (data.train_dataloader_object, data.val_dataloader_object,
                   resumed.train_dataloader_object):  # fmt: skip
        loader.close()


def test_micro_batches_are_fixed_length_captioning_sequences(
    dataset: str, tokenizer: WordTokenizer
) -> None:
    data = data_module(dataset, tokenizer)
    batch = next(data.train_dataloader())
    assert isinstance(batch, MultiModalBatch)
    assert batch.tokens.shape == batch.labels.shape == batch.loss_mask.shape == (4, 16)
    assert batch.images.shape == (4, 3, 16, 16)
    assert batch.num_images.tolist() == [1, 1, 1, 1]
    for row in range(4):
        tokens, labels = batch.tokens[row].tolist(), batch.labels[row].tolist()
        assert tokens[:2] == [IMAGE, IMAGE]
        length = int((batch.segment_ids[row] == 1).sum())  # caption words + [EOS]
        caption = tokens[2:length]
        assert caption[-1] == tokenizer.eos_token_id
        assert CAPTION.fullmatch(tokenizer.decode(caption[:-1]))
        assert tokens[length:] == [tokenizer.pad_token_id] * (16 - length)
        # trained: from the image's last placeholder on, each position predicts the next token
        assert labels[1 : length - 1] == tokens[2:length]
        assert labels[:1] + labels[length - 1 :] == [-100] * (18 - length)
        assert batch.loss_mask[row].sum() == length - 2
        assert batch.position_ids[row, :length].tolist() == list(range(length))
    assert data.test_dataloader() is None


def test_task_encoder_trains_only_the_answer(tokenizer: WordTokenizer) -> None:
    encoder = MultiModalTaskEncoder(tokenizer, ResizeNormalize(8), seq_length=8)
    vqa = VQASample(
        __key__="q", __restore_key__=(), image=torch.rand(3, 5, 7), context="a", answers=["red"]
    )
    words = "a blue square circle red green a blue"  # 8 words + [EOS]: cut to 8 tokens
    text = TextSample(__key__="t", __restore_key__=(), text=words)
    batch = encoder.batch([encoder.encode_sample(vqa), encoder.encode_sample(text)])
    a, red, eos = [*tokenizer.encode("a red"), tokenizer.eos_token_id]
    assert batch.tokens[0].tolist() == [IMAGE, a, red, eos] + [tokenizer.pad_token_id] * 4
    assert batch.labels[0].tolist() == [-100, red, eos] + [-100] * 5
    assert batch.images.shape == (1, 3, 8, 8)  # the text sample has no image
    assert batch.num_images.tolist() == [1, 0]
    assert batch.tokens[1].tolist() == tokenizer.encode(words)
    assert batch.labels[1].tolist() == [*batch.tokens[1, 1:].tolist(), -100]
    with pytest.raises(ConfigError, match="leave no room"):
        MultiModalTaskEncoder(
            tokenizer, None, 2, MultiModalSampleConfig(image_tokens_per_image=2)
        ).encode_sample(vqa)


def test_restore_from_checkpoint_dict_continues_the_stream(
    dataset: str, tokenizer: WordTokenizer
) -> None:
    train = data_module(dataset, tokenizer, num_workers=1).train_dataloader()
    keys(train, 7)  # a pass is 10 micro-batches: the next 6 cross into the second
    state = json.loads(json.dumps(train.save_state()))  # plain data
    expected = keys(train, 6)
    train.loader.close()

    before = data_module(dataset, tokenizer, num_workers=1)
    before.load_state_dict({"dataloader_state_dict": state, "model": {}})  # Megatron-LM's layout
    assert keys(before.train_dataloader(), 6) == expected
    assert before.state_dict()["dataloader_state"]["yielded"] == 13

    after = data_module(dataset, tokenizer, num_workers=1).train_dataloader()
    keys(after, 2)
    after.restore_state({"dataloader_state": state})
    assert keys(after, 6) == expected
    for iterator in (before.train_dataloader(), after):
        iterator.loader.close()
    with pytest.raises(ConfigError, match="no stoker loader state"):
        before.load_state_dict({"model": {}})


def test_validation_cycles_over_the_whole_split(dataset: str, tokenizer: WordTokenizer) -> None:
    val = data_module(dataset, tokenizer).val_dataloader()
    first, second = keys(val, 3), keys(val, 3)  # 10 samples: micro-batches of 4, 4, 2
    assert [len(k) for k in first] == [4, 4, 2]
    assert first == second  # in order, and the same every pass
    config = WorkerConfig(rank=0, world_size=1, num_workers=0)
    (split,) = get_loader(get_val_dataset(dataset, split_part="val", worker_config=config,
                                          batch_size=10))  # fmt: skip
    assert sorted(flat(first)) == sorted(split.__key__)


def test_cyclic_iter_continues_into_the_next_epoch(dataset: str) -> None:
    worker_config = WorkerConfig(rank=0, world_size=1, num_workers=0)
    one_pass = get_train_dataset(
        dataset,
        worker_config=worker_config,
        batch_size=8,
        shuffle_buffer_size=10,
        max_samples_per_sequence=5,
        repeat=False,
    )
    loader = cyclic_iter(get_loader(one_pass))
    epochs = [flat(next(loader).__key__ for _ in range(5)) for _ in range(2)]
    assert sorted(epochs[0]) == sorted(epochs[1]) == [f"{i:06d}" for i in range(40)]
    assert epochs[0] != epochs[1]  # each epoch has its own order
    assert list(cyclic_iter([])) == []


def test_packing_fills_sequences_with_whole_samples(dataset: str, tokenizer: WordTokenizer) -> None:
    data = data_module(dataset, tokenizer, seq_length=24, micro_batch_size=2, packing_buffer_size=6)
    val = data.val_dataloader().loader  # one pass over the 10 validation samples
    packed = [row for batch in val for row in zip(*astuple(batch), strict=True)]
    members = [key for row in packed for key in row[0].split(",")]
    assert sorted(members) == [f"{i:06d}" for i in range(40, 50)]
    assert len(packed) < 10  # several samples share a sequence
    for key, num_images, tokens, segments, positions in packed:
        assert int(num_images) == int(segments.max()) == len(key.split(","))
        starts = torch.nonzero(positions == 0).flatten().tolist()[: len(key.split(","))]
        assert all(tokens[s : s + 2].tolist() == [IMAGE, IMAGE] for s in starts)


def astuple(batch: MultiModalBatch) -> tuple[object, ...]:
    return batch.__key__, batch.num_images, batch.tokens, batch.segment_ids, batch.position_ids


def test_single_process_is_data_parallel_rank_zero() -> None:
    place = data_parallel_place()
    assert (place.rank, place.world_size, place.source) == (0, 1, "single-process")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow
@pytest.mark.skipif(
    importlib.util.find_spec("megatron.core") is None, reason="megatron-core is not installed"
)
def test_context_parallel_peers_receive_identical_micro_batches(
    dataset: str, tmp_path: Path
) -> None:
    from torch import multiprocessing

    from tests.integration._integ_ranks import run_rank

    world_size = 4  # order tp-cp-ep-dp-pp: ranks 0, 1 are one replica, 2, 3 the other
    # The ranks fork from a fresh server process that imported megatron-core once (seconds of
    # CPU per import), rather than each importing it; this process never imports it.
    multiprocessing.set_forkserver_preload(
        ["megatron.core.parallel_state", "megatron.core.process_groups_config", run_rank.__module__]
    )
    multiprocessing.start_processes(
        run_rank,
        args=(world_size, free_port(), dataset, str(tmp_path)),
        nprocs=world_size,
        start_method="forkserver",
    )
    reports = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(world_size)]
    assert [r["before"] for r in reports] == [[r, 4, "torch.distributed"] for r in range(4)]
    assert [r["after"] for r in reports] == [[r // 2, 2, "megatron"] for r in range(4)]
    assert [r["cp_rank"] for r in reports] == [0, 1, 0, 1]
    for report in reports:
        assert report["pg_collection"] == report["parallel_state"]
        assert report["parallel_state"]["world_size"] == 2
    seen = [r["parallel_state"] for r in reports]
    assert seen[0] == seen[1] and seen[2] == seen[3]  # context-parallel peers: same data
    train = [set(flat(s["train"])) for s in seen]
    assert not train[0] & train[2]  # the two replicas: disjoint data
    for report in reports:  # the training-loader state rank 0 saved restores every rank
        assert report["resume"]["ranks"] == [0, 1]
        assert report["resume"]["restored"] == report["resume"]["expected"]
    assert reports[0]["resume"] == reports[1]["resume"]
    assert reports[0]["resume"]["expected"] != reports[2]["resume"]["expected"]
    val = [set(flat(s["val"])) for s in seen]  # 3 micro-batches of 2, 2, 1: a whole pass
    assert not val[0] & val[2]
    assert sorted(val[0] | val[2]) == [f"{i:06d}" for i in range(40, 50)]


def test_loader_options_reach_both_loaders(dataset: str, tokenizer: WordTokenizer) -> None:
    options = LoaderOptions(prefetch_bytes=1 << 20, prefetch_threads=2, batch_slots_mb=0)
    data = data_module(dataset, tokenizer, num_workers=1, options=options)
    train, _ = data.build()
    assert data.train_dataloader_object is not None and data.val_dataloader_object is not None
    assert data.train_dataloader_object.options is options
    assert data.val_dataloader_object.options is options
    assert [len(k) for k in keys(train, 2)] == [4, 4]  # loads with them
    data.train_dataloader_object.close()
    data.val_dataloader_object.close()


def test_stats_for_the_training_loop(
    dataset: str, tokenizer: WordTokenizer, caplog: pytest.LogCaptureFixture
) -> None:
    """``stats()`` gives the training loader's figures (None before it is built) and
    ``log_stats_every`` logs lines on the ``stoker`` logger, with real workers."""
    import logging

    caplog.set_level(logging.INFO, logger="stoker")
    data = data_module(dataset, tokenizer, num_workers=2, log_stats_every=1e-6)
    assert data.stats() is None
    train = data.train_dataloader()
    keys(train, 3)
    stats = data.stats()
    assert stats is not None and stats.batches == 3 and stats.samples == 12
    assert stats.flat()["data/samples"] == 12.0
    lines = [r.getMessage() for r in caplog.records if r.name == "stoker"]
    assert len(lines) == 3 and all(" samples/s (4 samples)" in line for line in lines), lines
    assert data.train_dataloader_object is not None
    data.train_dataloader_object.close()
