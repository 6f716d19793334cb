"""The allow-list for classes a ``dataset.yaml`` names (DESIGN §6).

A data folder may come from anyone, so the classes it names are checked before anything is
called: stoker's own (``__module__: stoker`` or ``megatron.energon``); from an *installed* module
(never a file in the data folder), subclasses of ``Sample`` or of ``BaseCoreDatasetFactory``;
anything else only from a module the user allowed explicitly (``allowed_modules=`` or
``STOKER_ALLOWED_MODULES``, comma-separated).

Example:
    >>> resolve_class("stoker", "CaptioningSample", where="ds/.nv-meta/dataset.yaml")
    <class 'stoker.model.samples.CaptioningSample'>
    >>> resolve_class("os", "system", where="ds/.nv-meta/dataset.yaml")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    stoker.errors.ConfigError: ...names os.system, which is neither a Sample nor a dataset...
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import os
from typing import TYPE_CHECKING, Any

from stoker.errors import ConfigError
from stoker.format.dataset_config import ALLOW_HINT, DatasetConfig, FactoryRef, module_allowed
from stoker.format.sample_types import BUILTIN_MODULES
from stoker.model.samples import SAMPLE_CLASSES, CrudeSample, Sample
from stoker.model.worker_config import WorkerConfig
from stoker.storage.epath import EPath
from stoker.storage.options import TRUST_METADATASET_ENV, env_trusts_metadataset

if TYPE_CHECKING:
    from stoker.sources.source import DataSource


def public_name(name: str) -> Any:
    """stoker's public ``name`` (``stoker.<name>``), or None: found by name in the export table
    of ``stoker/__init__.py``. The dataset factories live in a layer above this one, so they
    are looked up there by name, never imported from here."""
    return getattr(importlib.import_module("stoker"), name, None)


def _bases() -> tuple[type, ...]:
    """The classes whose subclasses a data folder may name from an installed module."""
    return (Sample, public_name("BaseCoreDatasetFactory"))


def resolve_class(
    module: str,
    qualname: str,
    *,
    where: str,
    data_root: str | None = None,
    allowed: tuple[str, ...] = (),
    what: str = "dataset.yaml",
    hint: str = ALLOW_HINT,
) -> Any:
    """The class ``module.qualname`` if the allow-list lets a dataset.yaml (or ``what``, e.g.
    a metadataset's joiner) name it; ``hint`` says how to allow more."""
    if module in BUILTIN_MODULES:
        found = public_name(qualname)
        if isinstance(found, type) and issubclass(found, (*_bases(), CrudeSample)):
            return found
        raise ConfigError(f"stoker has no sample type or dataset class {qualname!r}.", path=where)
    _refuse_data_folder(module, data_root, where)
    try:
        target: Any = importlib.import_module(module)
    except ImportError as e:
        raise ConfigError(
            f"cannot import module {module!r} named by {what} ({e}).",
            path=where,
            hint=hint.format(module=module),
        ) from None
    for attr in qualname.split("."):
        target = getattr(target, attr, None)
    if target is None:
        raise ConfigError(f"module {module!r} has no {qualname!r}.", path=where)
    if isinstance(target, type) and issubclass(target, _bases()):
        return target
    if module_allowed(module, allowed):
        return target
    raise ConfigError(
        f"{what} names {module}.{qualname}, which is neither a Sample nor a dataset "
        "factory subclass; stoker does not call it.",
        path=where,
        hint=hint.format(module=module),
    )


#: Set to 1 to trust every callable your own metadataset YAMLs name (joiners).
JOINER_HINT = (
    "A metadataset may name as joiner stoker's sample classes and, from installed modules, "
    "subclasses of Sample (with from_joined). To call a function or any other object, allow "
    "its module explicitly: pass allowed_modules=({module!r},) to get_train_dataset / "
    "get_val_dataset, set STOKER_ALLOWED_MODULES={module}, or trust every joiner of your own "
    f"metadatasets with {TRUST_METADATASET_ENV}=1."
)


def check_joiner(
    module: str, name: str, *, where: str, data_roots: tuple[str, ...], allowed: tuple[str, ...]
) -> None:
    """Refuse a metadataset joiner that the allow-list does not let a YAML name (DESIGN §6).

    The same rules as for a dataset.yaml's classes; :data:`TRUST_METADATASET_ENV` set to 1 is
    the explicit switch that trusts the user's own metadataset (the check is then skipped).
    """
    if env_trusts_metadataset():
        return
    for root in data_roots[1:]:
        _refuse_data_folder(module, root, where)
    resolve_class(
        module,
        name,
        where=where,
        data_root=data_roots[0] if data_roots else None,
        allowed=allowed,
        what="the metadataset's joiner",
        hint=JOINER_HINT,
    )


def _refuse_data_folder(module: str, data_root: str | None, where: str) -> None:
    if data_root is None or "://" in data_root:
        return
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return  # import_module reports it
    origin = spec.origin if spec is not None else None
    root = os.path.realpath(data_root) + os.sep
    if origin and os.path.realpath(origin).startswith(root):
        raise ConfigError(
            f"module {module!r} would be imported from the data folder ({origin}).",
            path=where,
            hint="Code in a data folder does not run; install the module that defines the "
            "class, and do not run from inside the dataset folder.",
        )


def resolve_source(
    source: DataSource,
    *,
    allowed_modules: tuple[str, ...] = (),
    sample_type: type | None = None,
    split_config: str | None = None,
    config_name: str = "dataset.yaml",
) -> DataSource:
    """``source`` with the classes its dataset.yaml names resolved and checked.

    A factory class is also made once here, in the main process, so that a bad configuration
    fails now (as in Energon) rather than in a dataloader worker.
    """
    config = source.config
    where = f"{source.path}/.nv-meta/{config_name}"
    if config.factory is not None and config.factory.cls is None:
        module, _, name = config.factory.name.partition(":")
        cls = resolve_class(
            module, name, where=where, data_root=source.root, allowed=allowed_modules
        )
        kwargs = {
            key: _class_ref(value, where, source.root, allowed_modules)
            for key, value in config.factory.kwargs.items()
        }
        if split_config is not None:
            kwargs["split_config"] = split_config
        ref = dataclasses.replace(config.factory, cls=cls, kwargs=kwargs)
        config = dataclasses.replace(config, factory=ref)
        make_factory(dataclasses.replace(source, config=config), None)  # fails early if bad
    elif _names_user_sample(config):
        cls = resolve_class(
            str(config.sample_module),
            str(config.sample_type),
            where=where,
            data_root=source.root,
            allowed=allowed_modules,
        )
        config = dataclasses.replace(config, sample_class=cls)
    source = dataclasses.replace(source, config=config)
    if sample_type is not None:
        check_sample_type(source, sample_type)
    return source


def _class_ref(value: Any, where: str, root: str, allowed: tuple[str, ...]) -> Any:
    """A ``{__module__: m, __class__: C}`` argument as the class (allow-list checked)."""
    if isinstance(value, dict) and set(value) == {"__module__", "__class__"}:
        module, name = str(value["__module__"]), str(value["__class__"])
        return resolve_class(module, name, where=where, data_root=root, allowed=allowed)
    return value


def _names_user_sample(config: DatasetConfig) -> bool:
    module = config.sample_module
    return bool(config.sample_type and config.sample_class is None and module) and (
        module not in BUILTIN_MODULES
    )


def source_sample_class(source: DataSource) -> Any:
    """The class of the samples ``source`` yields (before any cooking)."""
    config = source.config
    if config.factory is not None:
        return make_factory(source, None).__sample_type__
    if config.is_crude:
        return CrudeSample
    if config.sample_class is not None:
        return config.sample_class
    return SAMPLE_CLASSES.get(config.sample_type or "")


def check_sample_type(source: DataSource, sample_type: type) -> None:
    """Energon's check: the dataset's sample class must be ``sample_type`` or a subclass."""
    actual = source_sample_class(source)
    if not (isinstance(actual, type) and issubclass(actual, sample_type)):
        raise ConfigError(
            f"the samples of {source.path} are {getattr(actual, '__name__', actual)}, which is "
            f"not a subclass of sample_type={sample_type.__name__}.",
            path=source.path,
            hint="Pass the sample type the dataset.yaml names (or a base class of it).",
        )


def make_factory(source: DataSource, decoder: Any) -> Any:
    """An instance of the source's factory class (in a worker: one per worker).

    For a factory named by a dataset.yaml, the class gets the yaml's keys plus the dataset's
    path, split and subflavors, and the task encoder's ``decoder`` (which it may replace, as
    Bridge's ``ChatMLWebdataset`` does); a factory made in Python gets its own arguments again.
    """
    ref: FactoryRef | None = source.config.factory
    if ref is None or ref.cls is None:
        raise ConfigError("this source has no resolved dataset factory class.", path=source.path)
    if not ref.from_yaml:
        return ref.cls(*ref.args, **ref.kwargs)
    kwargs: dict[str, Any] = {
        **ref.kwargs,
        "split_part": source.split_part,
        "training": False,
        "worker_config": WorkerConfig(rank=0, world_size=1, num_workers=0),
        "subflavors": dict(source.subflavors),
    }
    if source.trust_sample_loader:
        kwargs["trust_sample_loader"] = True
    takes_decoder = public_name("DefaultDecoderWebdatasetFactory")
    if isinstance(ref.cls, type) and issubclass(ref.cls, takes_decoder):
        kwargs["decoder"] = decoder
    return ref.cls(EPath(source.path), **kwargs)
