"""Where :mod:`stoker.pipeline.sample_failure` and :mod:`stoker.pipeline.skip_policy` used to
be one module: their names, for the importers not moved yet (``runtime/stream.py``,
``runtime/build.py``). New code imports from those two modules."""

from stoker.pipeline.sample_failure import (
    BATCH_STAGES as BATCH_STAGES,
)
from stoker.pipeline.sample_failure import (
    SYSTEM_EXCEPTIONS as SYSTEM_EXCEPTIONS,
)
from stoker.pipeline.sample_failure import ErrorHandler as ErrorHandler
from stoker.pipeline.sample_failure import SkipSample as SkipSample
from stoker.pipeline.sample_failure import describe_sample as describe_sample
from stoker.pipeline.sample_failure import log_exception as log_exception
from stoker.pipeline.sample_failure import reraise_exception as reraise_exception
from stoker.pipeline.sample_failure import scope_of as scope_of
from stoker.pipeline.sample_failure import sources_of as sources_of
from stoker.pipeline.sample_failure import wrap_failure as wrap_failure
from stoker.pipeline.skip_policy import STORAGE_SHARDS_IN_A_ROW as STORAGE_SHARDS_IN_A_ROW
from stoker.pipeline.skip_policy import ErrorPolicy as ErrorPolicy
from stoker.pipeline.skip_policy import ErrorTracker as ErrorTracker
