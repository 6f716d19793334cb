"""The data side of the VLM examples: the demo dataset, an offline tokenizer, an image processor.

- :func:`make_demo_dataset` makes the dataset ``make demo`` makes (``scripts/demo.sh``): images of
  one shape in one colour, captioned ``"a red circle"``, packed into shards of 40 and prepared
  with an 8:1:1 split as ``CaptioningSample``.
- :class:`WordTokenizer` is a word-level tokenizer trained on the fly with Hugging Face
  ``tokenizers`` on the training captions: no download.
- :class:`ResizeNormalize` is the image processor: resize to a square, normalise per channel.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path

import torch
from tokenizers import Tokenizer, models, pre_tokenizers, trainers

from stoker import WorkerConfig, get_loader, get_val_dataset, prepare_dataset
from stoker.format.dataset_config import make_dataset_yaml
from stoker.format.pack import pack

#: The demo's raw files: images of one coloured shape each, captioned "a red circle".
MAKE_FILES = Path(__file__).resolve().parent.parent / "scripts" / "make_demo_files.py"
PAD, EOS, UNK = "[PAD]", "[EOS]", "[UNK]"
# The tokenizer is trained with threads before dataloader workers fork: keep it single-threaded.
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def make_demo_dataset(
    out: Path, count: int = 240, samples_per_shard: int = 40, seed: int = 0
) -> Path:
    """Draw ``count`` captioned images, pack them into ``out`` and prepare it; returns ``out``.

    Shards are split 8:1:1 into train, val and test (whole shards, as ``energon prepare``).
    """
    with tempfile.TemporaryDirectory() as raw:
        files = [sys.executable, str(MAKE_FILES), raw, "--count", str(count), "--seed", str(seed),
                 "--flat"]  # fmt: skip
        subprocess.run(files, check=True, stdout=subprocess.DEVNULL)
        pack(raw, str(out), samples_per_shard=samples_per_shard)
    prepare_dataset(
        str(out),
        split_ratio="8,1,1",
        dataset_yaml=make_dataset_yaml("CaptioningSample", {"image": "jpg", "caption": "txt"}),
    )
    return out


def captions(path: str, split: str = "train") -> list[str]:
    """Every caption of a split, in order (to train the tokenizer on)."""
    dataset = get_val_dataset(
        path,
        split_part=split,
        worker_config=WorkerConfig(rank=0, world_size=1, num_workers=0),
        batch_size=64,
    )
    return [caption for batch in get_loader(dataset) for caption in batch.caption]


class WordTokenizer:
    """Whitespace word-level tokenizer: ``encode(text) -> ids``, with ``[PAD]`` and ``[EOS]``."""

    def __init__(self, texts: Iterable[str]) -> None:
        self.tokenizer = Tokenizer(models.WordLevel(unk_token=UNK))
        self.tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
        trainer = trainers.WordLevelTrainer(special_tokens=[PAD, EOS, UNK])
        self.tokenizer.train_from_iterator(texts, trainer=trainer)
        self.pad_token_id: int = self.tokenizer.token_to_id(PAD)
        self.eos_token_id: int = self.tokenizer.token_to_id(EOS)
        self.vocab_size: int = self.tokenizer.get_vocab_size()

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text).ids)

    def decode(self, ids: Iterable[int]) -> str:
        return str(self.tokenizer.decode(list(ids)))


class ResizeNormalize:
    """``(C, H, W)`` image in [0, 1] -> ``(C, size, size)``, normalised per channel."""

    def __init__(
        self,
        size: int = 32,
        mean: tuple[float, float, float] = (0.5, 0.5, 0.5),
        std: tuple[float, float, float] = (0.25, 0.25, 0.25),
    ) -> None:
        self.size = size
        self.mean = torch.tensor(mean).view(3, 1, 1)
        self.std = torch.tensor(std).view(3, 1, 1)

    def __call__(self, image: torch.Tensor) -> torch.Tensor:
        image = image.float()
        if image.max() > 1.0:  # uint8 images
            image = image / 255.0
        resized = torch.nn.functional.interpolate(
            image[None], size=(self.size, self.size), mode="bilinear", align_corners=False
        )[0]
        return (resized - self.mean) / self.std
