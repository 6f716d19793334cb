"""One exception tree for everything stoker raises on purpose, classified by *scope*.

Every error says what is wrong, where (file, sample key, byte offset) and what to do about it, so
that the CLI can print it as one paragraph instead of a traceback. Its class's :attr:`scope`
says how far the damage reaches, and so what the loader's error policy may do with it:

============  ===================================================  ==========================
scope         what it concerns                                     under ``mode="skip"``
============  ===================================================  ==========================
``config``    the setup: arguments, metadata, a missing file       stops the run at once
``sample``    one sample (or batch): decoding, a user hook         skipped, counted
``storage``   a read that failed on every retry (transient)        skipped, counted
``shard``     a shard's data is damaged (e.g. truncated)           rest of the shard skipped
============  ===================================================  ==========================

Errors cross process boundaries (dataloader workers) with every field, whatever the subclass's
``__init__`` takes.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Iterable
from types import ModuleType
from typing import ClassVar, Literal

#: How far an error reaches (see the module's table).
Scope = Literal["config", "sample", "storage", "shard"]


class StokerError(Exception):
    """Base class of all errors stoker raises on purpose.

    Args:
        problem: What is wrong, in one sentence.
        path: The file or folder concerned, if any.
        key: The sample key concerned, if any.
        offset: The byte offset inside ``path``, if any.
        hint: What the user can do about it.
        message: Taken as ``problem`` when that is not given (how torch re-raises an error from
            a dataloader worker: ``type(error)(message=text)``).

    Example:
        >>> error = StokerError("bad header.", path="a.tar", offset=512, hint="Run lint.")
        >>> str(error), error.scope
        ('a.tar, byte offset 512: bad header. Run lint.', 'config')
    """

    #: How far the error reaches: a configuration error stops the run at once.
    scope: ClassVar[Scope] = "config"

    def __init__(
        self,
        problem: str = "",
        *,
        path: str | None = None,
        key: str | None = None,
        offset: int | None = None,
        hint: str | None = None,
        message: str | None = None,
    ) -> None:
        self.problem = problem or message or ""
        self.path = path
        self.key = key
        self.offset = offset
        self.hint = hint
        super().__init__(self.message)

    def __reduce__(self) -> tuple[object, ...]:
        # Every field (of subclasses too) crosses a process boundary; private ones (a sample
        # kept for an error handler) stay behind. Rebuilt without calling __init__, so that a
        # subclass with another signature unpickles too.
        state = {k: v for k, v in vars(self).items() if not k.startswith("_") or k == "__notes__"}
        return (_rebuild, (type(self), self.args, state))

    @property
    def where(self) -> str:
        """The location as ``file, sample 'key', byte offset N`` (empty if unknown)."""
        parts = []
        if self.path is not None:
            parts.append(str(self.path))
        if self.key is not None:
            parts.append(f"sample {self.key!r}")
        if self.offset is not None:
            parts.append(f"byte offset {self.offset}")
        return ", ".join(parts)

    @property
    def message(self) -> str:
        text = f"{self.where}: {self.problem}" if self.where else self.problem
        if self.hint:
            text += f" {self.hint}"
        return text

    def __str__(self) -> str:
        return self.message  # fields set after construction (a shard's path) show too


def _rebuild(
    cls: type[StokerError], args: tuple[object, ...], state: dict[str, object]
) -> Exception:
    error = cls.__new__(cls)
    error.args = args
    vars(error).update(state)
    return error


def did_you_mean(name: str, candidates: Iterable[str]) -> str:
    """``"Did you mean 'X'? "`` for the closest candidate to ``name`` (difflib), else ``""``.

    Case is ignored, so ``captioningsample`` finds ``CaptioningSample``.

    Example:
        >>> did_you_mean("CaptionSample", ["CaptioningSample", "ImageSample"])
        "Did you mean 'CaptioningSample'? "
        >>> did_you_mean("wieght", ["path", "weight", "subflavors"])
        "Did you mean 'weight'? "
    """
    by_lower = {c.lower(): c for c in candidates}
    close = difflib.get_close_matches(name.lower(), list(by_lower), n=1, cutoff=0.6)
    return f"Did you mean {by_lower[close[0]]!r}? " if close else ""


class StorageError(StokerError):
    """A file or object could not be found, read or written (a permanent failure: not found,
    access denied). Scope ``config``: the setup must change."""


class TransientStorageError(StorageError):
    """A read failed on every attempt of its retry budget (timeouts, connection errors, 5xx).

    Scope ``storage``: under ``ErrorPolicy(mode="skip")`` the sample is skipped and counted.
    """

    scope: ClassVar[Scope] = "storage"


class FormatError(StokerError):
    """A data or metadata file does not have the expected format."""


class CorruptShardError(FormatError):
    """A shard's data is damaged: it ends before its index says (truncated or replaced), or a
    sample's members are not where the index points.

    Scope ``shard``: under ``ErrorPolicy(mode="skip")`` the rest of that shard is skipped for
    the pass (each sample counted), instead of failing sample after sample.
    """

    scope: ClassVar[Scope] = "shard"


class ConfigError(StokerError, ValueError):
    """A configuration (dataset.yaml, split.yaml, CLI flags, arguments) is invalid."""


class AlreadyPreparedError(StokerError):
    """The dataset already has metadata and overwriting was not allowed."""


class MissingSampleIndexError(ConfigError, StorageError, RuntimeError):
    """The dataset has no sample tables in ``.nv-meta/index.sqlite`` (it was prepared with
    ``--no-sample-index``, Energon's ``--no-sample-tables``), and a join, an aux dataset, a
    mount or a media metadata lookup needs them.

    A :class:`ConfigError` and a :class:`StorageError` (what those places raised before), and a
    ``RuntimeError`` as Energon's ``MissingSamplesTableError``, which is this class.

    Example:
        >>> e = MissingSampleIndexError.for_dataset("/data/ds", "joins")
        >>> isinstance(e, MissingSamplesTableError), "--no-sample-tables" in str(e)
        (True, True)
    """

    @classmethod
    def for_dataset(cls, path: str, needed_for: str) -> MissingSampleIndexError:
        return cls(
            f"the dataset has no sample tables in .nv-meta/index.sqlite, which {needed_for} "
            "need (was it prepared with --no-sample-index, Energon's --no-sample-tables?).",
            path=path,
            hint="Prepare it again with `stoker prepare` (or Energon's) without that flag.",
        )


#: Energon's name (its next release, pull request #230) for :class:`MissingSampleIndexError`.
MissingSamplesTableError = MissingSampleIndexError


class PrepareLockedError(StokerError):
    """Another ``prepare`` of the same dataset is running (it holds the lock in the work
    folder); the message names its pid, host and start, and the lock file."""


class SampleError(StokerError):
    """One sample could not be read, decoded, mapped or encoded (scope ``sample``).

    Args:
        problem: What went wrong.
        part: The part (e.g. ``jpg``) or field concerned, if any.

    Example:
        >>> str(SampleError("cannot decode.", key="s1", part="jpg"))
        "sample 's1', part 'jpg': cannot decode."
    """

    scope: ClassVar[Scope] = "sample"

    def __init__(
        self,
        problem: str = "",
        *,
        path: str | None = None,
        key: str | None = None,
        offset: int | None = None,
        part: str | None = None,
        hint: str | None = None,
        message: str | None = None,
    ) -> None:
        self.part = part
        super().__init__(problem, path=path, key=key, offset=offset, hint=hint, message=message)

    @property
    def where(self) -> str:
        where = super().where
        if self.part is None:
            return where
        return f"{where}, part {self.part!r}" if where else f"part {self.part!r}"


class SampleException(SampleError, ValueError):
    """Energon's name for a sample's failure (a ``ValueError``); scope ``sample``.

    Example:
        >>> str(SampleException.from_sample_key("s1"))
        'Sample s1 failed'
    """

    @classmethod
    def from_sample_key(cls, sample_key: str) -> SampleException:
        return cls(f"Sample {sample_key} failed")

    @classmethod
    def from_sample(cls, sample: object, message: str = "") -> SampleException:
        key = (
            sample.get("__key__") if isinstance(sample, dict) else getattr(sample, "__key__", None)
        )
        return cls(f"Sample {key} failed" + (f": {message}" if message else ""))


class FatalSampleError(SampleException):
    """Raise in a hook to stop the run whatever the error policy (Energon's name): never
    skipped, never passed to an error handler."""

    scope: ClassVar[Scope] = "config"


class RemoteTraceback(Exception):
    """The formatted traceback of an error raised in a dataloader worker: the ``__cause__`` of
    that error when it is raised again in the training process (its text is the traceback)."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text

    def __str__(self) -> str:
        return self.text


#: Optional module (top-level import name) -> (the package's name, the extra that installs it).
OPTIONAL_MODULES: dict[str, tuple[str, str]] = {
    "torch": ("PyTorch", "torch"),
    "PIL": ("Pillow", "image"),
    "simplejpeg": ("simplejpeg", "image"),
    "av": ("PyAV", "av"),
    "boto3": ("boto3", "s3"),
    "pyarrow": ("pyarrow", "parquet"),
    "botocore": ("boto3", "s3"),
    "fsspec": ("fsspec", "http"),
    "aiohttp": ("aiohttp", "http"),
    "msgpack": ("msgpack", "codecs"),
    "cbor2": ("cbor2", "codecs"),
    "pytorch_lightning": ("PyTorch Lightning", "lightning"),
    "lightning_utilities": ("PyTorch Lightning", "lightning"),
    "nvidia": ("nvImageCodec (nvidia-nvimgcodec)", "gpu"),
    "PyNvVideoCodec": ("PyNvVideoCodec", "gpu"),
}


class MissingDependencyError(StokerError, ModuleNotFoundError):
    """An optional package that a feature needs is not installed; the message names the extra.

    It is a :class:`ModuleNotFoundError` too, so code that falls back on ``except ImportError``
    keeps working, and the loader never skips a sample for it (a broken install, not bad data).

    Example:
        >>> e = MissingDependencyError.for_module("PIL", "decoding images")
        >>> print(e.hint)
        Install it with: pip install 'stoker[image]'
    """

    def __init__(self, problem: str, *, module: str, extra: str, **fields: object) -> None:
        self.module = module
        self.extra = extra
        fields.setdefault("hint", f"Install it with: pip install 'stoker[{extra}]'")
        super().__init__(problem, **fields)  # type: ignore[arg-type]
        self.name = module

    @property
    def where(self) -> str:
        return ""  # a missing package is no file's or sample's fault: one line, the install hint

    @classmethod
    def for_module(cls, module: str, needed_for: str) -> MissingDependencyError:
        """The error for ``module`` (a key of :data:`OPTIONAL_MODULES`) missing."""
        package, extra = OPTIONAL_MODULES[module.split(".")[0]]
        problem = f"{needed_for} needs {package}, which is not installed."
        return cls(problem, module=module, extra=extra)

    @classmethod
    def from_import_error(
        cls, error: ImportError, needed_for: str
    ) -> MissingDependencyError | None:
        """The error for an optional module that ``error`` failed to find; None for others."""
        if isinstance(error, MissingDependencyError):
            return error
        top = (getattr(error, "name", None) or "").split(".")[0]
        if not isinstance(error, ModuleNotFoundError) or top not in OPTIONAL_MODULES:
            return None
        return cls.for_module(top, needed_for)


def require(module: str, needed_for: str) -> ModuleType:
    """Import an optional ``module``, or raise :class:`MissingDependencyError` naming its extra.

    Example:
        >>> require("numpy.linalg", "inverting").__name__  # a module that is there
        'numpy.linalg'
    """
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        missing = MissingDependencyError.from_import_error(e, needed_for)
        if missing is None:
            raise
        raise missing from None
