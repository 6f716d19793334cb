"""The exception tree: scopes, pickling whatever a subclass's ``__init__`` takes, torch's way of
re-raising, and failures never chained to themselves."""

from __future__ import annotations

import pickle
import traceback
from typing import Any

import pytest
from torch.utils.data._utils import ExceptionWrapper

from stoker.errors import (
    ConfigError,
    CorruptShardError,
    FatalSampleError,
    FormatError,
    SampleError,
    StokerError,
    StorageError,
    TransientStorageError,
)
from stoker.pipeline.hooks import iter_hook
from stoker.pipeline.sample_failure import scope_of
from stoker.pipeline.skip_policy import ErrorPolicy, ErrorTracker
from stoker.pipeline.skips import CORRUPT_SHARD, STORAGE


@pytest.mark.parametrize(
    ("error", "scope"),
    [
        (ConfigError("x"), "config"),
        (FormatError("x"), "config"),
        (StorageError("x"), "config"),
        (StokerError("x"), "config"),
        (SampleError("x"), "sample"),
        (TransientStorageError("x"), "storage"),
        (CorruptShardError("x"), "shard"),
        (FatalSampleError("x"), "config"),
        (KeyError("x"), "sample"),
        (NameError("x"), "config"),
        (NotImplementedError(), "config"),
    ],
)
def test_each_class_says_its_scope(error: Exception, scope: str) -> None:
    assert scope_of(error) == scope


class WithOwnInit(StokerError):
    def __init__(self, count: int) -> None:
        self.count = count
        super().__init__(f"{count} things went wrong.", path="a.tar")


def test_errors_pickle_with_every_field_whatever_their_init() -> None:
    error = WithOwnInit(3)
    error.add_note("a note")
    vars(error)["_sample"] = object()  # private: stays behind
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is WithOwnInit and copy.count == 3 and copy.path == "a.tar"
    assert str(copy) == str(error) == "a.tar: 3 things went wrong."
    assert copy.__notes__ == ["a note"] and "_sample" not in vars(copy)
    shard = pickle.loads(pickle.dumps(CorruptShardError("cut.", path="s.tar", offset=9)))
    assert (type(shard), shard.offset, shard.scope) == (CorruptShardError, 9, "shard")


def test_torchs_re_raise_keeps_a_stoker_errors_type_and_message() -> None:
    try:
        raise ConfigError("bad option.", hint="Fix it.")
    except ConfigError:
        wrapper = ExceptionWrapper(where="in DataLoader worker process 0")
    with pytest.raises(ConfigError, match=r"bad option\. Fix it\.") as info:
        wrapper.reraise()
    assert "Original Traceback" in str(info.value)


def failing_helper(sample: Any) -> Any:
    return {}[sample["__key__"]]


def test_a_hook_failure_is_caused_by_the_hooks_exception_never_by_itself() -> None:
    with pytest.raises(SampleError) as info:
        list(iter_hook(failing_helper, {"__key__": "k1"}, stage="encode_sample"))
    error = info.value
    assert isinstance(error.__cause__, KeyError) and error.key == "k1"
    tracker = ErrorTracker(ErrorPolicy(mode="raise"))
    with pytest.raises(SampleError) as again:
        tracker.failed(error, {"__key__": "k1"}, "encode_sample")
    assert again.value is error and error.__cause__ is not error
    assert "in failing_helper" in "".join(traceback.format_exception(again.value))


def test_storage_and_shard_failures_are_skipped_by_scope_and_counted() -> None:
    tracker = ErrorTracker(ErrorPolicy(mode="skip"))
    tracker.failed(TransientStorageError("GET failed.", path="s3://b/a.tar"), "a.tar, #1",
                   source="s3://b", key="a")  # fmt: skip
    tracker.failed(CorruptShardError("ended early.", path="/d/b.tar"), "b.tar, #4",
                   source="/d", key="b")  # fmt: skip
    with pytest.raises(ConfigError):
        tracker.failed(ConfigError("bad."), "c.tar, #0")
    skips = tracker.take()
    assert skips is not None and tracker.take() is None
    assert skips.by_reason == {STORAGE: 1, CORRUPT_SHARD: 1}
    assert skips.by_source == {"s3://b": {STORAGE: 1}, "/d": {CORRUPT_SHARD: 1}}
    assert skips.examples == {STORAGE: ["a"], CORRUPT_SHARD: ["b"]}
    assert tracker.skipped == {STORAGE: 1, CORRUPT_SHARD: 1}


def fatal(sample: Any) -> Any:
    raise FatalSampleError("this dataset must not be trained on.")


def test_a_fatal_sample_error_stops_a_skipping_run_with_its_own_type() -> None:
    tracker = ErrorTracker(ErrorPolicy(mode="skip"))
    with pytest.raises(SampleError) as info:
        list(iter_hook(fatal, {"__key__": "k"}, stage="encode_sample"))
    with pytest.raises(FatalSampleError, match="must not be trained on"):
        tracker.failed(info.value, {"__key__": "k"}, "encode_sample")
    with pytest.raises(SampleError, match="NameError") as bug:  # a bug: named with its sample
        tracker.failed(NameError("x"), {"__key__": "k"}, "encode_sample")
    assert isinstance(bug.value.__cause__, NameError) and bug.value.key == "k"
    assert not tracker.skipped


def test_storage_down_for_three_shards_in_a_row_stops_the_run() -> None:
    from stoker.errors import StorageError, TransientStorageError
    from stoker.pipeline.skip_policy import STORAGE_SHARDS_IN_A_ROW, ErrorPolicy, ErrorTracker

    tracker = ErrorTracker(ErrorPolicy(mode="skip"))

    def spent(shard: str) -> None:
        error = TransientStorageError("GET failed after 4 attempt(s).", path=f"s3://b/{shard}")
        tracker.failed(error, {"__key__": shard}, "loading")

    spent("a.tar")
    spent("a.tar")  # the same shard again: still one shard
    tracker.succeeded()  # a sample that went through starts the count again
    for shard in ("b.tar", "c.tar"):
        spent(shard)
    with pytest.raises(StorageError, match="3 different shards in a row") as raised:
        spent("d.tar")
    assert STORAGE_SHARDS_IN_A_ROW == 3 and "s3://b/d.tar" in str(raised.value)
    assert tracker.skipped[STORAGE] == 5
