"""Garbled loader states are refused with a ConfigError naming the bad field; valid ones restore."""

from __future__ import annotations

import copy
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stoker import WorkerConfig, get_loader, get_train_dataset
from stoker.errors import ConfigError
from stoker.format.dataset_config import make_dataset_yaml
from stoker.format.prepare import prepare_dataset
from stoker.runtime.loader import Loader
from tests.conftest import make_dataset


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = make_dataset(tmp_path_factory.mktemp("state_validation") / "ds")
    prepare_dataset(
        str(root),
        split_ratio="1,0,0",
        dataset_yaml=make_dataset_yaml("TextSample", {"text": "txt"}),
    )
    return str(root)


def loader(path: str, workers: int) -> Loader:
    config = WorkerConfig(rank=0, world_size=1, num_workers=workers)
    dataset = get_train_dataset(
        path,
        worker_config=config,
        batch_size=2,
        shuffle_buffer_size=3,
        max_samples_per_sequence=2,
        virtual_workers=2,
    )
    return get_loader(dataset)


def keys(batch: Any) -> list[str]:
    return list(batch.__key__)


@pytest.fixture(scope="module")
def saved(prepared: str) -> dict[str, Any]:
    """A real state, 3 batches in."""
    source = loader(prepared, 0)
    it = iter(source)
    for _ in range(3):
        next(it)
    return source.save_state_rank()


def _set(path: tuple[Any, ...], value: Any) -> Any:
    def edit(state: dict[str, Any]) -> None:
        target = state
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return edit


def _drop(path: tuple[Any, ...]) -> Any:
    def edit(state: dict[str, Any]) -> None:
        target = state
        for key in path[:-1]:
            target = target[key]
        del target[path[-1]]

    return edit


def _every_position(extra: list[int]) -> Any:
    """Append ``extra`` to every stream position (all of one length, so only the loader, which
    knows its number of datasets, can tell they are wrong)."""

    def edit(state: dict[str, Any]) -> None:
        for position in state["streams"].values():
            position.extend(extra)

    return edit


GARBLED = [
    ("positions too long", _every_position([0]), "expected a list of 2 ints (this loader's"),
    ("positions much too long", _every_position([0, 0, 0]), "streams['"),
    ("missing t", _drop(("t",)), "'t'"),
    ("missing streams", _drop(("streams",)), "'streams'"),
    ("missing topology", _drop(("topology",)), "'topology'"),
    ("missing virtual_workers", _drop(("topology", "virtual_workers")), "virtual_workers"),
    ("missing fingerprint", _drop(("fingerprint",)), "'fingerprint'"),
    ("missing finished", _drop(("finished",)), "'finished'"),
    ("str epoch", _set(("epoch",), "0"), "'epoch'"),
    ("bool t", _set(("t",), True), "'t'"),
    ("negative t", _set(("t",), -5), "'t'"),
    ("float yielded", _set(("yielded",), 3.0), "'yielded'"),
    ("huge epoch", _set(("epoch",), 10**30), "'epoch'"),
    ("str virtual_workers", _set(("topology", "virtual_workers"), "2"), "virtual_workers"),
    ("huge virtual_workers", _set(("topology", "virtual_workers"), 10**18), "virtual_workers"),
    ("zero virtual_workers", _set(("topology", "virtual_workers"), 0), "virtual_workers"),
    ("bool world_size", _set(("topology", "world_size"), True), "world_size"),
    ("rank past world", _set(("topology", "rank"), 1), "topology.rank"),
    ("negative num_workers", _set(("topology", "num_workers"), -1), "num_workers"),
    ("topology a list", _set(("topology",), [2, 1, 0, 0]), "'topology'"),
    ("str finished", _set(("finished",), "no"), "'finished'"),
    ("empty streams", _set(("streams",), {}), "'streams'"),
    ("streams a list", _set(("streams",), [[3, 1]]), "'streams'"),
    ("int stream key", _set(("streams",), {0: [3, 1]}), "streams[0]"),
    ("stream key past v", _set(("streams", "7"), [1, 1]), "streams['7']"),
    ("huge position", _set(("streams", "0"), [10**30, 1]), "streams['0'][0]"),
    ("negative position", _set(("streams", "0"), [3, -1]), "streams['0'][1]"),
    ("str position", _set(("streams", "0"), ["3", 1]), "streams['0'][0]"),
    ("short position", _set(("streams", "0"), [3]), "streams['0']"),
    ("ragged positions", _set(("streams", "0"), [3, 1, 0]), "'streams'"),
    ("exhausted a dict", _set(("exhausted",), {}), "'exhausted'"),
    ("exhausted past v", _set(("exhausted",), [5]), "exhausted[0]"),
    ("buffers a list", _set(("buffers",), []), "'buffers'"),
    ("dataset without plan", _drop(("datasets", 0, "plan")), "datasets[0].plan"),
    ("dataset plan of strs", _set(("datasets", 0, "plan"), ["0", 0]), "datasets[0].plan[0]"),
    ("dataset without path", _drop(("datasets", 0, "path")), "datasets[0].path"),
    ("blend a bool", _set(("fingerprint", "blend"), True), "fingerprint.blend"),
    (
        "blend weights of strs",
        _set(("fingerprint", "blend"), ["weighted", "1"]),
        "fingerprint.blend",
    ),
    ("blend schedule garbled", _set(("fingerprint", "blend_schedule"), [1]), "blend_schedule"),
    ("bad version str", _set(("stoker_state_version",), "1"), "version '1' (str)"),
    ("bad version 3", _set(("stoker_state_version",), 3), "version 3"),
    ("no version", _drop(("stoker_state_version",)), "not a stoker loader state"),
]


@pytest.mark.parametrize(("name", "edit", "field"), GARBLED, ids=[g[0] for g in GARBLED])
def test_garbled_state_names_the_field(
    prepared: str, saved: dict[str, Any], name: str, edit: Any, field: str
) -> None:
    state = copy.deepcopy(saved)
    edit(state)
    target = loader(prepared, 0)
    with pytest.raises(ConfigError) as info:
        target.restore_state_rank(state)
    assert field in str(info.value), (name, str(info.value))


@pytest.mark.parametrize("workers", [0, 2])
def test_positions_of_the_wrong_length_are_one_line_errors(
    prepared: str, saved: dict[str, Any], workers: int
) -> None:
    """Via restore_state_global too (merged states): a ConfigError, not a raw ValueError."""
    state = copy.deepcopy(saved)
    _every_position([0])(state)
    with pytest.raises(ConfigError, match="expected a list of 2 ints") as info:
        loader(prepared, workers).restore_state_global([state])
    assert "streams['0']" in info.value.problem and "\n" not in info.value.problem


def test_not_a_dict_is_refused(prepared: str) -> None:
    with pytest.raises(ConfigError, match="not a stoker loader state"):
        loader(prepared, 0).restore_state_rank([1, 2])  # type: ignore[arg-type]


@pytest.mark.parametrize("workers", [0, 2])
def test_valid_states_still_restore_to_identical_batches(prepared: str, workers: int) -> None:
    source = loader(prepared, workers)
    it = iter(source)
    for _ in range(3):
        next(it)
    state = source.save_state_rank()
    expected = [keys(next(it)) for _ in range(4)]
    target = loader(prepared, workers)
    target.restore_state_rank(copy.deepcopy(state))
    again = iter(target)
    assert [keys(next(again)) for _ in range(4)] == expected
    fresh = loader(prepared, workers)
    fresh.restore_state_rank(fresh.save_state_rank())  # the state before any batch is valid too


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, (*prefix, i))
    return out


JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**20), max_value=10**20),
    st.text(max_size=3),
    st.floats(allow_nan=True),
    st.lists(st.integers(min_value=-3, max_value=10), max_size=4),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_mutated_state_restores_or_raises_config_error(
    prepared: str, saved: dict[str, Any], data: st.DataObject
) -> None:
    state = copy.deepcopy(saved)
    paths = _paths(state)
    for _ in range(data.draw(st.integers(min_value=1, max_value=3))):
        path = data.draw(st.sampled_from(paths))
        target: Any = state
        try:
            for key in path[:-1]:
                target = target[key]
            if data.draw(st.booleans()) and isinstance(target, dict):
                del target[path[-1]]
            else:
                target[path[-1]] = data.draw(JUNK)
        except (KeyError, IndexError, TypeError):
            continue  # an earlier mutation removed or replaced this path
    start = time.monotonic()
    target_loader = loader(prepared, 0)
    try:
        target_loader.restore_state_rank(state)
        next(iter(target_loader))
    except ConfigError:
        pass
    except StopIteration:
        pass  # a valid state at the end of the data
    assert time.monotonic() - start < 10
