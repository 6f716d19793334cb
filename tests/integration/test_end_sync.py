"""The end of a finite pass across ranks: 3 gloo ranks (real processes under ``torchrun``) over
shards of unequal sizes, in every ``sync_end`` mode. No mode hangs (the run has a timeout), and
each rank gets exactly the samples its mode promises, checked by key against the passes the
ranks make alone (``sync_end=None``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from stoker.runtime.end_sync_rounds import OUT, oversample, share
from tests.integration._images import make_image_dataset

dist = pytest.importorskip("torch.distributed")

WORLD = 3
RANK_SCRIPT = Path(__file__).with_name("_end_sync_rank.py")


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, list[list[str]]]]:
    tmp = tmp_path_factory.mktemp("end_sync")
    make_image_dataset(
        tmp / "ds", {"train": {"train_a": 13, "train_b": 2, "train_c": 6, "train_d": 1}}
    )
    out = tmp / "out"
    out.mkdir()
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               f"--nproc-per-node={WORLD}", str(RANK_SCRIPT), str(tmp / "ds"),
               str(out)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(WORLD)]


Report = dict[str, list[list[str]]]


def alone(reports: list[Report], p: int) -> list[list[str]]:
    """Each rank's pass ``p`` without agreement: its own samples, in order."""
    own = [r["None"][p] for r in reports]
    every = [k for keys in own for k in keys]
    assert len(every) == len(set(every))
    assert max(map(len, own)) - min(map(len, own)) >= 3, "the ranks must have unequal data"
    return own


def test_equal_hands_out_the_shortest_ranks_count_and_drops_the_rest(reports: list[Report]) -> None:
    dropped = [0] * WORLD
    for p in range(2):
        own = alone(reports, p)
        m = min(map(len, own))
        for rank, report in enumerate(reports):
            assert report["equal"][p] == own[rank][:m]  # every pass starts anew
            dropped[rank] += len(own[rank]) - m
    assert [report["equal_dropped"] for report in reports] == dropped


def test_stop_first_continues_the_longer_ranks_next_pass(reports: list[Report]) -> None:
    first_own, second_own = alone(reports, 0), alone(reports, 1)
    m = min(map(len, first_own))
    expected = []
    for rank, report in enumerate(reports):
        assert report["stop_first"][0] == first_own[rank][:m]
        if len(first_own[rank]) == m:  # ran out: starts anew
            expected.append(second_own[rank])
        else:  # continues where it stopped, then into its next epoch
            expected.append(first_own[rank][m:] + second_own[rank])
    n = min(map(len, expected))
    assert [report["stop_first"][1] for report in reports] == [e[:n] for e in expected]


def test_redistribute_shares_the_rest_evenly(reports: list[Report]) -> None:
    own = alone(reports, 0)
    m, total = min(map(len, own)), sum(map(len, own))
    firsts = [report["redistribute"][0] for report in reports]
    assert [len(f) for f in firsts] == [total // WORLD] * WORLD
    delivered = [k for f in firsts for k in f]
    assert len(delivered) == len(set(delivered))  # nothing twice
    left = {k for keys in own for k in keys} - set(delivered)
    assert len(left) == total % WORLD
    for rank in range(WORLD):
        assert firsts[rank][:m] == own[rank][:m]  # in step until the first rank ran out
        kept = own[rank][m : total // WORLD]  # a rank keeps its own first, in order
        assert firsts[rank][m : m + len(kept)] == kept
    # what was left over is handed out first in the next pass, by the ranks that kept it
    seconds = [report["redistribute"][1] for report in reports]
    assert len({len(s) for s in seconds}) == 1
    heads = [k for s in seconds for k in s[: len(left)]]
    assert left <= set(heads)


def rounds(own: list[list[str]]) -> tuple[list[list[str]], list[list[str]]]:
    """What ``"redistribute_rounds"`` hands out in a first pass over ``own`` (each rank's own
    batches), step by step as the module says, and what each rank holds after it."""
    world = len(own)
    m = min(map(len, own))
    out = [keys[:m] for keys in own]
    read = [m] * world
    held: list[list[str]] = [[] for _ in own]
    done = [False] * world

    def take(rank: int) -> None:
        if done[rank] or read[rank] == len(own[rank]):
            done[rank] = True
        else:
            held[rank].append(own[rank][read[rank]])
            read[rank] += 1

    for rank in range(world):
        take(rank)
    overuse = [0] * world
    while not all(done):
        overuse = [OUT if d else c for d, c in zip(done, overuse, strict=True)]
        counts = list(map(len, held))
        if sum(counts) < world:
            before = overuse
            overuse, _ = oversample(overuse, world - sum(counts), 0)
            for rank in range(world):
                for _ in range(overuse[rank] - before[rank]):
                    take(rank)
            continue
        sent = [(src, held[src][i], dst) for src, i, dst in share(counts)]
        for src, key, dst in sent:
            held[src].remove(key)
            held[dst].append(key)
        for rank in range(world):
            out[rank].append(held[rank].pop(0))
    return out, held


def test_redistribute_rounds_is_energons_round_by_round_share(reports: list[Report]) -> None:
    own = alone(reports, 0)
    total = sum(map(len, own))
    expected, left = rounds(own)
    firsts = [report["redistribute_rounds"][0] for report in reports]
    assert firsts == expected
    assert [len(f) for f in firsts] == [total // WORLD] * WORLD
    delivered = [k for f in firsts for k in f]
    assert len(delivered) == len(set(delivered)) == total - sum(map(len, left))
    for rank, report in enumerate(reports):  # what a rank held is handed out first next pass
        assert report["redistribute_rounds"][1][: len(left[rank])] == left[rank]


def test_redistribute_rounds_resumes_in_its_shared_tail(reports: list[Report]) -> None:
    assert [r["rounds_resumed"] for r in reports] == [r["redistribute_rounds"] for r in reports]
