"""Batches cross to the main process with their sources as columns (stoker.model.batch_wire)."""

from __future__ import annotations

import dataclasses
import pickle
from dataclasses import dataclass
from multiprocessing.reduction import ForkingPickler
from typing import Any

import pytest

from stoker.model.batch import Batch
from stoker.model.batch_wire import MIN_SOURCES, pack
from stoker.model.samples import SourceInfo, TextSample


def sources(n: int, shard: str = "a.tar") -> list[SourceInfo]:
    return [
        SourceInfo(dataset_path="/data", index=i, shard_name=shard, file_names=(f"{i}.txt",))
        for i in range(n)
    ]


def crossed(batch: Any) -> tuple[Any, bytes]:
    """``batch`` after a trip through the worker's pickler, and the pickle."""
    wire = bytes(ForkingPickler.dumps(pack(batch), pickle.HIGHEST_PROTOCOL))
    return pickle.loads(wire), wire


@dataclass
class PlainBatch:  # not slotted: its state is its __dict__
    text: list[str]
    __sources__: Any


def test_default_batch_of_text_samples_round_trips_with_columns() -> None:
    src = sources(12)
    batch = TextSample(
        __key__=[f"k{i}" for i in range(12)],
        __restore_key__=("BatchDataset", 0, *(("Webdataset", "/data", i) for i in range(12))),
        __subflavors__=[{}] * 12,
        __sources__=[(s,) for s in src],  # type: ignore[arg-type]
        text=[f"text {i}" for i in range(12)],  # type: ignore[arg-type]
    )
    got, wire = crossed(batch)
    assert type(got) is TextSample and got == batch
    assert type(got.__sources__) is list and got.__sources__[3] == (src[3],)
    assert b"_source_info" not in wire  # no SourceInfo pickled one by one
    with pytest.raises(dataclasses.FrozenInstanceError):
        got.__sources__[0][0].index = 5  # still frozen
    assert hash(got.__sources__[0][0]) == hash(src[0])


def test_flat_tuples_mixed_lengths_none_and_dict_batches_round_trip() -> None:
    src = sources(20)
    flat = Batch(__key__=["a"], __restore_key__=(), __sources__=tuple(src))
    got, _ = crossed(flat)
    assert type(got) is Batch and got == flat and type(got.__sources__) is tuple
    mixed = [tuple(src[:3]), None, (), tuple(src[3:12]), (src[12],)]
    got, wire = crossed({"__sources__": mixed, "n": 5})
    assert got == {"__sources__": mixed, "n": 5}
    assert b"_source_info" not in wire
    as_many = [None, None, tuple(src[:3]), *((s,) for s in src[3:8])]  # 8 sources, 8 entries
    assert crossed({"s": as_many})[0] == {"s": as_many}
    plain = PlainBatch(text=["x"], __sources__=[(s,) for s in src])
    got, _ = crossed(plain)
    assert type(got) is PlainBatch and got == plain


def test_what_is_not_worth_packing_is_pickled_as_it_is() -> None:
    few = {"__sources__": [(s,) for s in sources(MIN_SOURCES - 1)]}
    assert pack(few) is few

    class Sub(SourceInfo):  # a subclass is not rebuilt as a plain SourceInfo
        pass

    subs = {"__sources__": [Sub(dataset_path="/d", index=i, shard_name=None, file_names=())
                            for i in range(MIN_SOURCES)]}  # fmt: skip
    assert pack(subs) is subs
    other = {"__sources__": list(range(50)), "text": ["a"] * 50}
    assert pack(other) is other
    pairs = {"pairs": [(i, i) for i in range(50)], "tail": [(), *((s,) for s in sources(20))]}
    assert pack(pairs)["pairs"] is pairs["pairs"]  # tuples of other things stay as they are

    class Custom(PlainBatch):
        def __reduce__(self) -> Any:
            return PlainBatch, (self.text, self.__sources__)

    custom = Custom(text=["x"], __sources__=[(s,) for s in sources(20)])
    assert pack(custom) is custom
    assert pack("not a batch") == "not a batch"
