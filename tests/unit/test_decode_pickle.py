"""``.pickle``/``.pyd`` parts: plain data and numpy arrays unpickle, anything else is refused."""

from __future__ import annotations

import collections
import os
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from stoker import LoaderOptions, SampleDecoder, SampleError
from stoker.pipeline.decode_pickle import load_data_pickle
from stoker.storage.options import activate


class RunsCommand:
    """A pickle that runs a shell command when loaded by an ordinary unpickler."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return os.system, (f"touch {self.marker}",)


class Point:
    def __init__(self, x: int) -> None:
        self.x = x


DATA: list[Any] = [
    np.arange(6, dtype=np.float32).reshape(2, 3),
    np.float64(1.5),
    np.int8(-3),
    np.dtype([("a", "<i4"), ("b", "f8")]),
    np.array(["a", "bc"]),
    np.array([1, "x", None], dtype=object),
    np.datetime64("2020-01-01"),
    np.float32,
]


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
@pytest.mark.parametrize("value", DATA, ids=lambda v: type(v).__name__)
def test_numpy_values_unpickle_at_every_protocol(value: Any, protocol: int) -> None:
    got = load_data_pickle(pickle.dumps(value, protocol=protocol))
    if isinstance(value, np.ndarray):
        assert isinstance(got, np.ndarray) and got.dtype == value.dtype
        np.testing.assert_array_equal(got, value)
    else:
        assert got == value and type(got) is type(value)


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_plain_containers_unpickle(protocol: int) -> None:
    value = {
        "list": [1, 2.5, "x", None, True],
        "tuple": (b"\x00\xff", bytearray(b"q"), 1j),
        "set": {1, 2},
        "frozenset": frozenset({"a"}),
        "ordered": collections.OrderedDict(b=1, a=2),
        "nested": {"array": np.zeros((2, 2), np.uint8)},
    }
    got = load_data_pickle(pickle.dumps(value, protocol=protocol))
    assert got.keys() == value.keys()
    assert {k: got[k] for k in ("list", "tuple", "set", "frozenset", "ordered")} == {
        k: value[k] for k in ("list", "tuple", "set", "frozenset", "ordered")
    }
    assert isinstance(got["ordered"], collections.OrderedDict)
    np.testing.assert_array_equal(got["nested"]["array"], np.zeros((2, 2), np.uint8))


def test_numpy_1_module_names_load_without_warnings() -> None:
    """Pickles written by numpy 1 name ``numpy.core...``; they load (numpy 2 would warn)."""
    data = pickle.dumps(np.arange(3), protocol=2).replace(b"numpy._core.", b"numpy.core.")
    assert b"numpy.core.multiarray" in data
    np.testing.assert_array_equal(load_data_pickle(data), np.arange(3))


@pytest.mark.parametrize(
    ("value", "named"),
    [(print, "builtins.print"), (Point, "Point"), (Point(1), "Point"), (os.getcwd, "getcwd")],
)
def test_functions_classes_and_objects_are_refused(value: Any, named: str) -> None:
    with pytest.raises(SampleError, match=named) as caught:
        SampleDecoder().decode("k1", {"pickle": pickle.dumps(value)})
    message = str(caught.value)
    assert "sample 'k1', part 'pickle'" in message
    assert "LoaderOptions(trust_pickles=True)" in message and "STOKER_TRUST_PICKLES=1" in message


@pytest.mark.parametrize("protocol", [0, 2, pickle.HIGHEST_PROTOCOL])
def test_a_pickle_that_runs_a_command_is_refused_and_the_command_does_not_run(
    tmp_path: Path, protocol: int
) -> None:
    marker = tmp_path / "pwned"
    data = pickle.dumps(RunsCommand(marker), protocol=protocol)
    with pytest.raises(SampleError, match="system"):
        SampleDecoder().decode("evil", {"pyd": data})
    assert not marker.exists()


def test_codecs_encode_only_builds_latin1_bytes() -> None:
    """Protocols 0-2 build byte strings with ``_codecs.encode(text, 'latin1')``; other codecs
    are not plain data."""
    data = pickle.dumps(b"\x00\xff", protocol=2)
    assert load_data_pickle(data) == b"\x00\xff"
    with pytest.raises(pickle.UnpicklingError, match="not plain data"):
        load_data_pickle(data.replace(b"latin1", b"utf_16"))


def test_trust_pickles_unpickles_anything() -> None:
    data = pickle.dumps(Point(7))
    previous = activate(LoaderOptions(trust_pickles=True))
    try:
        got = SampleDecoder().decode("k", {"pickle": data})["pickle"]
    finally:
        activate(previous)
    assert isinstance(got, Point) and got.x == 7
    with pytest.raises(SampleError):  # the loader's options no longer in force
        SampleDecoder().decode("k", {"pickle": data})


def test_trust_pickles_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert LoaderOptions().trust_pickles is False
    monkeypatch.setenv("STOKER_TRUST_PICKLES", "1")
    assert LoaderOptions().trust_pickles is True
