"""The pieces both data modules stand on: loader wrappers, their states, the adapters.

(Restoring every rank from the state rank 0 saves is tested on real gloo processes in
``test_integrations_megatron.py``.)
"""

from __future__ import annotations

import importlib
import itertools
import json
import sys

import pytest
import torch

pytest.importorskip("tokenizers")  # the `integrations` dependency group

from stoker import WorkerConfig, get_savable_loader, get_train_dataset, get_val_dataset
from stoker.errors import ConfigError
from stoker.integrations.adapters import processed_image, special_token_id, token_ids
from stoker.integrations.loaders import RestartingLoader, ResumableLoader, find_loader_state
from tests.integration._images import make_image_dataset

SINGLE = WorkerConfig(rank=0, world_size=1, num_workers=0)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, list[str]]]:
    root = tmp_path_factory.mktemp("loaders") / "ds"
    keys = make_image_dataset(root, {"train": {"train_a": 7, "train_b": 6}, "val": {"val_a": 5}})
    return str(root), keys


def train_loader(path: str, worker_config: WorkerConfig = SINGLE) -> ResumableLoader:
    ds = get_train_dataset(
        path,
        worker_config=worker_config,
        batch_size=2,
        shuffle_buffer_size=5,
        max_samples_per_sequence=3,
    )
    return ResumableLoader(get_savable_loader(ds))


def keys(loader: ResumableLoader | RestartingLoader, batches: int) -> list[list[str]]:
    return [batch.__key__ for batch in itertools.islice(loader, batches)]


def test_training_loader_continues_at_each_iter_and_restores(
    dataset: tuple[str, dict[str, list[str]]],
) -> None:
    path, _ = dataset
    loader = train_loader(path)
    assert len(loader) == 7  # 13 samples in batches of 2: what a framework counts as an epoch
    first, second = keys(loader, 3), keys(loader, 3)  # two iter() calls: one stream
    state = loader.state_dict()
    expected = keys(loader, 5)
    whole = train_loader(path)
    assert keys(whole, 6) == first + second
    (rank_state,) = state["ranks"]
    for saved in (state, rank_state, {"dataloader_state_dict": rank_state}):
        restored = train_loader(path)
        restored.load_state_dict(json.loads(json.dumps(saved)))
        assert keys(restored, 5) == expected


def test_validation_loader_starts_over_at_each_iter(
    dataset: tuple[str, dict[str, list[str]]],
) -> None:
    path, all_keys = dataset
    val = RestartingLoader(
        get_savable_loader(get_val_dataset(path, worker_config=SINGLE, batch_size=2))
    )
    assert keys(val, 1) == [all_keys["val"][:2]]  # cut short, as Lightning's sanity check does
    for _ in range(2):
        assert [k for batch in val for k in batch.__key__] == all_keys["val"]


def test_find_loader_state_names_what_it_accepts() -> None:
    state = {"stoker_state_version": 1, "t": 3}
    assert find_loader_state(state) == state
    assert find_loader_state({"dataloader_state": state, "model": {}}) == state
    with pytest.raises(ConfigError, match="dataloader_state_dict"):
        find_loader_state({"model": {}})


def test_token_ids_from_every_kind_of_tokenizer() -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {"[UNK]": 0, "a": 1, "red": 2, "circle": 3}
    hf_tokenizers = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    hf_tokenizers.pre_tokenizer = pre_tokenizers.Whitespace()

    class Megatron:  # tokenize(text) -> ids, as Megatron's tokenizers
        eod = 9

        def tokenize(self, text: str) -> list[int]:
            return [vocab[w] for w in text.split()]

    for tokenizer in (
        hf_tokenizers,  # encode(text) -> Encoding
        Megatron(),
        lambda text: {"input_ids": torch.tensor([[vocab[w] for w in text.split()]])},
    ):
        assert token_ids(tokenizer, "a red circle") == [1, 2, 3]
    assert special_token_id(Megatron(), ("eos_token_id", "eod")) == 9
    assert special_token_id(Megatron(), ("pad_token_id",)) is None
    with pytest.raises(ConfigError, match="not a list of token ids"):
        token_ids(lambda text: text.split(), "a red circle")
    with pytest.raises(ConfigError, match="cannot tokenize"):
        token_ids(42, "a red circle")


def test_processed_image_unwraps_image_processor_outputs() -> None:
    image = torch.rand(3, 4, 5)
    assert processed_image(None, image).shape == (3, 4, 5)
    hf_style = processed_image(lambda im: {"pixel_values": [im[None].numpy()]}, image)
    assert torch.equal(hf_style, image)
    with pytest.raises(ConfigError, match=r"not \(C, H, W\)"):
        processed_image(lambda im: im[0], image)


def test_lightning_integration_says_how_to_install_lightning(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "pytorch_lightning", None)  # as if not installed
    monkeypatch.delitem(sys.modules, "stoker.integrations.lightning", raising=False)
    with pytest.raises(ImportError, match=r"pip install 'stoker\[lightning\]'"):
        importlib.import_module("stoker.integrations.lightning")
