"""The typed view of ``stoker.flavors`` (``__init__.py`` resolves these lazily from ``_MODULES``;
``tests/unit/test_exports.py`` keeps the two in step)."""

from stoker.flavors.base import BaseCoreDatasetFactory as BaseCoreDatasetFactory
from stoker.flavors.binidx import BinIdxDatasetFactory as BinIdxDatasetFactory
from stoker.flavors.binidx import DefaultBinIdxDatasetFactory as DefaultBinIdxDatasetFactory
from stoker.flavors.config import get_dataset_from_config as get_dataset_from_config
from stoker.flavors.generic import DEFAULT_DECODER as DEFAULT_DECODER
from stoker.flavors.generic import (
    DefaultDecoderWebdatasetFactory as DefaultDecoderWebdatasetFactory,
)
from stoker.flavors.generic import (
    DefaultGenericWebdatasetFactory as DefaultGenericWebdatasetFactory,
)
from stoker.flavors.generic import StandardWebdatasetFactory as StandardWebdatasetFactory
from stoker.flavors.joined import JoinedWebdatasetFactory as JoinedWebdatasetFactory
from stoker.flavors.jsonl import CrudeJsonlDatasetFactory as CrudeJsonlDatasetFactory
from stoker.flavors.jsonl import DefaultCrudeJsonlDatasetFactory as DefaultCrudeJsonlDatasetFactory
from stoker.flavors.typed import CaptioningWebdataset as CaptioningWebdataset
from stoker.flavors.typed import CrudeWebdataset as CrudeWebdataset
from stoker.flavors.typed import ImageClassificationWebdataset as ImageClassificationWebdataset
from stoker.flavors.typed import ImageWebdataset as ImageWebdataset
from stoker.flavors.typed import InterleavedWebdataset as InterleavedWebdataset
from stoker.flavors.typed import MultiChoiceVQAWebdataset as MultiChoiceVQAWebdataset
from stoker.flavors.typed import OCRWebdataset as OCRWebdataset
from stoker.flavors.typed import SimilarityInterleavedWebdataset as SimilarityInterleavedWebdataset
from stoker.flavors.typed import TextWebdataset as TextWebdataset
from stoker.flavors.typed import VidQAWebdataset as VidQAWebdataset
from stoker.flavors.typed import VQAOCRWebdataset as VQAOCRWebdataset
from stoker.flavors.typed import VQAWebdataset as VQAWebdataset
from stoker.flavors.webdataset import BaseWebdatasetFactory as BaseWebdatasetFactory
from stoker.flavors.webdataset import EmptyDatasetError as EmptyDatasetError
from stoker.flavors.webdataset import ShardInfo as ShardInfo

__all__: list[str]
