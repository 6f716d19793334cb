"""The smaller values of a metadataset node: ``joiner`` (an importable object) and ``aux``."""

from __future__ import annotations

from stoker.metadataset import where as check
from stoker.metadataset.nodes import AuxRef, ObjectRef
from stoker.metadataset.paths import resolve_path, url_scheme
from stoker.metadataset.where import Where


def parse_object(value: object, where: Where) -> ObjectRef | None:
    if value is None:
        return None
    raw = check.mapping(value, where, "joiner")
    kind = "__function__" if "__function__" in raw else "__class__"
    check.check_keys(raw, ("__module__", kind), where, "joiner")
    if "__module__" not in raw or kind not in raw:
        where.fail("expected __module__ and __class__ (or __function__).")
    module = check.string(raw["__module__"], where.key("__module__"))
    return ObjectRef(module, check.string(raw[kind], where.key(kind)), kind == "__function__")


def parse_aux(value: object, where: Where, base: str) -> dict[str, AuxRef]:
    if value is None:
        return {}
    aux = {}
    for name, entry in check.mapping(value, where, "aux").items():
        aux[name] = _aux_ref(entry, where.key(name), base)
    return aux


def _aux_ref(entry: object, where: Where, base: str) -> AuxRef:
    """Energon's forms: ``path``, ``s3://...`` (datasets), ``filesystem://p``,
    ``filesystem+s3://...``, ``{path: p}`` or ``{fs_path: p}``."""
    if isinstance(entry, dict):
        check.check_keys(entry, ("path", "fs_path"), where, "an aux reference")
        if len(entry) != 1:
            where.fail("expected exactly one of 'path' or 'fs_path'.")
        key, text = next(iter(entry.items()))
        return AuxRef(resolve_path(base, check.string(text, where.key(key))), key == "fs_path")
    text = check.string(entry, where)
    scheme = url_scheme(text) or ""
    if scheme.startswith("filesystem+"):
        return AuxRef(f"{scheme.removeprefix('filesystem+')}://{text.split('://', 1)[1]}", True)
    if scheme == "filesystem":
        return AuxRef(resolve_path(base, text.split("://", 1)[1]), True)
    if "+" in scheme:
        where.fail(f"unknown aux scheme {scheme!r}; use filesystem+<scheme>://.")
    return AuxRef(resolve_path(base, text), False)
