"""Build the sample a ``dataset.yaml`` describes from a sample's decoded parts.

A ``field_map`` says where each field comes from: ``caption: txt``, ``caption: json[caption]``,
``boxes: json[boxes][0]``, or alternatives ``image: jpg,png`` (the first that exists). A
``sample_loader`` names a function in ``.nv-meta/`` that builds the fields itself; that is code
from the data folder, so it runs only when the user opts in with ``trust_sample_loader=True``
(or ``STOKER_TRUST_SAMPLE_LOADER=1``). A sample loader may return ``__key__`` to rename the
sample, as in Energon. A dataset factory class (``config.factory``) loads its samples itself.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from typing import Any

from stoker.errors import ConfigError, SampleError
from stoker.format.dataset_config import DatasetConfig, FieldAccess
from stoker.format.meta import META_DIR
from stoker.model.samples import SAMPLE_CLASSES, CrudeSample, Sample, SourceInfo
from stoker.sources.allow import make_factory
from stoker.storage import Store, open_store
from stoker.storage.options import TRUST_SAMPLE_LOADER_ENV, env_trusts_sample_loader

SampleLoader = Callable[[dict[str, Any]], dict[str, Any]]
PartFilter = Callable[[str], bool]
#: Set to 1 to run the ``sample_loader.py`` of any dataset (as ``trust_sample_loader=True``).
TRUST_ENV = TRUST_SAMPLE_LOADER_ENV


def build_sample(
    config: DatasetConfig,
    decoded: dict[str, Any],
    *,
    key: str,
    restore_key: tuple[Any, ...],
    subflavors: dict[str, Any] | None = None,
    sources: tuple[SourceInfo, ...] | None = None,
    sample_loader: SampleLoader | None = None,
    sample_class: type[Sample] | None = None,
) -> Sample | CrudeSample:
    """The sample for one set of decoded parts.

    Args:
        config: The dataset's parsed ``dataset.yaml``.
        decoded: Part name -> decoded value.
        subflavors: Subflavors from the metadataset; they override the dataset.yaml ones.
        sample_loader: The loaded ``sample_loader`` function, for configs that name one
            (see :func:`load_sample_loader`).
        sample_class: The class for a sample type from a user module (not stoker's own).

    Example:
        >>> from stoker.format.dataset_config import parse_dataset_config
        >>> cfg = parse_dataset_config(
        ...     {"sample_type": {"__module__": "stoker", "__class__": "TextSample"},
        ...      "field_map": {"text": "json[t]"}}, "dataset.yaml")
        >>> build_sample(cfg, {"json": {"t": "hi"}}, key="k", restore_key=()).text
        'hi'
    """
    meta: dict[str, Any] = {
        "__key__": key,
        "__restore_key__": restore_key,
        "__subflavors__": {**config.subflavors, **(subflavors or {})},
        "__sources__": sources,
    }
    if config.factory is not None:
        if sample_loader is None:
            raise ConfigError("this dataset is loaded by a factory class, but none was made.")
        return sample_loader({**decoded, **meta})  # type: ignore[return-value]
    if config.is_crude:
        return CrudeSample({**decoded, **meta})
    cls = sample_class or config.sample_class or _sample_class(config)
    if config.field_map is not None:
        fields = {
            name: access_field(decoded, options, key=key, field=name)
            for name, options in config.field_map.items()
        }
    elif sample_loader is not None:
        fields = _run_loader(sample_loader, {**decoded, **meta}, key)
        if "__key__" in fields:  # a sample loader may rename the sample (Energon)
            meta["__key__"] = fields.pop("__key__")
    else:
        raise ConfigError(
            "this dataset uses a sample_loader, but none was loaded.",
            hint="Load it with load_sample_loader(...) (trust_sample_loader=True).",
        )
    try:
        return cls(**meta, **fields)
    except TypeError as e:
        raise SampleError(f"cannot build a {cls.__name__}: {e}", key=key) from e


def plain_fields(config: DatasetConfig) -> tuple[type[Sample], list[tuple[str, str]]] | None:
    """The sample class and ``(field, part)`` pairs of a field map whose every field is one
    part as it is (``text: txt``), for builders that make many samples in one loop; None for
    other datasets (crude, alternatives, item paths, sample loaders, factories).

    Example:
        >>> from stoker.format.dataset_config import parse_dataset_config
        >>> cfg = parse_dataset_config(
        ...     {"sample_type": {"__module__": "stoker", "__class__": "TextSample"},
        ...      "field_map": {"text": "txt"}}, "dataset.yaml")
        >>> plain_fields(cfg)[1]
        [('text', 'txt')]
    """
    if config.factory is not None or config.is_crude or config.field_map is None:
        return None
    pairs = []
    for name, options in config.field_map.items():
        if len(options) != 1 or options[0].path:
            return None
        pairs.append((name, options[0].part))
    return config.sample_class or _sample_class(config), pairs


def _sample_class(config: DatasetConfig) -> type[Sample]:
    name = config.sample_type or ""
    if name not in SAMPLE_CLASSES and config.sample_module:
        # A user's class, checked against the allow-list where the dataset was loaded.
        target: Any = importlib.import_module(config.sample_module)
        for attr in name.split("."):
            target = getattr(target, attr, None)
        if isinstance(target, type) and issubclass(target, Sample):
            return target
    if name not in SAMPLE_CLASSES:
        raise ConfigError(
            f"sample type {name!r} of module {config.sample_module!r} is not one of stoker's.",
            hint="Define it in an installed module as a subclass of stoker's Sample, or use one "
            f"of {', '.join(sorted(SAMPLE_CLASSES))}.",
        )
    return SAMPLE_CLASSES[name]


def access_field(
    decoded: dict[str, Any], options: Sequence[FieldAccess], *, key: str, field: str
) -> Any:
    """The value of the first alternative in ``options`` that exists in ``decoded``.

    Example:
        >>> access_field({"png": 1}, [FieldAccess("jpg"), FieldAccess("png")], key="k", field="f")
        1
    """
    problems = []
    for access in options:
        try:
            return _access(decoded, access)
        except (KeyError, IndexError, ValueError, TypeError) as e:
            problems.append(f"{_spec(access)} ({type(e).__name__}: {e})")
    raise SampleError(
        f"field {field!r} not found: tried {'; '.join(problems)}. "
        f"The sample has the parts {', '.join(sorted(decoded)) or '(none)'}.",
        key=key,
        part=",".join(_spec(a) for a in options),
        hint="Check the field_map in .nv-meta/dataset.yaml against the parts in the shards.",
    )


def _access(decoded: dict[str, Any], access: FieldAccess) -> Any:
    value = decoded[access.part]
    for step in access.path:
        if isinstance(value, dict):
            value = value[step]
        elif isinstance(value, (list, tuple)):
            value = value[int(step)]
        else:
            raise TypeError(f"cannot index a {type(value).__name__} with [{step}]")
    return value


def _spec(access: FieldAccess) -> str:
    return access.part + "".join(f"[{step}]" for step in access.path)


def _run_loader(loader: SampleLoader, raw: dict[str, Any], key: str) -> dict[str, Any]:
    fields = loader(raw)
    if not isinstance(fields, dict):
        raise SampleError(
            f"the sample_loader returned {type(fields).__name__}, not a dict of fields.", key=key
        )
    return {
        k: v
        for k, v in fields.items()
        if k == "__key__" or not (k.startswith("__") and k.endswith("__"))
    }


def load_sample_loader(dataset_path: str | Store, spec: str, allow_code: bool) -> SampleLoader:
    """The ``sample_loader`` function named by ``spec`` (``file.py:function``) in ``.nv-meta``.

    Runs the file only if ``allow_code`` is True: a data folder may come from anyone.

    Example:
        >>> import os
        >>> os.makedirs("coded/.nv-meta")
        >>> with open("coded/.nv-meta/sample_loader.py", "w") as f:
        ...     _ = f.write("def sample_loader(raw):\\n    return {'text': raw['txt']}\\n")
        >>> load_sample_loader("coded", "sample_loader.py:sample_loader", allow_code=False)
        ... # doctest: +ELLIPSIS
        Traceback (most recent call last):
        stoker.errors.ConfigError: ...
        >>> loader = load_sample_loader("coded", "sample_loader.py:sample_loader", allow_code=True)
        >>> loader({"txt": "hello"})
        {'text': 'hello'}
    """
    return _load_function(dataset_path, spec, "sample_loader", allow_code)  # type: ignore[no-any-return]


def load_part_filter(
    dataset_path: str | Store, spec: str | list[str] | None, allow_code: bool
) -> PartFilter | None:
    """The part filter of a config: None (all parts), a list of names, or ``file.py:function``."""
    if spec is None:
        return None
    if isinstance(spec, list):
        names = frozenset(spec)
        return names.__contains__
    return _load_function(dataset_path, spec, "part_filter", allow_code)  # type: ignore[no-any-return]


def _load_function(store: str | Store, spec: str, default: str, allow_code: bool) -> Any:
    store = open_store(store) if isinstance(store, str) else store
    file, _, name = spec.rpartition(":") if ":" in spec else (spec, "", default)
    path = f"{META_DIR}/{file}"
    if not (allow_code or env_trusts_sample_loader()):
        raise ConfigError(
            f"dataset.yaml asks to run the Python file {store.url(path)} ({spec!r}).",
            hint="Code in a data folder may come from anyone, so stoker does not run it by "
            "default. If you trust this dataset, pass trust_sample_loader=True (or set "
            f"{TRUST_ENV}=1 for code you cannot change).",
        )
    namespace: dict[str, Any] = {"__name__": f"stoker_sample_loader_{file}"}
    exec(compile(store.read_text(path), store.url(path), "exec"), namespace)
    fn = namespace.get(name)
    if not callable(fn):
        raise ConfigError(f"{store.url(path)} defines no function {name!r}.", path=store.url(path))
    return fn


def factory_sample_loader(source: Any, decoder: Any) -> Callable[[dict[str, Any]], Any]:
    """A worker's sample loader for a source loaded by a dataset factory class.

    The factory is made once per worker (see :func:`stoker.sources.allow.make_factory`); it
    receives the sample's raw parts and metadata, filters and decodes them itself.
    """
    factory = make_factory(source, decoder)
    part_filter = getattr(factory, "part_filter", None)

    def load(raw: dict[str, Any]) -> Any:
        if part_filter is not None:
            raw = {k: v for k, v in raw.items() if k.startswith("__") or part_filter(k)}
        return factory.load_sample(raw)

    return load
