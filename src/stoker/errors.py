"""One exception tree for everything stoker raises on purpose.

Every error says what is wrong, where (file, sample key, byte offset) and what to do about it, so
that the CLI can print it as one paragraph instead of a traceback.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Iterable
from types import ModuleType


class StokerError(Exception):
    """Base class of all errors stoker raises on purpose.

    Args:
        problem: What is wrong, in one sentence.
        path: The file or folder concerned, if any.
        key: The sample key concerned, if any.
        offset: The byte offset inside ``path``, if any.
        hint: What the user can do about it.
    """

    def __init__(
        self,
        problem: str,
        *,
        path: str | None = None,
        key: str | None = None,
        offset: int | None = None,
        hint: str | None = None,
    ) -> None:
        self.problem = problem
        self.path = path
        self.key = key
        self.offset = offset
        self.hint = hint
        super().__init__(self.message)

    def __reduce__(self) -> tuple[object, ...]:
        # Keep every field (of subclasses too) when an error crosses a process boundary.
        fields = {k: v for k, v in vars(self).items() if k != "problem" and not k.startswith("_")}
        return (_rebuild, (type(self), self.problem, fields))

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
    """A file or object could not be found, read or written."""


class FormatError(StokerError):
    """A data or metadata file does not have the expected format."""


class ConfigError(StokerError, ValueError):
    """A configuration (dataset.yaml, split.yaml, CLI flags, arguments) is invalid."""


class AlreadyPreparedError(StokerError):
    """The dataset already has metadata and overwriting was not allowed."""


#: Optional module (top-level import name) -> (the package's name, the extra that installs it).
OPTIONAL_MODULES: dict[str, tuple[str, str]] = {
    "torch": ("PyTorch", "torch"),
    "PIL": ("Pillow", "image"),
    "simplejpeg": ("simplejpeg", "image"),
    "av": ("PyAV", "av"),
    "boto3": ("boto3", "s3"),
    "botocore": ("boto3", "s3"),
    "fsspec": ("fsspec", "http"),
    "aiohttp": ("aiohttp", "http"),
    "msgpack": ("msgpack", "codecs"),
    "cbor2": ("cbor2", "codecs"),
    "pytorch_lightning": ("PyTorch Lightning", "lightning"),
    "lightning_utilities": ("PyTorch Lightning", "lightning"),
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


def _rebuild(cls: type[StokerError], problem: str, fields: dict[str, object]) -> StokerError:
    return cls(problem, **fields)  # type: ignore[arg-type]
