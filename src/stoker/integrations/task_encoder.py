"""The default vision-language task encoder: tokenizer + image processor -> fixed-length batches.

It encodes image-text samples (``CaptioningSample``, ``VQASample``, ``TextSample``, or anything
with an ``image`` and a ``caption``, ``context``/``answers`` or ``text``) into sequences laid out
as in :mod:`stoker.integrations.sequences`, and batches them padded to ``seq_length``. When the
loader has a ``packing_buffer_size``, it packs several sequences into one of at most
``seq_length`` tokens with first-fit-decreasing.

Example:
    >>> from stoker import get_loader, get_train_dataset
    >>> encoder = MultiModalTaskEncoder(tokenizer, image_processor, seq_length=64)
    >>> ds = get_train_dataset(path, task_encoder=encoder, batch_size=8, worker_config=wc,
    ...                        shuffle_buffer_size=10, max_samples_per_sequence=10)
    >>> next(iter(get_loader(ds))).tokens.shape
    torch.Size([8, 64])
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from stoker.errors import SampleError
from stoker.integrations.adapters import processed_image, special_token_id, token_ids
from stoker.integrations.sequences import (
    MultiModalBatch,
    MultiModalSample,
    first_fit_decreasing,
    layout,
    pack,
    pad_batch,
)
from stoker.model.task import TaskEncoder, stateless

_PAD_NAMES = ("pad_token_id", "pad_id", "pad")
_EOS_NAMES = ("eos_token_id", "eos_id", "eod", "eos")


@dataclass(frozen=True)
class MultiModalSampleConfig:
    """How samples become token sequences (Megatron-Bridge's ``multimodal_sample_config``).

    Args:
        image_token_id: Placeholder id where the model inserts image embeddings (Megatron's
            LLaVA uses -200).
        image_tokens_per_image: Placeholders per image (1 when the model expands them).
        ignore_index: Label of positions without loss.
        prompt: Text before the caption of a captioning sample.
        pad_token_id: Padding id (None: the tokenizer's ``pad_token_id``/``pad_id``/``pad``,
            else 0).
        eos_token_id: Appended after the answer (None: the tokenizer's
            ``eos_token_id``/``eos_id``/``eod``/``eos``, else nothing).
    """

    image_token_id: int = -200
    image_tokens_per_image: int = 1
    ignore_index: int = -100
    prompt: str = ""
    pad_token_id: int | None = None
    eos_token_id: int | None = None


class MultiModalTaskEncoder(
    TaskEncoder[Any, MultiModalSample, list[MultiModalSample], MultiModalBatch]
):
    """Tokenize text and process images into fixed-length (optionally packed) sequences.

    Args:
        tokenizer: See :func:`stoker.integrations.adapters.token_ids` for what is accepted.
        image_processor: A callable ``(C, H, W) tensor -> tensor`` (e.g. resize + normalize),
            or a Hugging Face image processor; None keeps the decoded image (then all images
            must have the same size to be batched).
        seq_length: Tokens per sequence in a batch; longer samples are cut.
        config: Placeholder, padding and label settings.

    Packing is on when the loader has a ``packing_buffer_size``; this encoder provides the hooks.
    """

    def __init__(
        self,
        tokenizer: Any,
        image_processor: Any,
        seq_length: int = 2048,
        config: MultiModalSampleConfig | None = None,
    ) -> None:
        self.tokenizer = tokenizer
        self.image_processor = image_processor
        self.seq_length = seq_length
        self.config = config or MultiModalSampleConfig()
        pad = self.config.pad_token_id
        if pad is None:
            pad = special_token_id(tokenizer, _PAD_NAMES)
        self.pad_token_id = 0 if pad is None else pad
        eos = self.config.eos_token_id
        self.eos_token_id = eos if eos is not None else special_token_id(tokenizer, _EOS_NAMES)

    @stateless
    def encode_sample(self, sample: Any) -> MultiModalSample:
        prompt, answer = self.prompt_and_answer(sample)
        image = getattr(sample, "image", None)
        images = [] if image is None else [processed_image(self.image_processor, image)]
        answer_ids = token_ids(self.tokenizer, answer)
        if self.eos_token_id is not None:
            answer_ids.append(self.eos_token_id)
        return layout(
            sample.__key__,
            torch.stack(images) if images else torch.zeros(0),
            token_ids(self.tokenizer, prompt) if prompt else [],
            answer_ids,
            image_token_id=self.config.image_token_id,
            image_tokens=self.config.image_tokens_per_image,
            ignore_index=self.config.ignore_index,
            max_length=self.seq_length,
        )

    def prompt_and_answer(self, sample: Any) -> tuple[str, str]:
        """(prompt, answer) of a sample; override it for other sample types."""
        if hasattr(sample, "caption"):
            return self.config.prompt, str(sample.caption)
        if hasattr(sample, "context") and hasattr(sample, "answers"):
            answers = sample.answers
            answer = answers[0] if isinstance(answers, list | tuple) and answers else answers
            return str(sample.context), str(answer or "")
        if hasattr(sample, "text"):
            return "", str(sample.text)
        raise SampleError(
            f"{type(sample).__name__} has no caption, context/answers or text to train on.",
            hint="Subclass MultiModalTaskEncoder and override prompt_and_answer(sample).",
        )

    def select_samples_to_pack(self, samples: list[MultiModalSample]) -> list[list[Any]]:
        """First-fit-decreasing bins of at most ``seq_length`` tokens."""
        bins = first_fit_decreasing([len(s.tokens) for s in samples], self.seq_length)
        return [[samples[i] for i in b] for b in bins]

    @stateless
    def pack_selected_samples(self, samples: list[MultiModalSample]) -> MultiModalSample:
        return pack(samples)

    @stateless
    def batch(self, samples: list[MultiModalSample]) -> MultiModalBatch:
        return pad_batch(
            samples,
            seq_length=self.seq_length,
            pad_token_id=self.pad_token_id,
            ignore_index=self.config.ignore_index,
        )
