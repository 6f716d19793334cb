"""Energon's composable dataset wrappers, over stoker's streams (one wrapper per module).

Each wraps any dataset stoker can load (``get_train_dataset``'s result, a ``MixBatchDataset``,
another wrapper), runs in the dataloader workers, and saves and restores exactly: see
:mod:`stoker.wrappers.base`.
"""

from stoker.wrappers.base import BaseWrapperDataset, Wrapper
from stoker.wrappers.batch import BatchDataset
from stoker.wrappers.blend import BlendDataset
from stoker.wrappers.calls import get_sample_restore_key
from stoker.wrappers.concat import ConcatDataset
from stoker.wrappers.epochize import EpochizeDataset
from stoker.wrappers.filter import FilterDataset
from stoker.wrappers.group_batch import GroupBatchDataset
from stoker.wrappers.iter_map import IterMapDataset
from stoker.wrappers.limit import LimitDataset
from stoker.wrappers.map import MapDataset
from stoker.wrappers.packing import PackingDataset
from stoker.wrappers.passthrough import GcDataset, LogSampleDataset, WatchdogDataset
from stoker.wrappers.repeat import RepeatDataset
from stoker.wrappers.shuffle_buffer import ShuffleBufferDataset

__all__ = [
    "BaseWrapperDataset",
    "BatchDataset",
    "BlendDataset",
    "ConcatDataset",
    "EpochizeDataset",
    "FilterDataset",
    "GcDataset",
    "GroupBatchDataset",
    "IterMapDataset",
    "LimitDataset",
    "LogSampleDataset",
    "MapDataset",
    "PackingDataset",
    "RepeatDataset",
    "ShuffleBufferDataset",
    "WatchdogDataset",
    "Wrapper",
    "get_sample_restore_key",
]
