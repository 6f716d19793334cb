"""Weight schedules: their YAML (Energon #208's examples, unchanged), nesting, errors, and the
scheduled blend as a pure function of counts (any chunking, exact at knots, fast far out)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from stoker import Blender, WeightSchedule
from stoker.errors import ConfigError
from stoker.metadataset import flatten, load_metadataset
from stoker.pipeline.schedule import BlendSpec
from stoker.plan import advance
from stoker.plan.scheduled_blend import StreamRates, scheduled_choices
from stoker.plan.weights import BlendWeights, parse_weight

HEAD = "__module__: megatron.energon\n__class__: MetadatasetV2\nsplits:\n  train:\n    blend:\n"
# The two examples of Energon #208's docs/source/basic/metadataset.md, as they are written there.
DOC_STEP = HEAD + (
    "      - weight: 1\n        path: ./ds1\n"
    "      - weight:\n          step:\n            0: 100\n            1500: 10\n"
    "            3000: 0\n        path: ./ds2\n"
)
DOC_LINEAR = DOC_STEP.replace("step:", "linear:")


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize(("text", "at_2250"), [(DOC_STEP, 10.0), (DOC_LINEAR, 5.0)])
def test_energon_208_doc_examples_load_unchanged(tmp_path: Path, text: str, at_2250: float) -> None:
    plan = flatten(load_metadataset(write(tmp_path, "mix.yaml", text)), "train")
    assert [Path(leaf.path).name for leaf in plan.leaves] == ["ds1", "ds2"]
    tree = plan.schedule()
    assert tree is not None
    shares = tree.at([0, 2250, 3000])
    assert shares[:, 0].round(4).tolist() == [round(1 / 101, 4), round(100 / 101, 4)]
    assert shares[1, 1] == pytest.approx(at_2250 / (at_2250 + 1))
    assert shares[:, 2].tolist() == [1.0, 0.0]
    assert [leaf.weight for leaf in plan.leaves] == pytest.approx([1 / 101, 100 / 101])


def test_schedule_under_schedule_is_normalised_at_each_level(tmp_path: Path) -> None:
    text = HEAD + (
        "      - weight: {linear: {0: 0, 100: 3}}\n        path: ./top\n"
        "      - weight: 1\n        blend:\n"
        "          - weight: {step: {0: 1, 50: 0}}\n            path: ./a\n"
        "          - weight: {step: {0: 1, 50: 2}}\n            path: ./b\n"
    )
    tree = flatten(load_metadataset(write(tmp_path, "nested.yaml", text)), "train").schedule()
    assert tree is not None
    # batch 0: top 0, inner 1:1; batch 50: top 1.5 : 1, inner 0 : 2; batch 100: top 3 : 1.
    expected = [[0.0, 0.6, 0.75], [0.5, 0.0, 0.0], [0.5, 0.4, 0.25]]
    assert tree.at([0, 50, 100]).round(6).tolist() == expected


def test_schedule_semantics_and_bad_input() -> None:
    step = WeightSchedule.from_points("step", {"0": 100, "100": 10, "1000": 0})
    assert step.at([0, 99, 100, 999, 1000, 10**9]).tolist() == [100, 100, 10, 10, 0, 0]
    linear = parse_weight({"linear": {5: 100, 105: 0}})
    assert isinstance(linear, WeightSchedule)
    assert linear.at([0, 5, 55, 105, 200]).tolist() == [100, 100, 50, 0, 0]
    for bad in ({"cosine": {0: 1}}, {"step": {0: -1}}, {"step": {}}, {"step": {"x": 1}}, True):
        with pytest.raises(ConfigError):
            parse_weight(bad)


def test_repetitions_cannot_be_scheduled(tmp_path: Path) -> None:
    text = HEAD.replace("blend:", "blend_epochized:") + (
        "      - repetitions: {step: {0: 1, 10: 2}}\n        path: ./a\n"
    )
    with pytest.raises(ConfigError, match=r"repetitions cannot be scheduled") as info:
        load_metadataset(write(tmp_path, "epochs.yaml", text))
    assert "blend_epochized[0].repetitions" in str(info.value)
    assert "epochs.yaml" in str(info.value)
    tree = BlendWeights(((((WeightSchedule("step", ((0, 1.0),)), 1.0), 0),),))
    with pytest.raises(ConfigError, match="epochized blend cannot have weight schedules"):
        BlendSpec("epochized", (1.0,), tree)


def test_blender_takes_schedules() -> None:
    ramp = WeightSchedule.from_points("linear", {0: 100, 1000: 0})
    spec = Blender([("/data/a", ramp), ("/data/b", 100)]).blend_spec()
    assert spec.factors == (0.5, 0.5) and spec.schedule is not None
    assert spec.schedule.at([1000]).tolist() == [[0.0], [1.0]]
    assert Blender([("/data/a", 1), ("/data/b", 3)]).blend_spec().schedule is None


RAMP = WeightSchedule.from_points("linear", {0: 100, 1000: 0})
STEP = WeightSchedule.from_points("step", {0: 100, 7: 0, 40: 50})
TWO = BlendWeights(((((RAMP, 100.0), 0),), (((RAMP, 100.0), 1),)))
THREE = BlendWeights(
    ((((1.0, STEP), 0),), (((1.0, STEP), 1), ((1.0, 2.0), 0)), (((1.0, STEP), 1), ((1.0, 2.0), 1)))
)


def rates(tree: BlendWeights, batch: int, virtual: int, stream: int) -> StreamRates:
    live = [True] * len(tree.paths)
    return StreamRates(tree, live, batch_size=batch, virtual_workers=virtual, stream=stream)


@pytest.mark.parametrize(("batch", "virtual", "stream"), [(1, 1, 0), (3, 2, 1), (4, 4, 3)])
def test_choices_are_a_function_of_counts_and_exact_at_knots(
    batch: int, virtual: int, stream: int
) -> None:
    whole = scheduled_choices([0, 0, 0], 400, rates(THREE, batch, virtual, stream), seed=7)
    counts, parts, rng = np.zeros(3, np.int64), [], np.random.default_rng(0)
    while sum(map(len, parts)) < 400:  # fresh rates each time too: nothing is carried over
        got = scheduled_choices(counts, int(rng.integers(1, 40)), rates(THREE, batch, virtual,
                                stream), seed=7)  # fmt: skip
        parts.append(got)
        counts = advance(counts, got)
    assert np.concatenate(parts)[:400].tolist() == whole.tolist()
    j = np.arange(400) // batch * virtual + stream
    inner = whole > 0
    assert not inner[(j >= 7) & (j < 40)].any()  # weight 0 there: nothing of the inner blend
    assert inner[j >= 40].mean() == pytest.approx(50 / 51, abs=0.05)


def test_share_follows_a_linear_ramp_within_a_sample() -> None:
    ids = scheduled_choices([0, 0], 8 * 600, rates(TWO, 8, 2, 1), seed=3)
    cum = np.cumsum(ids == 0)
    j = np.arange(600) * 2 + 1
    planned = np.cumsum(np.repeat(RAMP.at(j) / (RAMP.at(j) + 100), 8))
    assert np.abs(cum - planned).max() <= 1.5


class CountingRates(StreamRates):
    columns = 0

    def shares(self, lo: int, hi: int) -> np.ndarray:
        CountingRates.columns += hi - lo
        return super().shares(lo, hi)


def test_restore_far_out_sums_only_the_ramp() -> None:
    """At stream batch 10^6 the constant tail counts as one column per run, not 10^6."""
    r = CountingRates(TWO, [True, True], batch_size=8, virtual_workers=1, stream=0)
    first = sum(np.bincount(scheduled_choices([0, 0], 8 * 1000, r, seed=3), minlength=2)[:1])
    counts = [int(first), 8 * 10**6 - int(first)]
    CountingRates.columns = 0
    after = scheduled_choices(counts, 64, r, seed=3)
    assert after.tolist() == [1] * 64
    assert CountingRates.columns < 10_000


def test_all_weights_zero_is_a_clear_error() -> None:
    gone = WeightSchedule.from_points("step", {0: 1, 3: 0})
    tree = BlendWeights(((((gone,), 0),),))
    with pytest.raises(ConfigError, match="every blend weight is 0 at global batch 3"):
        scheduled_choices([0], 10, rates(tree, 1, 1, 0), seed=0)
