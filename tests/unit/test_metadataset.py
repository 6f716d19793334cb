"""Metadataset YAML: parsing, validation with located errors, and flattening a split."""

from __future__ import annotations

import textwrap
import warnings
from pathlib import Path
from typing import Any

import pytest

from stoker.errors import ConfigError, StorageError
from stoker.metadataset import (
    BlendNode,
    DatasetRef,
    JoinNode,
    SubsetRange,
    flatten,
    is_metadataset,
    load_metadataset,
)

V2 = "__module__: megatron.energon\n__class__: MetadatasetV2\n"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    header = V2 if text.startswith(V2) else ""
    path.write_text(header + textwrap.dedent(text[len(header) :]))
    return path


def fake_dataset(path: Path) -> Path:
    """Just enough of a prepared dataset for Energon's ``get_dataset_type``."""
    write(path / ".nv-meta" / ".info.json", '{"shard_counts": {}}')
    return path


def energon_subset(*ranges: tuple[Any, Any]) -> Any:
    """Energon's merged ``DatasetSubset`` for ranges listed from the outermost level inwards."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from megatron.energon.metadataset.metadataset_v2 import Subset
    merged = None
    for start, end in ranges:
        merged = Subset(range=(start, end)).merge(merged)
    return merged


TUTORIAL = (
    V2
    + """
splits:
  train:
    blend:
      - weight: 5
        path: ./coco
      - weight: 2
        path: ./coyo
  val:
    blend:
      - path: ./coco
        split_part: val
      - path: ./coyo
        split_part: val
  test:
    path: ./coyo
"""
)


def test_tutorial_blend_weights_and_val_test(tmp_path: Path) -> None:
    md = load_metadataset(str(write(tmp_path / "mix.yaml", TUTORIAL)))
    assert md.version == "v2"
    assert sorted(md.splits) == ["test", "train", "val"]
    train = flatten(md, "train")
    assert train.kind == "weighted"
    assert [leaf.path for leaf in train.leaves] == [str(tmp_path / "coco"), str(tmp_path / "coyo")]
    assert [leaf.weight for leaf in train.leaves] == pytest.approx([5 / 7, 2 / 7])
    assert all(leaf.split_part == "train" for leaf in train.leaves)
    val = flatten(md, "val", training=False)
    assert val.kind == "concat"
    assert [(leaf.path, leaf.split_part, leaf.weight) for leaf in val.leaves] == [
        (str(tmp_path / "coco"), "val", None),
        (str(tmp_path / "coyo"), "val", None),
    ]
    test = flatten(md, "test")
    assert test.kind == "single"
    assert test.leaves[0].weight is None
    assert test.leaves[0].split_part == "test"


def test_missing_split_lists_the_valid_ones(tmp_path: Path) -> None:
    md = load_metadataset(str(write(tmp_path / "mix.yaml", TUTORIAL)))
    with pytest.raises(ConfigError, match=r"no split 'dev'.*Valid splits: test, train, val"):
        flatten(md, "dev")


def test_nested_metadatasets_resolve_relative_paths_and_multiply_weights(tmp_path: Path) -> None:
    write(
        tmp_path / "sub" / "inner.yaml",
        V2
        + """
        splits:
          train:
            blend:
              - {weight: 1, path: ../data/a}
              - {weight: 3, path: /abs/b}
          special:
            path: s3://bucket/c
        """,
    )
    outer = write(
        tmp_path / "outer.yaml",
        V2
        + """
        splits:
          train:
            blend:
              - {weight: 1, path: sub/inner.yaml}
              - {weight: 1, path: sub/inner.yaml, split_part: special}
              - {weight: 2, path: data/d}
        """,
    )
    plan = flatten(load_metadataset(str(outer)), "train")
    assert plan.kind == "weighted"
    got = [(leaf.path, leaf.split_part, leaf.weight) for leaf in plan.leaves]
    assert got == [
        (str(tmp_path / "data" / "a"), "train", pytest.approx(1 / 4 * 1 / 4)),
        ("/abs/b", "train", pytest.approx(1 / 4 * 3 / 4)),
        ("s3://bucket/c", "special", pytest.approx(1 / 4)),
        (str(tmp_path / "data" / "d"), "train", pytest.approx(1 / 2)),
    ]
    assert sum(leaf.weight or 0 for leaf in plan.leaves) == pytest.approx(1.0)


def test_subflavors_outer_win_and_match_energon_traverse(tmp_path: Path) -> None:
    fake_dataset(tmp_path / "data" / "a")
    write(
        tmp_path / "inner.yaml",
        V2
        + """
        splits:
          val:
            path: data/a
            subflavors: {source: inner, only_inner: 1}
        """,
    )
    outer = write(
        tmp_path / "outer.yaml",
        V2
        + """
        splits:
          train:
            blend:
              - path: inner.yaml
                subflavors: {source: outer, only_outer: 2}
                split_part: val
        """,
    )
    (leaf,) = flatten(load_metadataset(str(outer)), "train").leaves
    assert leaf.subflavors == {"source": "outer", "only_inner": 1, "only_outer": 2}
    assert leaf.split_part == "val"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from megatron.energon.metadataset.loader import traverse_metadataset

        (ref,) = traverse_metadataset(str(outer), split_part="train")
    assert (str(ref.path), ref.split_part, ref.subflavors) == (
        leaf.path,
        leaf.split_part,
        leaf.subflavors,
    )


@pytest.mark.parametrize(
    ("outer", "inner"),
    [(("0%", "50%"), ("20%", "100%")), (("10%", "90%"), ("25%", "75%")), (("0%", "100%"), None)],
)
def test_nested_percent_subsets_match_energon(
    tmp_path: Path, outer: tuple[str, str], inner: tuple[str, str] | None
) -> None:
    write(
        tmp_path / "inner.yaml",
        V2 + "splits:\n  train:\n    path: data\n"
        if inner is None
        else V2 + f"splits:\n  train:\n    path: data\n    subset: {{range: {list(inner)}}}\n",
    )
    write(
        tmp_path / "outer.yaml",
        V2 + f"splits:\n  train:\n    blend:\n      - path: inner.yaml\n"
        f"        subset: {{range: {list(outer)}}}\n",
    )
    (leaf,) = flatten(load_metadataset(str(tmp_path / "outer.yaml")), "train").leaves
    assert leaf.subset is not None
    expected = energon_subset(outer, *([inner] if inner else []))
    for total in (1000, 7, 12345):
        assert leaf.subset.resolve(total) == expected.compute_subset(total)
    if inner == ("20%", "100%"):
        assert leaf.subset.resolve(1000) == (200, 600)


def test_three_level_subsets_on_blend_reference_and_leaf(tmp_path: Path) -> None:
    path = write(
        tmp_path / "mix.yaml",
        V2
        + """
        splits:
          train:
            subset: {range: ["50%", "100%"]}
            blend:
              - path: a
                subset: {range: ["10%", "60%"]}
        """,
    )
    (leaf,) = flatten(load_metadataset(str(path)), "train").leaves
    assert leaf.subset is not None
    expected = energon_subset(("50%", "100%"), ("10%", "60%"))
    assert leaf.subset.resolve(999) == expected.compute_subset(999)
    assert leaf.subset.resolve(1000) == (350, 600)


def test_absolute_range_at_leaf_with_outer_percent(tmp_path: Path) -> None:
    write(
        tmp_path / "inner.yaml",
        V2 + "splits:\n  train:\n    path: d\n    subset: {range: [100, end]}\n",
    )
    outer = write(
        tmp_path / "outer.yaml",
        V2 + "splits:\n  train:\n    path: inner.yaml\n    subset: {range: ['0%', '50%']}\n",
    )
    (leaf,) = flatten(load_metadataset(str(outer)), "train").leaves
    assert leaf.subset == SubsetRange(0.0, 0.5, absolute=(100, None))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from megatron.energon.metadataset.metadataset_v2 import Subset

        expected = Subset(range=(100, "end")).merge(energon_subset(("0%", "50%")))
    assert leaf.subset.resolve(1000) == expected.compute_subset(1000) == (100, 550)
    with pytest.raises(ConfigError, match="only 50"):
        SubsetRange(absolute=(10, 100)).resolve(50)


def test_end_keyword_and_absolute_end(tmp_path: Path) -> None:
    path = write(
        tmp_path / "m.yaml",
        V2
        + """
        splits:
          train:
            blend:
              - {path: a, subset: {range: ['40%', end]}}
              - {path: b, subset: {range: [5, 25]}}
        """,
    )
    a, b = flatten(load_metadataset(str(path)), "train").leaves
    assert a.subset is not None and a.subset.resolve(100) == (40, 100)
    assert b.subset is not None and b.subset.resolve(100) == (5, 25)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            "splits:\n  train:\n    blend:\n      - {path: a}\n      - {path: b, weight: -1}\n",
            r"splits\.train\.blend\[1\]\.weight: must not be negative",
        ),
        (
            "splits:\n  train:\n    blend:\n      - {path: a, weight: heavy}\n",
            r"splits\.train\.blend\[0\]\.weight: expected a number, got 'heavy'",
        ),
        (
            "splits:\n  train:\n    path: a\n    blend: [{path: b}]\n",
            r"splits\.train: a node needs exactly one of .*both 'path' and 'blend'",
        ),
        (
            "splits:\n  train:\n    path: a\n    wieght: 2\n",
            r"splits\.train: unknown key\(s\) 'wieght'.*Valid keys: aux, dataset_config",
        ),
        (
            "splits:\n  train:\n    subset: {range: [0, 10]}\n    blend: [{path: a}]\n",
            r"splits\.train\.subset: absolute ranges .* not allowed on a blend node",
        ),
        (
            "splits:\n  train:\n    path: a\n    subset: {range: ['10%', 20]}\n",
            r"splits\.train\.subset\.range: the end must be a percentage",
        ),
        (
            "splits:\n  train:\n    path: a\n    shuffle_over_epochs_multiplier: 0\n",
            r"splits\.train\.shuffle_over_epochs_multiplier: expected a positive integer",
        ),
        (
            "splits:\n  train:\n    blend_epochized: [{path: a, repetitions: 0}]\n",
            r"splits\.train\.blend_epochized: every repetitions is 0",
        ),
    ],
)
def test_bad_values_name_file_and_key_path(tmp_path: Path, body: str, message: str) -> None:
    path = write(tmp_path / "bad.yaml", V2 + body)
    with pytest.raises(ConfigError, match=message) as info:
        load_metadataset(str(path))
    assert info.value.path == str(path)
    assert str(path) in str(info.value)


def test_unknown_module_and_class_and_invalid_yaml(tmp_path: Path) -> None:
    bad_module = write(tmp_path / "a.yaml", "__module__: evil.pkg\n__class__: MetadatasetV2\n")
    with pytest.raises(ConfigError, match=r"__module__: unknown module 'evil\.pkg'.*stoker"):
        load_metadataset(str(bad_module))
    bad_class = write(tmp_path / "b.yaml", "__module__: stoker\n__class__: Blender\nsplits: {}\n")
    with pytest.raises(ConfigError, match=r"__class__: unknown metadataset class 'Blender'"):
        load_metadataset(str(bad_class))
    broken = write(tmp_path / "c.yaml", V2 + "splits:\n  train: [unclosed\n")
    with pytest.raises(ConfigError, match="invalid YAML") as info:
        load_metadataset(str(broken))
    assert info.value.path == str(broken)
    with pytest.raises(StorageError, match="does not exist"):
        load_metadataset(str(tmp_path / "missing.yaml"))


def test_missing_nested_file_and_cycles_are_located(tmp_path: Path) -> None:
    outer = write(tmp_path / "o.yaml", V2 + "splits:\n  train:\n    path: gone.yaml\n")
    with pytest.raises(ConfigError, match=r"splits\.train\.path: the metadataset file .*gone"):
        load_metadataset(str(outer))
    write(tmp_path / "x.yaml", V2 + "splits:\n  train:\n    path: y.yaml\n")
    write(tmp_path / "y.yaml", V2 + "splits:\n  train:\n    path: x.yaml\n")
    with pytest.raises(ConfigError, match="cycle"):
        load_metadataset(str(tmp_path / "x.yaml"))


def test_nested_split_missing_names_referencing_key(tmp_path: Path) -> None:
    write(tmp_path / "inner.yaml", V2 + "splits:\n  train:\n    path: d\n")
    outer = write(tmp_path / "o.yaml", V2 + "splits:\n  val:\n    path: inner.yaml\n")
    with pytest.raises(
        ConfigError, match=r"splits\.val\.path: no split 'val'.*Valid splits: train"
    ):
        flatten(load_metadataset(str(outer)), "val")


def test_v1_syntax_reads_as_weighted_blend(tmp_path: Path) -> None:
    path = write(
        tmp_path / "v1.yaml",
        """
        __module__: megatron.energon
        __class__: Metadataset
        splits:
          train:
            datasets:
              - {weight: 3, path: ./a, subflavors: {x: 1}}
              - {weight: 1, path: ./b, split_part: val, subflavor: legacy}
        """,
    )
    md = load_metadataset(str(path))
    assert md.version == "v1"
    plan = flatten(md, "train")
    assert plan.kind == "weighted"
    assert [(leaf.weight, leaf.split_part) for leaf in plan.leaves] == [
        (0.75, "train"),
        (0.25, "val"),
    ]
    assert plan.leaves[1].subflavors == {"__subflavor__": "legacy"}
    with pytest.raises(
        ConfigError, match=r"splits\.train\.datasets\[0\]: unknown key\(s\) 'subset'"
    ):
        load_metadataset(
            str(
                write(
                    tmp_path / "v1b.yaml",
                    "splits:\n  train:\n    datasets:\n"
                    "      - {path: a, subset: {range: ['0%', '5%']}}\n",
                )
            )
        )


def test_join_is_parsed_and_validated(tmp_path: Path) -> None:
    path = write(
        tmp_path / "join.yaml",
        V2
        + """
        splits:
          train:
            blend:
              - weight: 2
                join:
                  image: {path: img}
                  text: {path: txt, nonmatch: skip}
                joiner: {__module__: my.mod, __class__: Pair}
                subflavors: {j: 1}
              - {weight: 1, path: other}
        """,
    )
    md = load_metadataset(str(path))
    node = md.splits["train"]
    assert isinstance(node, BlendNode)
    join = node.items[0].node
    assert isinstance(join, JoinNode)
    assert join.names == ("image", "text")
    assert [p.nonmatch for p in join.parts] == ["error", "skip"]
    assert join.joiner is not None and (join.joiner.module, join.joiner.name) == ("my.mod", "Pair")
    plan = flatten(md, "train")
    assert plan.leaves[0].join is join
    assert plan.leaves[0].weight == pytest.approx(2 / 3)
    assert plan.leaves[0].subflavors == {"j": 1}
    bad = write(
        tmp_path / "badjoin.yaml",
        V2 + "splits:\n  train:\n    join: [{path: a, nonmatch: maybe}]\n",
    )
    with pytest.raises(ConfigError, match=r"splits\.train\.join\[0\]\.nonmatch: expected one of"):
        load_metadataset(str(bad))


def test_epochized_repetitions_multiply(tmp_path: Path) -> None:
    write(
        tmp_path / "inner.yaml",
        V2 + "splits:\n  train:\n    blend_epochized:\n"
        "      - {repetitions: 2, path: a}\n      - {repetitions: 0.5, path: b}\n",
    )
    outer = write(
        tmp_path / "outer.yaml",
        V2 + "splits:\n  train:\n    blend_epochized:\n"
        "      - {repetitions: 1.5, path: inner.yaml}\n      - {repetitions: 3, path: c}\n",
    )
    plan = flatten(load_metadataset(str(outer)), "train")
    assert plan.kind == "epochized"
    assert [leaf.repetitions for leaf in plan.leaves] == [3.0, 0.75, 3.0]
    assert all(leaf.weight is None for leaf in plan.leaves)
    concat = flatten(load_metadataset(str(outer)), "train", training=False)
    assert concat.kind == "concat"
    assert [leaf.path for leaf in concat.leaves] == [leaf.path for leaf in plan.leaves]
    assert all(leaf.repetitions is None for leaf in concat.leaves)


def test_mixing_weighted_and_epochized_is_refused(tmp_path: Path) -> None:
    write(tmp_path / "inner.yaml", V2 + "splits:\n  train:\n    blend: [{path: a}, {path: b}]\n")
    outer = write(
        tmp_path / "outer.yaml",
        V2 + "splits:\n  train:\n    blend_epochized: [{repetitions: 2, path: inner.yaml}]\n",
    )
    with pytest.raises(ConfigError, match=r"splits\.train\.blend_epochized\[0\]: a weighted blend"):
        flatten(load_metadataset(str(outer)), "train")


def test_shuffle_over_epochs_multiplier_combines(tmp_path: Path) -> None:
    write(
        tmp_path / "inner.yaml",
        V2 + "splits:\n  train:\n    blend:\n      - {path: a, shuffle_over_epochs_multiplier: 3}\n"
        "      - {path: b, shuffle_over_epochs_multiplier: -1}\n"
        "      - {path: c, shuffle_over_epochs_multiplier: null}\n",
    )
    outer = write(
        tmp_path / "o.yaml",
        V2 + "splits:\n  train:\n    path: inner.yaml\n    shuffle_over_epochs_multiplier: 2\n",
    )
    leaves = flatten(load_metadataset(str(outer)), "train").leaves
    assert [leaf.shuffle_over_epochs_multiplier for leaf in leaves] == [6, -1, None]


def test_leaf_options_and_aux(tmp_path: Path) -> None:
    path = write(
        tmp_path / "m.yaml",
        V2
        + """
        splits:
          train:
            path: crude
            dataset_config: other.yaml
            split_config: split2.yaml
            aux: {media: filesystem://media, ref: ../refs, s3fs: filesystem+s3://b/x}
        """,
    )
    (leaf,) = flatten(load_metadataset(str(path)), "train").leaves
    assert (leaf.dataset_config, leaf.split_config) == ("other.yaml", "split2.yaml")
    assert leaf.aux["media"].filesystem and leaf.aux["media"].path == str(tmp_path / "media")
    assert not leaf.aux["ref"].filesystem and leaf.aux["ref"].path == str(tmp_path.parent / "refs")
    assert leaf.aux["s3fs"].path == "s3://b/x" and leaf.aux["s3fs"].filesystem
    node = load_metadataset(str(path)).splits["train"]
    assert isinstance(node, DatasetRef) and node.nested is None


def test_is_metadataset(tmp_path: Path) -> None:
    assert is_metadataset(str(write(tmp_path / "m.yaml", TUTORIAL)))
    assert is_metadataset(str(write(tmp_path / "m.yml", "__class__: Metadataset\n")))
    assert not is_metadataset(str(write(tmp_path / "d.yaml", "sample_type: x\n")))
    assert not is_metadataset(str(write(tmp_path / "broken.yaml", "a: [\n")))
    assert not is_metadataset(str(tmp_path / "missing.yaml"))
    assert not is_metadataset(str(fake_dataset(tmp_path / "ds")))


def test_stoker_module_and_relative_top_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(
        tmp_path / "m.yaml",
        "__module__: stoker.metadataset\n__class__: MetadatasetV2\n"
        "splits:\n  train: {path: data}\n",
    )
    monkeypatch.chdir(tmp_path)
    md = load_metadataset("m.yaml")
    assert md.path == str(tmp_path / "m.yaml")
    assert flatten(md, "train").leaves[0].path == str(tmp_path / "data")


def test_inline_nested_blend_normalises_per_level(tmp_path: Path) -> None:
    """A stoker extension: a blend entry may itself be a blend (Energon needs a nested file)."""
    path = write(
        tmp_path / "m.yaml",
        V2
        + """
        splits:
          train:
            blend:
              - weight: 3
                blend: [{weight: 1, path: a}, {weight: 4, path: b}]
              - {weight: 1, path: c}
        """,
    )
    plan = flatten(load_metadataset(str(path)), "train")
    assert [leaf.weight for leaf in plan.leaves] == pytest.approx([0.75 * 0.2, 0.75 * 0.8, 0.25])
    missing = write(tmp_path / "n.yaml", "__class__: MetadatasetV2\nsplits: {train: {path: a}}\n")
    with pytest.raises(ConfigError, match=r"__module__: is missing\..*megatron\.energon"):
        load_metadataset(str(missing))
