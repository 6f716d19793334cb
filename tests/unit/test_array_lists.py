"""Lists of arrays in a batch pickle as one buffer (stoker.pipeline.array_lists) through the
worker's pickler and come back as lists of equal arrays, its sources as columns and come back
equal; anything else is pickled as it is."""

from __future__ import annotations

import io
import pickle
from typing import Any

import numpy as np

from stoker.model.samples import CrudeSample
from stoker.model.source_info import SourceColumns, SourceInfo, source_info
from stoker.pipeline.array_lists import ArrayList, packed
from stoker.pipeline.batch_pickler import BatchPickler


def round_trip(batch: Any) -> Any:
    out = io.BytesIO()
    BatchPickler(out).dump(batch)
    return pickle.loads(out.getvalue())


def test_a_crude_batch_of_token_lists_comes_back_equal() -> None:
    rng = np.random.default_rng(0)
    tokens = [rng.integers(0, 9, n).astype(np.uint16) for n in (5, 0, 17, 1, 3)]
    batch = CrudeSample(tokens=tokens, __key__=[str(i) for i in range(5)], n=[1, 2, 3, 4, 5])
    sent = packed(batch)
    assert type(sent) is CrudeSample and type(sent["tokens"]) is ArrayList
    assert batch["tokens"] is tokens and type(batch["tokens"]) is list  # the batch unchanged
    back = round_trip(batch)
    assert type(back) is CrudeSample and type(back["tokens"]) is list
    assert [t.dtype for t in back["tokens"]] == [np.dtype(np.uint16)] * 5
    assert [t.tolist() for t in back["tokens"]] == [t.tolist() for t in tokens]
    assert back["__key__"] == batch["__key__"] and back["n"] == [1, 2, 3, 4, 5]
    back["tokens"][0][:] = 7  # each is writeable and its own part of the buffer
    assert back["tokens"][2].tolist() == tokens[2].tolist()


def test_lists_that_are_not_one_dtype_of_vectors_are_left_as_they_are() -> None:
    vectors = [np.arange(3)] * 4
    mixed = {
        "dtypes": [np.arange(3, dtype=np.int32), *[np.arange(2, dtype=np.int64)] * 3],
        "matrices": [np.zeros((2, 2))] * 4,
        "objects": [np.array([None, 1])] * 4,
        "few": vectors[:2],
        "tuple": tuple(vectors),
    }
    assert packed(mixed) is mixed
    back = round_trip(mixed)
    assert [v.dtype for v in back["dtypes"]] == [np.dtype(np.int32)] + [np.dtype(np.int64)] * 3
    assert back["matrices"][0].shape == (2, 2) and back["objects"][0].tolist() == [None, 1]
    assert [v.tolist() for v in back["tuple"]] == [[0, 1, 2]] * 4
    assert packed(vectors) is vectors  # only dict batches


def test_a_batchs_sources_cross_as_columns_and_come_back_equal() -> None:
    infos = [source_info("/d", i, f"s{i % 2}.tar", (f"{i}.txt", f"{i}.json")) for i in range(6)]
    sources = [(info,) for info in infos]
    batch = CrudeSample(txt=["a"] * 6, __sources__=sources)
    sent = packed(batch)
    assert type(sent["__sources__"]) is SourceColumns and batch["__sources__"] is sources
    back = round_trip(batch)
    assert type(back["__sources__"]) is list and back["__sources__"] == sources
    assert all(type(s) is tuple and type(s[0]) is SourceInfo for s in back["__sources__"])
    joined = [(infos[0], infos[1])] * 6  # a joined sample's several sources: as they are
    assert packed({"__sources__": joined})["__sources__"] is joined
    assert round_trip({"__sources__": joined})["__sources__"] == joined
