"""``.nv-meta/dataset.yaml``: which sample type a dataset yields and how parts map to fields.

Forms accepted (as Energon writes them)::

    sample_type: {__module__: megatron.energon, __class__: CaptioningSample}
    field_map: {image: jpg, caption: txt}         # or sample_loader + part_filter
    subflavors: {source: web}

    __module__: megatron.energon                  # crude data, cooked by the task encoder
    __class__: CrudeWebdataset

    __module__: megatron.bridge.data.energon.task_encoder_utils   # a dataset factory class
    __class__: ChatMLWebdataset                   # from an installed module; the other
    field_map: {imgs: jpgs, conversation: json}   # keys are its keyword arguments

``split_config: split2.yaml`` names the split file to use (it wins over the caller's, as in
Energon). Classes from modules other than stoker's are resolved and checked against the
allow-list when the dataset is loaded (:mod:`stoker.sources.allow`).

A ``field_map`` value is one or more alternatives separated by commas, each a part name with
optional item access: ``json[caption]``, ``json[boxes][0]``, ``jpg,png``.
"""

from __future__ import annotations

import importlib.util
import json
import re
from dataclasses import dataclass, field
from typing import Any

from stoker.errors import ConfigError, did_you_mean
from stoker.format.meta import DEFAULT_DATASET_YAML, META_DIR, load_yaml_or_json
from stoker.format.sample_types import (
    BUILTIN_MODULES,
    CRUDE_CLASS,
    LEGACY_DATASET_CLASSES,
    SAMPLE_TYPES,
)
from stoker.storage import Store
from stoker.storage.options import env_allowed_modules

_ACCESS_RE = re.compile(r"^(?P<part>[^\[\]]+)(?P<access>(?:\[[^\[\]]+\])*)$")
_ALLOWED_KEYS = {
    "sample_type",
    "field_map",
    "subflavors",
    "sample_loader",
    "part_filter",
    "split_config",
    "__module__",
    "__class__",
}


@dataclass(frozen=True)
class FactoryRef:
    """A dataset factory class named by a ``dataset.yaml`` (or built in Python) and its arguments.

    ``cls`` is the class once resolved (checked against the allow-list in the main process);
    each dataloader worker makes its own instance from ``args`` and ``kwargs``.
    """

    #: ``module:qualname`` of the class, as named.
    name: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    args: tuple[Any, ...] = ()
    cls: Any = None
    #: ``kwargs`` came from a ``dataset.yaml``: the loader adds path, split and decoder.
    from_yaml: bool = True


@dataclass(frozen=True)
class FieldAccess:
    """One alternative of a field map value: a part and a path of item accesses."""

    part: str
    path: tuple[str, ...] = ()


def parse_field_spec(spec: str) -> list[FieldAccess]:
    """Parse a field map value.

    Example:
        >>> parse_field_spec("json[a][0],txt")
        [FieldAccess(part='json', path=('a', '0')), FieldAccess(part='txt', path=())]
    """
    options = []
    for option in spec.split(","):
        option = option.strip()
        match = _ACCESS_RE.match(option)
        if not option or match is None:
            raise ConfigError(
                f"invalid field map value {spec!r}.",
                hint="Use a part name, optionally with item access and alternatives, "
                "e.g. 'jpg,png' or 'json[caption]'.",
            )
        access = match.group("access")
        path = tuple(access[1:-1].split("][")) if access else ()
        options.append(FieldAccess(match.group("part"), path))
    return options


@dataclass(frozen=True)
class DatasetConfig:
    """A parsed ``dataset.yaml``."""

    #: Name of the sample type class (e.g. ``CaptioningSample``); None for crude datasets.
    sample_type: str | None
    #: Module of the sample type as written (``megatron.energon``, ``stoker`` or the user's).
    sample_module: str | None
    field_map: dict[str, list[FieldAccess]] | None = None
    #: ``file.py:function`` of a user sample loader next to the data.
    sample_loader: str | None = None
    part_filter: str | list[str] | None = None
    subflavors: dict[str, Any] = field(default_factory=dict)
    #: ``split_config:`` of the dataset.yaml (overrides the caller's split config).
    split_config: str | None = None
    #: A dataset factory class that loads the samples itself (``__class__:`` of a user module).
    factory: FactoryRef | None = None
    #: The sample class itself, once resolved (a user's class, checked by the allow-list).
    sample_class: Any = None

    @property
    def is_crude(self) -> bool:
        return self.sample_type is None and self.factory is None

    def missing_fields(self, parts: set[str]) -> dict[str, list[str]]:
        """Fields none of whose alternatives is among ``parts``: field -> its alternatives."""
        return {
            name: [access.part for access in options]
            for name, options in (self.field_map or {}).items()
            if not any(access.part in parts for access in options)
        }

    def parts_used(self) -> set[str]:
        """The part names the field map reads."""
        if not self.field_map:
            return set()
        return {access.part for options in self.field_map.values() for access in options}


def read_dataset_config(
    store: Store,
    name: str = DEFAULT_DATASET_YAML,
    *,
    allowed_modules: tuple[str, ...] = (),
) -> DatasetConfig:
    """Read and check ``.nv-meta/<name>``.

    Args:
        allowed_modules: Modules besides stoker's own whose sample types the file may name.
    """
    path = f"{META_DIR}/{name}"
    raw = load_yaml_or_json(store, path)
    return parse_dataset_config(raw, store.url(path), allowed_modules=allowed_modules)


def parse_dataset_config(
    raw: Any, where: str, *, allowed_modules: tuple[str, ...] = ()
) -> DatasetConfig:
    """Check a parsed ``dataset.yaml`` mapping; ``where`` names it in errors."""
    if not isinstance(raw, dict):
        raise ConfigError("dataset.yaml must be a mapping.", path=where)
    if "__class__" in raw:
        cls, module = str(raw["__class__"]), str(raw.get("__module__", ""))
        check_module(module, cls, where, allowed_modules)
        if module not in BUILTIN_MODULES:
            return _factory_config(raw, module, cls, where)
    unknown = sorted(set(map(str, raw)) - _ALLOWED_KEYS)
    if unknown:
        raise ConfigError(
            f"unknown key {unknown[0]!r} in dataset.yaml.",
            path=where,
            hint=did_you_mean(unknown[0], _ALLOWED_KEYS)
            + f"Allowed keys: {', '.join(sorted(_ALLOWED_KEYS))}.",
        )
    subflavors = raw.get("subflavors") or {}
    if not isinstance(subflavors, dict):
        raise ConfigError("'subflavors' must be a mapping.", path=where)
    part_filter = raw.get("part_filter")
    if part_filter is not None and not isinstance(part_filter, str | list):
        raise ConfigError("'part_filter' must be a string or a list of part names.", path=where)
    split_config = raw.get("split_config")
    if split_config is not None and not isinstance(split_config, str):
        raise ConfigError("'split_config' must be a file name in .nv-meta.", path=where)
    common: dict[str, Any] = {"subflavors": subflavors, "split_config": split_config}

    if "__class__" in raw and "sample_type" not in raw:
        cls, module = str(raw["__class__"]), str(raw.get("__module__", ""))
        if cls == CRUDE_CLASS:
            if "field_map" in raw or "sample_loader" in raw:
                raise ConfigError(
                    "a CrudeWebdataset has no field_map or sample_loader.",
                    path=where,
                    hint="Remove them; crude samples are cooked by the task encoder's cookers.",
                )
            return DatasetConfig(None, module, part_filter=part_filter, **common)
        if cls not in LEGACY_DATASET_CLASSES:
            raise _unknown_type(cls, where)
        sample_type, sample_module = LEGACY_DATASET_CLASSES[cls], module
    elif "sample_type" in raw:
        spec = raw["sample_type"]
        if not isinstance(spec, dict) or "__class__" not in spec:
            raise ConfigError(
                "'sample_type' must be a mapping with __module__ and __class__.", path=where
            )
        sample_type, sample_module = str(spec["__class__"]), str(spec.get("__module__", ""))
        check_module(sample_module, sample_type, where, allowed_modules)
        if sample_module in BUILTIN_MODULES and sample_type not in SAMPLE_TYPES:
            raise _unknown_type(sample_type, where)
    else:
        raise ConfigError(
            "dataset.yaml names no sample type.",
            path=where,
            hint="Add 'sample_type: {__module__: stoker, __class__: CaptioningSample}' (or "
            "another type), or '__class__: CrudeWebdataset' for crude data.",
        )

    field_map_raw = raw.get("field_map")
    sample_loader = raw.get("sample_loader")
    if (field_map_raw is None) == (sample_loader is None):
        raise ConfigError(
            "dataset.yaml needs exactly one of 'field_map' and 'sample_loader'.", path=where
        )
    if sample_loader is not None:
        if not isinstance(sample_loader, str) or ":" not in sample_loader:
            raise ConfigError("'sample_loader' must be 'file.py:function'.", path=where)
        if part_filter is None:
            raise ConfigError(
                "a sample_loader needs a part_filter.",
                path=where,
                hint="Add 'part_filter: sample_loader.py:part_filter' or a list of part names.",
            )
        return DatasetConfig(
            sample_type,
            sample_module,
            sample_loader=sample_loader,
            part_filter=part_filter,
            **common,
        )
    field_map = parse_field_map(field_map_raw, where)
    if sample_module in BUILTIN_MODULES:
        _check_fields(sample_type, field_map, where)
    return DatasetConfig(
        sample_type, sample_module, field_map=field_map, part_filter=part_filter, **common
    )


def parse_field_map(field_map_raw: Any, where: str) -> dict[str, list[FieldAccess]]:
    """Check and parse a ``field_map`` mapping (field name -> part spec)."""
    if not isinstance(field_map_raw, dict) or not field_map_raw:
        raise ConfigError("'field_map' must be a non-empty mapping of field: part.", path=where)
    field_map = {}
    for name, spec in field_map_raw.items():
        if not isinstance(spec, str):
            raise ConfigError(f"field_map value of {name!r} must be a string.", path=where)
        try:
            field_map[str(name)] = parse_field_spec(spec)
        except ConfigError as e:
            raise ConfigError(e.problem, path=where, key=None, hint=e.hint) from None
    return field_map


def _factory_config(raw: dict[str, Any], module: str, cls: str, where: str) -> DatasetConfig:
    """A dataset factory class from an installed module: its other keys are its arguments."""
    kwargs = {str(k): v for k, v in raw.items() if k not in ("__module__", "__class__")}
    subflavors = kwargs.get("subflavors") or {}
    if not isinstance(subflavors, dict):
        raise ConfigError("'subflavors' must be a mapping.", path=where)
    split_config = kwargs.pop("split_config", None)
    if split_config is not None and not isinstance(split_config, str):
        raise ConfigError("'split_config' must be a file name in .nv-meta.", path=where)
    return DatasetConfig(
        None,
        None,
        subflavors=dict(subflavors),
        split_config=split_config,
        factory=FactoryRef(f"{module}:{cls}", kwargs),
    )


def module_allowed(module: str, allowed: tuple[str, ...] = ()) -> bool:
    """Whether ``module`` is stoker's own or explicitly allowed (``allowed_modules=`` or the
    comma-separated ``STOKER_ALLOWED_MODULES``); a package allows its submodules."""
    if module in BUILTIN_MODULES:
        return True
    names = [*allowed, *env_allowed_modules()]
    return any(
        n.strip() and (module == n.strip() or module.startswith(f"{n.strip()}.")) for n in names
    )


def check_module(module: str, cls: str, where: str, allowed: tuple[str, ...] = ()) -> None:
    """Refuse a class whose module is neither stoker's, allowed, nor installed.

    Classes of installed modules are checked further when the dataset is loaded: only
    subclasses of ``Sample`` or of a dataset factory base pass without an explicit allow.
    """
    if module_allowed(module, allowed) or _installed(module):
        return
    raise ConfigError(
        f"dataset.yaml names class {cls!r} in module {module!r}, which is not installed "
        "and not allowed.",
        path=where,
        hint=ALLOW_HINT.format(module=module),
    )


#: How to allow a module (used by every allow-list error).
ALLOW_HINT = (
    "A dataset folder may name stoker's own classes and, from installed modules, subclasses of "
    "Sample or of a dataset factory (e.g. DefaultDecoderWebdatasetFactory). Install the module "
    "that defines the class, or trust it explicitly: pass allowed_modules=({module!r},) to "
    "get_train_dataset / get_val_dataset / get_dataset_from_config, or set "
    "STOKER_ALLOWED_MODULES={module} (CLI: --allow-module {module})."
)


def _installed(module: str) -> bool:
    """Whether the top-level package of ``module`` is installed (nothing is imported here)."""
    try:
        return module != "" and importlib.util.find_spec(module.partition(".")[0]) is not None
    except (ImportError, ValueError):
        return False


def _unknown_type(name: str, where: str) -> ConfigError:
    return ConfigError(
        f"unknown sample type {name!r}.",
        path=where,
        hint=did_you_mean(name, [*SAMPLE_TYPES, CRUDE_CLASS])
        + f"Known sample types: {', '.join(sorted(SAMPLE_TYPES))}, {CRUDE_CLASS}.",
    )


def _check_fields(sample_type: str, field_map: dict[str, list[FieldAccess]], where: str) -> None:
    fields = {f.name: f for f in SAMPLE_TYPES[sample_type]}
    for name in field_map:
        if name not in fields:
            raise ConfigError(
                f"field_map names field {name!r}, which {sample_type} does not have.",
                path=where,
                hint=did_you_mean(name, fields) + f"{sample_type} fields: {', '.join(fields)}.",
            )
    missing = [f.name for f in fields.values() if f.required and f.name not in field_map]
    if missing:
        raise ConfigError(
            f"field_map lacks the required field(s) {', '.join(missing)} of {sample_type}.",
            path=where,
            hint="Map each required field to a part name, e.g. 'image: jpg'.",
        )


def make_dataset_yaml(
    sample_type: str, field_map: dict[str, str] | str | None = None
) -> dict[str, Any]:
    """The ``dataset.yaml`` content for a sample type and field map (as ``prepare`` writes it).

    ``field_map`` may be a dict or its JSON text; ``CrudeWebdataset`` takes none.

    Example:
        >>> make_dataset_yaml("CaptioningSample", '{"image": "jpg", "caption": "txt"}')
        {'sample_type': {'__module__': 'megatron.energon', '__class__': 'CaptioningSample'}, \
'field_map': {'image': 'jpg', 'caption': 'txt'}}
    """
    # Written with Energon's module name so that Energon can load the dataset too.
    module = BUILTIN_MODULES[1]
    if sample_type == CRUDE_CLASS:
        if field_map:
            raise ConfigError(
                "a CrudeWebdataset takes no field map.",
                hint="Drop --field-map; crude samples are cooked by the task encoder.",
            )
        return {"__module__": module, "__class__": CRUDE_CLASS}
    if sample_type not in SAMPLE_TYPES:
        raise _unknown_type(sample_type, "--sample-type")
    if isinstance(field_map, str):
        try:
            field_map = json.loads(field_map)
        except json.JSONDecodeError as e:
            raise ConfigError(
                f"--field-map is not valid JSON ({e}).",
                hint='Example: --field-map \'{"image": "jpg", "caption": "txt"}\'.',
            ) from None
    if not isinstance(field_map, dict) or not field_map:
        raise ConfigError(
            f"a field map is needed for {sample_type}.",
            hint='Example: --field-map \'{"image": "jpg", "caption": "txt"}\'.',
        )
    raw: dict[str, Any] = {
        "sample_type": {"__module__": module, "__class__": sample_type},
        "field_map": field_map,
    }
    parse_dataset_config(raw, "--field-map")
    return raw
