"""``BlendDataset``: items drawn from several datasets by weight."""

from __future__ import annotations

from typing import Any

from stoker.model.worker_config import WorkerConfig
from stoker.plan.weights import Weight
from stoker.runtime.mix_batch import MixBatchDataset
from stoker.runtime.streams import Loadable
from stoker.wrappers.base import all_can_restore, restore_from_any


def only(items: list[Any]) -> Any:
    """The one item of a blend's group of one."""
    return items[0]


class BlendDataset(MixBatchDataset):
    """Each output is the next item of one of the datasets, chosen by weight (Energon's
    signature): a mix of one whole item per output, so restores are exact and elastic too.

    A dataset whose streams run out (one pass) drops out and the others go on; the blend ends
    when all have. ``len()`` is the sum of the datasets' lengths, as in Energon. A weight may be
    a :class:`~stoker.WeightSchedule` of the global batch index (output ``k`` of stream ``v`` is
    global batch ``k * V + v``).

    Example:
        >>> from stoker import get_loader, get_train_dataset
        >>> coco, coyo = (
        ...     get_train_dataset(name, worker_config=wc, batch_size=4, shuffle_buffer_size=None,
        ...                       max_samples_per_sequence=None)
        ...     for name in ("coco-wds", "coyo-wds")
        ... )
        >>> blend = BlendDataset((coco, 2), (coyo, 8), worker_config=wc)
        >>> len(next(iter(get_loader(blend))).caption)  # a whole batch of one dataset
        4
    """

    def __init__(
        self, *dataset_weights: tuple[Loadable, Weight], worker_config: WorkerConfig
    ) -> None:
        super().__init__(*dataset_weights, batch_size=1, batch_mix_fn=only,
                         worker_config=worker_config)  # fmt: skip

    def can_restore_sample(self) -> bool:
        """When every blended dataset can restore its items."""
        return all_can_restore(self.datasets)

    def restore_sample(self, restore_key: Any) -> Any:
        """The item with ``restore_key``, from the first blended dataset that knows the key
        (Energon prefixes the dataset's number; stoker's keys name their dataset's path)."""
        return restore_from_any(self.datasets, restore_key, "BlendDataset")
