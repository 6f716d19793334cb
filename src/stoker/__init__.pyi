"""The typed view of ``stoker``: each public name where it is defined.

``src/stoker/__init__.py`` resolves these names lazily from ``_EXPORTS``; type checkers read
this file instead. ``tests/unit/test_exports.py`` keeps the two in step (and says which line
to add here when a name is added there).
"""

from stoker.api import get_loader as get_loader
from stoker.api import get_savable_loader as get_savable_loader
from stoker.api import get_train_dataset as get_train_dataset
from stoker.api import get_val_dataset as get_val_dataset
from stoker.api import get_val_datasets as get_val_datasets
from stoker.errors import ConfigError as ConfigError
from stoker.errors import FatalSampleError as FatalSampleError
from stoker.errors import FormatError as FormatError
from stoker.errors import MissingSampleIndexError as MissingSampleIndexError
from stoker.errors import MissingSamplesTableError as MissingSamplesTableError
from stoker.errors import PrepareLockedError as PrepareLockedError
from stoker.errors import SampleError as SampleError
from stoker.errors import StokerError as StokerError
from stoker.errors import StorageError as StorageError
from stoker.flavors import BaseCoreDatasetFactory as BaseCoreDatasetFactory
from stoker.flavors import BaseWebdatasetFactory as BaseWebdatasetFactory
from stoker.flavors import BinIdxDatasetFactory as BinIdxDatasetFactory
from stoker.flavors import CaptioningWebdataset as CaptioningWebdataset
from stoker.flavors import CrudeJsonlDatasetFactory as CrudeJsonlDatasetFactory
from stoker.flavors import CrudeWebdataset as CrudeWebdataset
from stoker.flavors import DefaultBinIdxDatasetFactory as DefaultBinIdxDatasetFactory
from stoker.flavors import DefaultCrudeJsonlDatasetFactory as DefaultCrudeJsonlDatasetFactory
from stoker.flavors import DefaultDecoderWebdatasetFactory as DefaultDecoderWebdatasetFactory
from stoker.flavors import DefaultGenericWebdatasetFactory as DefaultGenericWebdatasetFactory
from stoker.flavors import ImageClassificationWebdataset as ImageClassificationWebdataset
from stoker.flavors import ImageWebdataset as ImageWebdataset
from stoker.flavors import InterleavedWebdataset as InterleavedWebdataset
from stoker.flavors import JoinedWebdatasetFactory as JoinedWebdatasetFactory
from stoker.flavors import MultiChoiceVQAWebdataset as MultiChoiceVQAWebdataset
from stoker.flavors import OCRWebdataset as OCRWebdataset
from stoker.flavors import SimilarityInterleavedWebdataset as SimilarityInterleavedWebdataset
from stoker.flavors import StandardWebdatasetFactory as StandardWebdatasetFactory
from stoker.flavors import TextWebdataset as TextWebdataset
from stoker.flavors import VidQAWebdataset as VidQAWebdataset
from stoker.flavors import VQAOCRWebdataset as VQAOCRWebdataset
from stoker.flavors import VQAWebdataset as VQAWebdataset
from stoker.flavors import get_dataset_from_config as get_dataset_from_config
from stoker.flavors.load import load_dataset as load_dataset
from stoker.flavors.metadataset_tools import TraversedDatasetReference as TraversedDatasetReference
from stoker.flavors.metadataset_tools import prepare_metadataset as prepare_metadataset
from stoker.flavors.metadataset_tools import traverse_metadataset as traverse_metadataset
from stoker.format.pending import PrepareReport as PrepareReport
from stoker.format.prepare import prepare_dataset as prepare_dataset
from stoker.media.av_data import AVData as AVData
from stoker.media.av_decoder import AVDecoder as AVDecoder
from stoker.media.limits import AVLimits as AVLimits
from stoker.media.lookup import get_media_metadata as get_media_metadata
from stoker.media.metadata import AVMetadata as AVMetadata
from stoker.media.metadata import ImageMetadata as ImageMetadata
from stoker.media.uniform import get_clips_uniform as get_clips_uniform
from stoker.media.uniform import get_single_frames_uniform as get_single_frames_uniform
from stoker.metadataset import Metadataset as Metadataset
from stoker.model.batch import Batch as Batch
from stoker.model.cache_pool import CachePool as CachePool
from stoker.model.cache_pool import DirectLazy as DirectLazy
from stoker.model.cache_pool import FileStoreDecoder as FileStoreDecoder
from stoker.model.cache_pool import Lazy as Lazy
from stoker.model.cache_pool import MockLazy as MockLazy
from stoker.model.cache_pool import NoCachePool as NoCachePool
from stoker.model.cooking import Cooker as Cooker
from stoker.model.cooking import basic_sample_keys as basic_sample_keys
from stoker.model.cooking import cooker as cooker
from stoker.model.dataclass_helpers import edataclass as edataclass
from stoker.model.samples import CaptioningSample as CaptioningSample
from stoker.model.samples import CrudeSample as CrudeSample
from stoker.model.samples import ImageClassificationSample as ImageClassificationSample
from stoker.model.samples import ImageSample as ImageSample
from stoker.model.samples import InterleavedSample as InterleavedSample
from stoker.model.samples import MultiChoiceVQASample as MultiChoiceVQASample
from stoker.model.samples import OCRSample as OCRSample
from stoker.model.samples import Sample as Sample
from stoker.model.samples import SimilarityInterleavedSample as SimilarityInterleavedSample
from stoker.model.samples import SourceInfo as SourceInfo
from stoker.model.samples import TextSample as TextSample
from stoker.model.samples import VidQASample as VidQASample
from stoker.model.samples import VQAOCRSample as VQAOCRSample
from stoker.model.samples import VQASample as VQASample
from stoker.model.task import AugmentTaskEncoder as AugmentTaskEncoder
from stoker.model.task import DefaultTaskEncoder as DefaultTaskEncoder
from stoker.model.task import IgnoreSample as IgnoreSample
from stoker.model.task import TaskEncoder as TaskEncoder
from stoker.model.task import get_stateless as get_stateless
from stoker.model.task import stateless as stateless
from stoker.model.worker_config import WorkerConfig as WorkerConfig
from stoker.pipeline.batch import batch_list as batch_list
from stoker.pipeline.batch import batch_pad_stack as batch_pad_stack
from stoker.pipeline.batch import batch_stack as batch_stack
from stoker.pipeline.batch import generic_batch as generic_batch
from stoker.pipeline.bins import first_fit_decreasing as first_fit_decreasing
from stoker.pipeline.concat import concat_pad as concat_pad
from stoker.pipeline.concat import generic_concat as generic_concat
from stoker.pipeline.concat import homogeneous_concat_mix as homogeneous_concat_mix
from stoker.pipeline.decode import SampleDecoder as SampleDecoder
from stoker.pipeline.decode import register_decoder as register_decoder
from stoker.pipeline.pack_output import PackedSamplesOutput as PackedSamplesOutput
from stoker.pipeline.pack_partial import PartialSample as PartialSample
from stoker.pipeline.sample_failure import SkipSample as SkipSample
from stoker.pipeline.sample_failure import log_exception as log_exception
from stoker.pipeline.sample_failure import reraise_exception as reraise_exception
from stoker.pipeline.skip_policy import ErrorPolicy as ErrorPolicy
from stoker.plan.weights import WeightSchedule as WeightSchedule
from stoker.runtime.dataset import LoaderDataset as LoaderDataset
from stoker.runtime.loader import Loader as Loader
from stoker.runtime.mix_batch import MixBatchDataset as MixBatchDataset
from stoker.runtime.savable_loader import BasicDataLoader as BasicDataLoader
from stoker.runtime.savable_loader import SavableDataLoader as SavableDataLoader
from stoker.sources.aux import DecodeFileStore as DecodeFileStore
from stoker.sources.aux import FileStore as FileStore
from stoker.sources.aux import PrimaryFileStore as PrimaryFileStore
from stoker.sources.aux import SystemFileStore as SystemFileStore
from stoker.sources.blender import Blender as Blender
from stoker.sources.file_cache_pool import FileCacheLazy as FileCacheLazy
from stoker.sources.file_cache_pool import FileStoreCachePool as FileStoreCachePool
from stoker.storage.epath import DEFAULT_PROFILE_NAME as DEFAULT_PROFILE_NAME
from stoker.storage.epath import EPath as EPath
from stoker.storage.options import LoaderOptions as LoaderOptions
from stoker.wrappers import BatchDataset as BatchDataset
from stoker.wrappers import BlendDataset as BlendDataset
from stoker.wrappers import ConcatDataset as ConcatDataset
from stoker.wrappers import EpochizeDataset as EpochizeDataset
from stoker.wrappers import FilterDataset as FilterDataset
from stoker.wrappers import GcDataset as GcDataset
from stoker.wrappers import GroupBatchDataset as GroupBatchDataset
from stoker.wrappers import IterMapDataset as IterMapDataset
from stoker.wrappers import LimitDataset as LimitDataset
from stoker.wrappers import LogSampleDataset as LogSampleDataset
from stoker.wrappers import MapDataset as MapDataset
from stoker.wrappers import PackingDataset as PackingDataset
from stoker.wrappers import RepeatDataset as RepeatDataset
from stoker.wrappers import ShuffleBufferDataset as ShuffleBufferDataset
from stoker.wrappers import WatchdogDataset as WatchdogDataset

__version__: str
__all__: list[str]

# Energon's names for what get_*_dataset return (``_ALIASES``).
MetadatasetV2 = Metadataset
SavableDataset = LoaderDataset
