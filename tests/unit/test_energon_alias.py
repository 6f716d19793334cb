"""stoker.energon_alias: Energon's module paths served by stoker, its table, and docs/energon.md."""

from __future__ import annotations

import ast
import importlib.util
import multiprocessing.spawn
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

import stoker
import stoker.energon_alias as alias
from stoker.energon_alias import status
from stoker.energon_alias.modules import AliasModule
from stoker.energon_alias.table import ENERGON_ALL, MODULES, ROOT

DOCS = Path(__file__).resolve().parents[2] / "docs" / "energon.md"

# (module, name) pairs that Megatron-LM's multimodal example, Megatron-Bridge's energon modules and
# Energon's own tests import from a submodule.
CLIENT_IMPORTS = [
    ("task_encoder.base", "stateless"),
    ("task_encoder.base", "DefaultTaskEncoder"),
    ("task_encoder.base", "WorkerConfig"),
    ("task_encoder.cooking", "Cooker"),
    ("task_encoder.cooking", "basic_sample_keys"),
    ("task_encoder.cooking", "cooker"),
    ("flavors", "BaseWebdatasetFactory"),
    ("flavors", "CrudeJsonlDatasetFactory"),
    ("flavors.base_dataset", "Sample"),
    ("flavors.webdataset", "DefaultDecoderWebdatasetFactory"),
    ("flavors.webdataset.base_webdataset", "BaseWebdatasetFactory"),
    ("flavors.webdataset.config", "MAIN_FOLDER_NAME"),
    ("flavors.webdataset.config", "INFO_JSON_FILENAME"),
    ("flavors.webdataset.config", "INDEX_SQLITE_FILENAME"),
    ("flavors.webdataset.sample_decoder", "SampleDecoder"),
    ("epathlib", "EPath"),
    ("epathlib", "DEFAULT_PROFILE_NAME"),
    ("epathlib.epath", "EPath"),
    ("edataclass", "edataclass"),
    ("errors", "reraise_exception"),
    ("source_info", "SourceInfo"),
    ("dataset_config", "get_dataset_from_config"),
    ("loader", "get_savable_loader"),
    ("metadataset.loader", "prepare_metadataset"),
    ("metadataset.loader", "traverse_metadataset"),
    ("metadataset.loader_interface", "DatasetBlendMode"),
    ("wrappers.blend_dataset", "BlendDataset"),
    ("cache", "FileStoreCachePool"),
    ("cache.base", "CachePool"),
    ("av", "AVDecoder"),
    ("media.metadata", "AVMetadata"),
    ("tools.prepare", "command"),
    ("tools.lint", "command"),
    ("tools.info", "command"),
    ("tools.preview", "command"),
    ("tools.checkpoint", "command_redist"),
    ("cli.main", "prepare_media_command"),
]


def _energon_modules() -> dict[str, ModuleType]:
    return {n: m for n, m in sys.modules.items() if n == ROOT or n.startswith(ROOT + ".")}


@pytest.fixture
def installed() -> Iterator[None]:
    """The alias installed; the real Energon (imported by other tests) set aside meanwhile."""
    real = {n: m for n, m in _energon_modules().items() if not isinstance(m, AliasModule)}
    megatron = sys.modules.get("megatron")
    real_attr = getattr(megatron, "energon", None)
    for name in real:
        del sys.modules[name]
    if real_attr is not None:
        delattr(megatron, "energon")
    alias.install()
    try:
        yield
    finally:
        alias.uninstall()
        sys.modules.update(real)
        if real_attr is not None:
            megatron.energon = real_attr  # type: ignore[union-attr]


def test_submodule_paths_resolve_to_stoker_objects(installed: None) -> None:
    from megatron.energon import DefaultTaskEncoder, Sample, WorkerConfig
    from megatron.energon.flavors.base_dataset import Sample as BaseSample
    from megatron.energon.flavors.webdataset.config import (
        INDEX_SQLITE_FILENAME,
        INFO_JSON_FILENAME,
        MAIN_FOLDER_NAME,
    )
    from megatron.energon.task_encoder.base import stateless
    from megatron.energon.task_encoder.cooking import Cooker, basic_sample_keys

    assert DefaultTaskEncoder is stoker.DefaultTaskEncoder
    assert Sample is BaseSample is stoker.Sample
    assert WorkerConfig is stoker.WorkerConfig
    assert stateless is stoker.stateless
    assert (Cooker, basic_sample_keys) == (stoker.Cooker, stoker.basic_sample_keys)
    assert (MAIN_FOLDER_NAME, INFO_JSON_FILENAME) == (".nv-meta", ".info.json")
    assert INDEX_SQLITE_FILENAME == "index.sqlite"
    import megatron.energon

    assert isinstance(megatron.energon, AliasModule)
    assert megatron.energon.task_encoder.base.stateless is stoker.stateless  # child attribute


def test_a_name_wins_over_the_submodule_of_the_same_name(installed: None) -> None:
    import megatron.energon.edataclass  # noqa: F401  (binds the submodule on its parent)
    from megatron.energon import edataclass
    from megatron.energon.edataclass import edataclass as defined_there

    assert edataclass is defined_there is stoker.edataclass


def test_star_import_and_dir_list_what_stoker_provides(installed: None) -> None:
    import megatron.energon

    namespace: dict[str, object] = {}
    exec("from megatron.energon.task_encoder.cooking import *", namespace)
    assert namespace["Cooker"] is stoker.Cooker
    assert "Sample" in megatron.energon.__all__
    assert "Sample" in dir(megatron.energon)
    assert "task_encoder" in dir(megatron.energon)


def test_missing_name_fails_with_what_to_use(installed: None) -> None:
    with pytest.raises(ImportError, match=r"'SampleIndex'.*Energon-internal counter"):
        from megatron.energon.wrappers.base import SampleIndex  # noqa: F401
    with pytest.raises(ModuleNotFoundError, match=r"megatron\.energon\.transforms.*torchvision"):
        import megatron.energon.transforms
    import megatron.energon

    assert not hasattr(megatron.energon, "no_such_name")  # names Energon lacks: AttributeError


def test_uninstall_restores_everything(installed: None) -> None:
    import megatron.energon  # noqa: F401

    assert os.environ[alias.ENV_VAR] == "1"
    hooked = multiprocessing.spawn.get_preparation_data
    alias.uninstall()
    assert not alias.is_installed()
    assert not any(isinstance(m, AliasModule) for m in sys.modules.values())
    assert multiprocessing.spawn.get_preparation_data is not hooked
    assert "stoker_energon_alias" not in multiprocessing.spawn.get_preparation_data("x")
    alias.install()  # the fixture uninstalls again
    assert "stoker_energon_alias" in multiprocessing.spawn.get_preparation_data("x")


def test_refuses_when_the_real_package_was_imported_first() -> None:
    if importlib.util.find_spec(ROOT) is None:
        pytest.skip("megatron-energon is not installed (dependency group interop)")
    code = "import megatron.energon, stoker.energon_alias as a; a.install()"
    env = {k: v for k, v in os.environ.items() if k != alias.ENV_VAR}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("stoker.errors.StokerError: the real megatron.energon was imported")


def test_energon_all_matches_the_installed_energon() -> None:
    spec = None if alias.is_installed() else importlib.util.find_spec(ROOT)
    if spec is None or spec.origin is None or isinstance(sys.modules.get(ROOT), AliasModule):
        pytest.skip("megatron-energon is not installed (dependency group interop)")
    tree = ast.parse(Path(spec.origin).read_text())
    names = next(
        ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
    )
    assert sorted(names) == sorted(ENERGON_ALL)
    assert set(names) <= set(MODULES[ROOT])


def test_table_covers_what_clients_import_and_targets_are_stoker() -> None:
    for module, name in CLIENT_IMPORTS:
        assert name in MODULES[f"{ROOT}.{module}"], (module, name)
    for module, names in MODULES.items():
        assert module == ROOT or module.startswith(ROOT + ".")
        for target in names.values():
            for alternative in target.split("|"):
                assert re.fullmatch(r"stoker(\.\w+)*:\w+|-", alternative), (module, target)


def test_docs_tables_are_current() -> None:
    document = DOCS.read_text()
    assert status.render(document) == document, (
        "docs/energon.md is stale: python -m stoker.energon_alias.status --write docs/energon.md"
    )


def test_docs_code_blocks_run(tmp_path: Path) -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOCS.read_text(), flags=re.S)
    assert len(blocks) >= 3
    env = {k: v for k, v in os.environ.items() if k != alias.ENV_VAR}
    for block in blocks:
        done = subprocess.run(
            [sys.executable, "-c", block],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env=env,
            timeout=300,
        )
        assert done.returncode == 0, f"{block}\n{done.stderr}"


def test_serves_megatron_when_no_distribution_provides_it() -> None:
    """Without site-packages (no megatron-core, no Energon) `megatron` is an empty package."""
    src = Path(stoker.__file__).resolve().parents[1]
    code = (
        f"import sys; sys.path.insert(0, {str(src)!r})\n"
        "import stoker.energon_alias as a; a.install()\n"
        "import megatron.energon.task_encoder.base as base\n"
        "import megatron; print(megatron.__path__, base.__name__)\n"
    )
    done = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["[]", "megatron.energon.task_encoder.base"]


def test_import_megatron_energon_stays_light() -> None:
    code = (
        "import sys, stoker.energon_alias as a; a.install()\n"
        "import megatron.energon, megatron.energon.task_encoder.base\n"
        "print('torch' in sys.modules, 'numpy' in sys.modules)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != alias.ENV_VAR}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "False"]


def test_says_once_that_it_wins_over_the_installed_package(
    installed: None, caplog: pytest.LogCaptureFixture
) -> None:
    alias.uninstall()
    if not alias._real_package_installed():
        pytest.skip("megatron-energon is not installed (dependency group interop)")
    with caplog.at_level("INFO", logger="stoker.energon_alias"):
        alias.install()
        alias.install()  # already installed: silent
    said = [r for r in caplog.records if "stoker serves its imports instead" in r.getMessage()]
    assert len(said) == 1


def test_launcher_usage_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from stoker.energon_alias.launch import main

    with pytest.raises(SystemExit) as exit_info:
        main([])
    assert exit_info.value.code == 2
    assert "python -m stoker.energon_alias SCRIPT" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        main([str(tmp_path / "missing.py")])
    assert exit_info.value.code == 2
    assert "can't open file" in capsys.readouterr().err
    assert not alias.is_installed()  # nothing installed for a program that does not start


def test_cli_paths_serve_energon_compatible_commands(installed: None) -> None:
    import click
    from megatron.energon.cli.main import main, prepare_command, preview_command
    from megatron.energon.savable_loader import BasicDataLoader, SavableDataLoader
    from megatron.energon.tools.checkpoint import command_info, command_redist
    from megatron.energon.tools.prepare import command as prepare
    from megatron.energon.wrappers.watchdog_dataset import WatchdogDataset

    import stoker.cli.energon_tools as tools

    assert main is tools.main and isinstance(main, click.Group)
    assert prepare is prepare_command is tools.prepare_command
    assert preview_command is tools.preview_command
    assert (command_info, command_redist) == (tools.command_info, tools.command_redist)
    assert set(main.commands) >= {"prepare", "preview", "lint", "info", "checkpoint"}
    assert WatchdogDataset is stoker.WatchdogDataset
    assert (BasicDataLoader, SavableDataLoader) == (
        stoker.BasicDataLoader,
        stoker.SavableDataLoader,
    )


def test_sample_utils_are_served(installed: None) -> None:
    from megatron.energon.sample_utils import default_get_batch_keys, format_sample_detailed

    assert format_sample_detailed({"n": 1}) == "n: 1"
    assert default_get_batch_keys([{"__key__": ["a", "b"]}]) == ["a", "b"]


def test_next_release_names_merge_with_the_release_names_of_a_module(installed: None) -> None:
    # cache.file_store has Energon 7.4.1's stores and those of its Parquet / token pull request.
    from megatron.energon.cache.file_store import BinIdxFileStore, JsonlFileStore
    from megatron.energon.weights import ScheduledWeight

    stores = MODULES[f"{ROOT}.cache.file_store"]
    assert {"DecodeFileStore", "JsonlFileStore", "BinIdxFileStore", "ParquetFileStore"} <= set(
        stores
    )
    assert JsonlFileStore.__module__.startswith("stoker.")
    assert BinIdxFileStore.__module__.startswith("stoker.")
    assert ScheduledWeight is stoker.WeightSchedule
