"""Changing the mix of a running job: a run saved at step 500 is resumed with (a) other weights
(and nesting), (b) a dataset added, (c) one removed, in one process with 2 workers and elastically
(2 gloo ranks x 2 workers to 1 x 4). Over the whole run, checked by keys, every dataset comes in
each stream (virtual worker) in passes over that stream's share: no sample twice before its pass
ends, none of its pass skipped; kept datasets continue the order they had; the new weights hold
from the change on."""

from __future__ import annotations

import json
import logging
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from stoker import LoaderOptions, WorkerConfig
from stoker.errors import ConfigError
from tests.contract.contract import roundtrip
from tests.integration._blends import jsonl_blend
from tests.integration._mix_rank import loader
from tests.integration._schedule_rank import VIRTUAL

SIZES = {"a": 300, "b": 500, "c": 400, "d": 200}
SAVED_AT, AFTER = 500, 300  # global steps before the save, and after the restore


def entry(source: str, weight: float | str, indent: int = 6) -> str:
    pad = " " * indent
    return f"{pad}- weight: {weight}\n{pad}  path: {source}.jsonl\n"


MIXES = {
    "base": "    blend:\n" + entry("a", 1) + entry("b", 1) + entry("c", 1),
    # (a) other weights, and b and c nested one level down: b 3/5, a and c 1/5 each
    "weights": "    blend:\n"
    + entry("a", 1)
    + "      - weight: 4\n        blend:\n"
    + entry("b", 3, 10)
    + entry("c", 1, 10),
    # (b) d added (nested with c)
    "added": "    blend:\n"
    + entry("a", 1)
    + entry("b", 1)
    + "      - weight: 2\n        blend:\n"
    + entry("c", 1, 10)
    + entry("d", 1, 10),
    # (c) b removed
    "removed": "    blend:\n" + entry("a", 1) + entry("c", 1),
    # b's weight scheduled: 3 until global batch 399, 1 until 649, then 3 again
    "scheduled": "    blend:\n"
    + entry("a", 1)
    + entry("b", "{step: {0: 3, 400: 1, 650: 3}}")
    + entry("c", 1),
}
#: The planned share of each dataset after the change.
SHARES = {
    "weights": {"a": 0.2, "b": 0.6, "c": 0.2},
    "added": {"a": 0.25, "b": 0.25, "c": 0.25, "d": 0.25},
    "removed": {"a": 0.5, "c": 0.5},
}


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("mixchange")
    for name, train in MIXES.items():
        jsonl_blend(folder, SIZES, f"{name}.yaml", train)
    return folder


def by_stream(global_batches: list[list[str]]) -> dict[tuple[str, int], list[str]]:
    """Per (dataset, stream), its keys in order: global batch ``j`` is stream ``j % V``'s."""
    out: dict[tuple[str, int], list[str]] = {}
    for j, batch in enumerate(global_batches):
        for key in batch:
            out.setdefault((key.split(":")[0], j % VIRTUAL), []).append(key)
    return out


def check_passes(global_batches: list[list[str]]) -> None:
    """Each stream reads each dataset in passes over its share; the shares of the streams
    partition the dataset."""
    shares: dict[str, list[set[str]]] = {}
    for (source, _), keys in by_stream(global_batches).items():
        n = len(keys)
        for i, key in enumerate(keys):  # the first pass: up to the first key seen again
            if key in keys[:i]:
                n = i
                break
        first = set(keys[:n])
        for start in range(n, len(keys), n):
            chunk = keys[start : start + n]
            assert len(set(chunk)) == len(chunk), f"{source}: a sample twice within a pass"
            assert set(chunk) <= first, f"{source}: a sample outside the stream's share"
        shares.setdefault(source, []).append(first)
    for source, sets in shares.items():
        union = set().union(*sets)
        assert sum(map(len, sets)) == len(union), f"{source}: two streams share a sample"
        assert union == {f"{source}:{i}" for i in range(SIZES[source])}, f"{source}: skipped"


def check_continues(changed: list[list[str]], base: list[list[str]], kept: set[str]) -> None:
    """Kept datasets continue the order of the uninterrupted base run, stream by stream."""
    ours, theirs = by_stream(changed), by_stream(base)
    for (source, stream), keys in ours.items():
        if source in kept:
            other = theirs[(source, stream)]
            n = min(len(keys), len(other))
            assert n > 100 and keys[:n] == other[:n], (source, stream)


def check_shares(after: list[list[str]], shares: dict[str, float]) -> None:
    counts = Counter(key.split(":")[0] for batch in after for key in batch)
    total = sum(counts.values())
    for source, share in shares.items():
        assert abs(counts[source] / total - share) < 0.04, (source, counts)
    assert set(counts) == set(shares)


def run(path: Path, workers: int, n: int, state: Any = None, **options: Any) -> tuple[Any, Any]:
    """``n`` batches of one rank (after restoring ``state``), and the state after them."""
    config = WorkerConfig(rank=0, world_size=1, num_workers=workers)
    with loader(str(path), config, **options) as one:
        if state is not None:
            one.restore_state_rank(state, allow_mix_change=True)
        it = iter(one)
        got = [next(it) for _ in range(n)]
        return got, roundtrip(one.save_state_rank())


@pytest.fixture(scope="module")
def base_run(data: Path) -> tuple[list[list[str]], Any]:
    """The uninterrupted base run (2 workers) and its state at step 500."""
    first, state = run(data / "base.yaml", 2, SAVED_AT)
    rest, _ = run(data / "base.yaml", 2, AFTER, state)
    return first + rest, state


@pytest.mark.parametrize("mix", ["weights", "added", "removed"])
def test_resume_into_a_changed_mix(
    data: Path, base_run: Any, mix: str, caplog: pytest.LogCaptureFixture
) -> None:
    base, state = base_run
    with caplog.at_level(logging.WARNING, logger="stoker.runtime.mix_change"):
        after, again = run(data / f"{mix}.yaml", 2, AFTER, state)
    whole = base[:SAVED_AT] + after
    check_passes(whole)
    check_continues(whole, base, set(SHARES[mix]) & {"a", "b", "c"})
    check_shares(after, SHARES[mix])
    lines = [r.getMessage() for r in caplog.records if "changed mix" in r.getMessage()]
    assert len(lines) == 1, lines
    if mix == "removed":
        assert "removed" in lines[0] and "b.jsonl" in lines[0]
    if mix == "added":
        assert "added" in lines[0] and "d.jsonl" in lines[0]
    # The changed run's own state restores under its mix without the option, exactly.
    expected, _ = run(data / f"{mix}.yaml", 2, 50, again)
    config = WorkerConfig(rank=0, world_size=1, num_workers=2)
    with loader(str(data / f"{mix}.yaml"), config) as plain:
        plain.restore_state_rank(again)
        it = iter(plain)
        assert [next(it) for _ in range(50)] == expected


def test_without_the_option_the_error_lists_what_differs(data: Path, base_run: Any) -> None:
    _, state = base_run
    config = WorkerConfig(rank=0, world_size=1, num_workers=0)
    with loader(str(data / "added.yaml"), config) as other, pytest.raises(ConfigError) as info:
        other.restore_state_rank(state)
    text = str(info.value)
    assert "allow_mix_change=True" in text
    assert "d.jsonl [train]: added (share 0.25)" in text
    assert "c.jsonl [train]: saved share 0.333, now share 0.25" in text
    removed = pytest.raises(ConfigError, match=r"b.jsonl \[train\]: removed")
    with loader(str(data / "removed.yaml"), config) as other, removed:
        other.restore_state_global([state])


def test_loader_options_allow_it(data: Path, base_run: Any) -> None:
    base, state = base_run
    config = WorkerConfig(rank=0, world_size=1, num_workers=0)
    options = LoaderOptions(allow_mix_change=True)
    with loader(str(data / "removed.yaml"), config, options=options) as other:
        other.restore_state_rank(state)
        assert other.mix_change is not None
        assert [name for name, _ in other.mix_change.removed] == [f"{data}/b.jsonl [train]"]
        it = iter(other)
        after = [next(it) for _ in range(AFTER)]
    check_passes(base[:SAVED_AT] + after)


def test_a_schedule_holds_from_the_change_on(data: Path, base_run: Any) -> None:
    """Into a scheduled mix: equal shares until batch 650, then b at 3/5, with no catching up on
    the batches before the change (where the new schedule would have given b 3/5)."""
    base, state = base_run
    after, _ = run(data / "scheduled.yaml", 2, AFTER, state)
    check_passes(base[:SAVED_AT] + after)
    cut = 650 - SAVED_AT
    check_shares(after[:cut], {"a": 1 / 3, "b": 1 / 3, "c": 1 / 3})
    check_shares(after[cut:], {"a": 0.2, "b": 0.6, "c": 0.2})


mp = pytest.importorskip("torch.multiprocessing")
dist = pytest.importorskip("torch.distributed")


@pytest.mark.skipif(not dist.is_available(), reason="no torch.distributed")
def test_elastic_2x2_to_1x4_into_changed_mixes(data: Path, tmp_path: Path) -> None:
    from tests.integration._mix_rank import run_rank

    spec = {"path": str(data / "base.yaml"), "out": str(tmp_path), "workers": 2,
            "batches": SAVED_AT}  # fmt: skip
    mp.spawn(run_rank, args=(2, spec), nprocs=2, join=True)
    per_rank = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    before = [per_rank[j % 2][j // 2] for j in range(2 * SAVED_AT)]
    states = json.loads((tmp_path / "states.json").read_text())
    config = WorkerConfig(rank=0, world_size=1, num_workers=4)
    for mix in ("weights", "added", "removed"):
        with loader(str(data / f"{mix}.yaml"), config) as one:
            one.restore_state_global(states, allow_mix_change=True)
            it = iter(one)
            after = [next(it) for _ in range(2 * AFTER)]
        check_passes(before + after)
        check_shares(after, SHARES[mix])
