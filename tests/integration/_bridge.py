"""Megatron-Bridge's real energon code on CPU: its modules, a tiny offline Qwen-VL tokenizer and
image processor, and a small ChatML dataset in the shape Bridge's Qwen-VL cooker reads.

Bridge (``pip install --no-deps megatron-bridge``) is imported module by module: its package
``__init__`` files (``megatron.bridge``, ``.recipes``, ``.recipes.qwen_vl``) import every model
recipe and Transformer Engine, which has no CPU build. :func:`bridge_module` registers those
packages without running their ``__init__`` and then imports the module asked for as usual, so
the data module and the task encoder run exactly as shipped.

The tokenizer is a Hugging Face ``PreTrainedTokenizerFast`` over a word-level ``tokenizers``
model with a Qwen-style chat template; the image processor is transformers'
``Qwen2VLImageProcessor`` with its defaults (14-pixel patches, 2x2 merge): both are built
without network access.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import pickle
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from tests.conftest import write_shard

#: Bridge packages whose ``__init__`` imports Transformer Engine or every recipe.
HEAVY_PACKAGES = ("megatron.bridge", "megatron.bridge.recipes", "megatron.bridge.recipes.qwen_vl")
DATAMODULE = "megatron.bridge.data.energon.base_energon_datamodule"
QWEN_VL_TASK_ENCODER = "megatron.bridge.recipes.qwen_vl.data.energon.task_encoder"

SPECIAL = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|image_pad|>",
    "<|vision_end|>",
    "<|video_pad|>",
]
COLOURS = ["red", "green", "blue", "yellow", "purple", "orange"]
WORDS = ["[UNK]", "system", "user", "assistant", "what", "colour", "is", "it", "this", "the", "."]
WORDS += ["answer", "briefly", "image", "picture", "of", *COLOURS]
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }} "
    "{% if m['content'] is string %}{{ m['content'] }}{% else %}{% for c in m['content'] %}"
    "{% if c['type'] == 'image' %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif c['type'] == 'text' %}{{ c['text'] }}{% endif %}{% endfor %}{% endif %}"
    "<|im_end|> {% endfor %}"
)
#: Image sizes (height, width), multiples of 28: 1x1, 1x2, 2x1 and 2x2 merged tokens.
SIZES = [(28, 28), (28, 56), (56, 28), (56, 56)]
MIN_PIXELS, MAX_PIXELS = 28 * 28, 56 * 56


def bridge_module(name: str) -> ModuleType:
    """Import Bridge's module ``name`` without running the heavy package ``__init__`` files."""
    for package in HEAVY_PACKAGES:
        if package in sys.modules:
            continue
        spec = importlib.util.find_spec(package)
        if spec is None:
            raise ImportError(f"{package} is not installed: pip install --no-deps megatron-bridge")
        sys.modules[package] = importlib.util.module_from_spec(spec)
    return importlib.import_module(name)


def qwen_tokenizer() -> Any:
    """A tiny Qwen-style chat tokenizer (``apply_chat_template``, ``image_token_id``)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {word: i for i, word in enumerate(SPECIAL + WORDS)}
    model = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    model.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(
        tokenizer_object=model,
        unk_token="[UNK]",
        pad_token="<|endoftext|>",
        eos_token="<|im_end|>",
        additional_special_tokens=SPECIAL,
        extra_special_tokens={"image_token": "<|image_pad|>", "video_token": "<|video_pad|>"},
        chat_template=CHAT_TEMPLATE,
    )


def qwen_image_processor() -> Any:
    """transformers' Qwen2-VL image processor with its default patching."""
    from transformers import Qwen2VLImageProcessor

    return Qwen2VLImageProcessor(min_pixels=MIN_PIXELS, max_pixels=MAX_PIXELS)


def conversation(index: int) -> list[dict[str, str]]:
    """A GPT-style conversation about ``index``'s image(s); every third has a system turn."""
    colour = COLOURS[index % len(COLOURS)]
    images = "<image> " * (1 + index % 2)
    turns = [
        {"from": "human", "value": f"{images}what colour is it"},
        {"from": "gpt", "value": f"{colour} ."},
    ]
    if index % 3 == 0:
        turns.insert(0, {"from": "system", "value": "answer briefly ."})
    return turns


def chatml_sample(index: int) -> dict[str, bytes]:
    """The parts Bridge's ``cook_chatml_sample`` reads: pickled ``jpgs`` and a ``json`` chat."""
    images = []
    for n in range(1 + index % 2):
        height, width = SIZES[(index + n) % len(SIZES)]
        images.append(np.full((height, width, 3), (index * 9 + n) % 256, dtype=np.uint8))
    return {"jpgs": pickle.dumps(images), "json": json.dumps(conversation(index)).encode()}


def answer_of(key: str) -> str:
    """The assistant's answer of the sample with ``key``."""
    return conversation(int(key.rsplit("_", 1)[1]))[-1]["value"]


def images_of(key: str) -> int:
    """How many images the sample with ``key`` has."""
    return 1 + int(key.rsplit("_", 1)[1]) % 2


def write_chatml_dataset(root: Path, train_shards: int = 3, per_shard: int = 8) -> Path:
    """Train and val shards of ChatML samples, prepared, read as Bridge's crude ChatML data."""
    from stoker import prepare_dataset

    index = 0
    for split, shards in (("train", train_shards), ("val", 1)):
        for shard in range(shards):
            samples = [
                (f"{split}_{index + i:04d}", chatml_sample(index + i)) for i in range(per_shard)
            ]
            write_shard(root / f"{split}-{shard:03d}.tar", samples)
            index += per_shard
    prepare_dataset(
        str(root),
        split_parts=[("train", "train-"), ("val", "val-")],
        dataset_yaml={"__module__": "megatron.energon", "__class__": "CrudeWebdataset"},
    )
    return root
