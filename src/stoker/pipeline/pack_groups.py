"""Packing groups: datasets packed in buffers of their own (Energon's ``group:``, pull #239).

A metadataset entry may name a ``group``; nested names join outer first with ``+``. Each group
of a stream has its own packing buffer, so a pack never mixes samples of two groups, and
``packing_buffer_size`` / ``shuffle_buffer_size`` may be dicts from group name (``None``: the
default group, datasets without ``group:``) to a size; a group whose packing size is ``None`` is
not packed (its samples pass through ``postencode_sample`` alone, as in Energon). Packs leave in
the order their group's buffer fills, so the groups' shares of the samples follow the blend
(Energon instead blends the packed streams by the groups' summed weights).

Example:
    >>> groups = PackingGroups.of(["a", None, "a"], {"a": 8, None: None})
    >>> groups.of_dataset, groups.sizes, groups.names
    ((0, 1, 0), (8, None), ('a', None))
    >>> group_setting({"a": 4, None: None}, "a", "shuffle_buffer_size")
    4
    >>> group_setting({"a": 4}, "b", "shuffle_buffer_size")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    stoker.errors.ConfigError: shuffle_buffer_size is a dict per packing group but has no ...
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from stoker.errors import ConfigError

#: An int for every group, or one per group name (``None``: the default group).
GroupSizes = int | Mapping[str | None, int | None] | None


def group_setting(setting: GroupSizes, group: str | None, name: str) -> int | None:
    """``setting`` for ``group``: the value itself, or its entry where it is a dict."""
    if not isinstance(setting, Mapping):
        return setting
    if group not in setting:
        have = ", ".join(repr(k) for k in setting) or "nothing"
        raise ConfigError(
            f"{name} is a dict per packing group but has no entry for group {group!r} "
            f"(it has: {have}).",
            hint=f"Add {group!r}: SIZE (or None) to {name}, or give one int for all groups.",
        )
    return setting[group]


def check_setting(setting: GroupSizes, name: str) -> None:
    """Refuse sizes below 1 (``None`` turns the buffer off)."""
    values = setting.values() if isinstance(setting, Mapping) else [setting]
    for value in values:
        if value is not None and (isinstance(value, bool) or int(value) < 1):
            raise ConfigError(f"{name}={setting!r}: a size must be >= 1 (or None for off).")


@dataclass(frozen=True)
class PackingGroups:
    """Which packing group each dataset of a stream is in, and each group's buffer size."""

    #: Per dataset (source), the index of its group.
    of_dataset: tuple[int, ...]
    #: Per group, its packing buffer size (None: its samples are not packed).
    sizes: tuple[int | None, ...]
    #: Per group, its name (None: the default group).
    names: tuple[str | None, ...]

    @staticmethod
    def of(groups: Sequence[str | None], sizes: GroupSizes) -> PackingGroups:
        """The groups of datasets named ``groups`` (in order of first appearance)."""
        names = tuple(dict.fromkeys(groups))
        return PackingGroups(
            of_dataset=tuple(names.index(g) for g in groups),
            sizes=tuple(group_setting(sizes, g, "packing_buffer_size") for g in names),
            names=names,
        )

    @property
    def named(self) -> bool:
        """Whether any dataset has a ``group:`` (then stats are also given per group)."""
        return any(name is not None for name in self.names)

    def label(self, group: int) -> str:
        """The group's name in ``loader.stats().packing`` (``default`` for no ``group:``)."""
        name = self.names[group]
        return "default" if name is None else name
