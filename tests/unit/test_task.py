"""Task encoders: hooks and defaults, generators, skipping, error policy, seeded stateless hooks."""

from __future__ import annotations

import dataclasses
import logging
import pickle
import random
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import torch

from stoker.errors import ConfigError, SampleError, StokerError
from stoker.model.samples import CaptioningSample, SourceInfo, TextSample
from stoker.model.task import (
    DefaultTaskEncoder,
    ErrorPolicy,
    ErrorTracker,
    IgnoreSample,
    SkipSample,
    TaskEncoder,
    get_stateless,
    iter_encoded,
    sample_seed,
    stateless,
)
from stoker.pipeline.decode import SampleDecoder

SRC = SourceInfo(dataset_path="/data/ds", index=7, shard_name="shard_003.tar", file_names=())


def text(key: str = "k", restore: tuple[Any, ...] = ("Webdataset", 0), t: str = "t") -> TextSample:
    return TextSample(__key__=key, __restore_key__=restore, __sources__=(SRC,), text=t)


def test_defaults() -> None:
    encoder: TaskEncoder[Any, Any, Any, Any] = TaskEncoder()
    sample = text()
    assert isinstance(encoder.decoder, SampleDecoder) and encoder.decoder.image_decode == "torchrgb"
    assert list(encoder.cookers) == []
    assert encoder.encode_sample(sample) is sample
    assert (
        encoder.preencode_sample(sample) is sample and encoder.postencode_sample(sample) is sample
    )
    batch = encoder.batch([text("a", t="x"), text("b", t="y")])
    assert isinstance(batch, TextSample) and batch.text == ["x", "y"]  # type: ignore[comparison-overlap]
    assert encoder.encode_batch(batch) is batch
    for hook in (encoder.select_samples_to_pack, encoder.pack_selected_samples):
        with pytest.raises(NotImplementedError, match="packing"):
            hook([sample])
    assert encoder.batch_group_criterion(sample) == (None, None)  # one group (Energon's)
    assert get_stateless(TaskEncoder.encode_sample)


class Splitter(TaskEncoder[Any, Any, Any, Any]):
    """Yields one output per word; skips empty texts; fails on 'boom'."""

    def encode_sample(self, sample: TextSample) -> Iterator[str]:
        if sample.text == "boom":
            raise ValueError("exploded")
        if not sample.text:
            raise IgnoreSample()
        yield from sample.text.split()


def test_iter_encoded_values_generators_and_skips() -> None:
    assert list(iter_encoded(TaskEncoder(), "x")) == ["x"]
    assert list(iter_encoded(Splitter(), text(t="a b c"))) == ["a", "b", "c"]
    assert list(iter_encoded(Splitter(), text(t="   "))) == []
    tracker = ErrorTracker()
    assert list(iter_encoded(Splitter(), text(t=""), tracker=tracker)) == []
    assert tracker.skipped == {"encode_sample: SkipSample": 1}
    assert IgnoreSample is SkipSample


def test_hook_exception_is_wrapped_with_key_and_sources() -> None:
    with pytest.raises(SampleError) as info:
        list(iter_encoded(Splitter(), text("s-9", t="boom")))
    message = str(info.value)
    assert "s-9" in message and "shard_003.tar[7]" in message
    assert "ValueError" in message and "exploded" in message
    assert isinstance(info.value.__cause__, ValueError)


def test_error_policy_skip_logs_counts_and_limits(caplog: pytest.LogCaptureFixture) -> None:
    tracker = ErrorTracker(ErrorPolicy(mode="skip", max_consecutive_failures=3))
    with caplog.at_level(logging.WARNING, logger="stoker"):
        tracker.failed(ValueError("a"), text("k1"), "encode_sample")
        tracker.failed(KeyError("b"), "/data/shard.tar, sample 'k2'", "decode")
    assert tracker.skipped == {"encode_sample: ValueError": 1, "decode: KeyError": 1}
    assert "k1" in caplog.text and "shard_003.tar[7]" in caplog.text and "k2" in caplog.text
    tracker.succeeded()
    tracker.failed(ValueError("c"), text(), "encode_sample")
    tracker.failed(ValueError("d"), text(), "encode_sample")
    with pytest.raises(StokerError, match="3 samples failed in a row"):
        tracker.failed(ValueError("e"), text(), "encode_sample")


def test_error_policy_raise_and_fatal_errors() -> None:
    tracker = ErrorTracker(ErrorPolicy(mode="raise"))
    with pytest.raises(SampleError, match="'k5'"):
        tracker.failed(ValueError("x"), text("k5"), "encode_sample")
    with pytest.raises(ConfigError):
        ErrorTracker().failed(ConfigError("bad config"), text(), "decode")
    with pytest.raises(NotImplementedError):
        ErrorTracker().failed(NotImplementedError("no hook"), text(), "pack")
    unlimited = ErrorTracker(ErrorPolicy(max_consecutive_failures=0))
    for _ in range(500):
        unlimited.failed(ValueError("x"), text(), "encode_sample")
    assert unlimited.consecutive == 500
    with pytest.raises(StokerError, match="mode"):
        ErrorPolicy(mode="ignore")  # type: ignore[arg-type]


def test_sample_error_survives_pickling() -> None:
    error = pickle.loads(pickle.dumps(SampleError("bad", key="k", part="jpg", hint="h")))
    assert isinstance(error, SampleError) and (error.key, error.part, error.hint) == (
        "k",
        "jpg",
        "h",
    )


def draws() -> tuple[float, float, float]:
    return random.random(), float(np.random.rand()), float(torch.rand(()))


class Augment(TaskEncoder[Any, Any, Any, Any]):
    @stateless(restore_seeds=True)
    def encode_sample(self, sample: Any) -> tuple[float, float, float]:
        return draws()

    @stateless(restore_seeds=True)
    def preencode_sample(self, sample: Any) -> Iterator[tuple[float, float, float]]:
        yield draws()
        random.random()  # the caller's RNG use between yields must not shift ours
        yield draws()


def test_restore_seeds_repeats_draws_per_sample() -> None:
    encoder = Augment()
    first = encoder.encode_sample(text("a"))
    assert encoder.encode_sample(text("a")) == first
    assert encoder.encode_sample(text("b")) != first
    assert encoder.encode_sample(text("a", restore=("Webdataset", 1))) != first
    assert encoder.encode_sample({"__key__": "a", "__restore_key__": ("Webdataset", 0)}) == first
    assert get_stateless(Augment.encode_sample)


def test_restore_seeds_restores_global_rng_state() -> None:
    random.seed(1), np.random.seed(1), torch.manual_seed(1)
    expected = draws()
    random.seed(1), np.random.seed(1), torch.manual_seed(1)
    Augment().encode_sample(text())
    assert draws() == expected


def test_restore_seeds_generator_is_isolated_from_caller() -> None:
    encoder = Augment()
    plain = list(encoder.preencode_sample(text("g")))
    random.seed(5)
    caller_alone = [random.random() for _ in range(3)]
    random.seed(5)
    interleaved, caller = [], [random.random()]
    for item in encoder.preencode_sample(text("g")):
        interleaved.append(item)
        caller.append(random.random())  # the caller draws between items
    assert interleaved == plain and plain[0] != plain[1]
    assert caller == caller_alone


def test_sample_seed_needs_a_sample() -> None:
    assert sample_seed(text("a")) == sample_seed(text("a")) != sample_seed(text("b"))
    assert sample_seed(3, [text("a"), text("b")]) != sample_seed([text("b"), text("a")])
    with pytest.raises(StokerError, match="no sample"):
        sample_seed(1, "x")


@dataclasses.dataclass
class Encoded:
    __key__: Any
    __restore_key__: Any
    __subflavors__: Any
    __sources__: Any
    image: Any
    caption: Any


@dataclasses.dataclass
class Final:
    __key__: Any
    __restore_key__: Any
    __subflavors__: Any
    __sources__: Any
    image: Any
    caption: Any


def test_default_task_encoder_converts_types() -> None:
    sample = CaptioningSample(
        __key__="k", __restore_key__=(), image=torch.ones(3, 2, 2, dtype=torch.uint8), caption="c"
    )
    as_dict = DefaultTaskEncoder(encoded_sample_type=dict).encode_sample(sample)
    assert isinstance(as_dict, dict) and as_dict["caption"] == "c"
    encoder = DefaultTaskEncoder(
        encoded_sample_type=Encoded, raw_batch_type=Encoded, batch_type=Final
    )
    encoded = encoder.encode_sample(sample)
    assert isinstance(encoded, Encoded)
    batch = encoder.encode_batch(encoder.batch([encoded, encoded]))
    assert isinstance(batch, Final) and batch.image.shape == (2, 3, 2, 2)
    assert batch.caption == ["c", "c"] and batch.image.dtype == torch.uint8
    plain = DefaultTaskEncoder()
    assert plain.encode_sample(sample) is sample
    assert isinstance(plain.batch([sample]), CaptioningSample)
