"""One exception tree for everything stoker raises on purpose.

Every error says what is wrong, where (file, sample key, byte offset) and what to do about it, so
that the CLI can print it as one paragraph instead of a traceback.
"""

from __future__ import annotations


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


class StorageError(StokerError):
    """A file or object could not be found, read or written."""


class FormatError(StokerError):
    """A data or metadata file does not have the expected format."""


class ConfigError(StokerError, ValueError):
    """A configuration (dataset.yaml, split.yaml, CLI flags, arguments) is invalid."""


class AlreadyPreparedError(StokerError):
    """The dataset already has metadata and overwriting was not allowed."""


def _rebuild(cls: type[StokerError], problem: str, fields: dict[str, object]) -> StokerError:
    return cls(problem, **fields)  # type: ignore[arg-type]


class SampleError(StokerError):
    """One sample could not be read, decoded, mapped or encoded.

    Args:
        problem: What went wrong.
        part: The part (e.g. ``jpg``) or field concerned, if any.

    Example:
        >>> str(SampleError("cannot decode.", key="s1", part="jpg"))
        "sample 's1', part 'jpg': cannot decode."
    """

    def __init__(
        self,
        problem: str,
        *,
        path: str | None = None,
        key: str | None = None,
        offset: int | None = None,
        part: str | None = None,
        hint: str | None = None,
    ) -> None:
        self.part = part
        super().__init__(problem, path=path, key=key, offset=offset, hint=hint)

    @property
    def where(self) -> str:
        where = super().where
        if self.part is None:
            return where
        return f"{where}, part {self.part!r}" if where else f"part {self.part!r}"
