"""Energon's own tests, unmodified, through ``stoker.energon_alias``: a quick, representative
subset (fork hooks, the index writer and aggregator pool, sample printing, split exclusion, the
worker debug log with ``analyze-debug``), run by ``scripts/energon_suite.py`` as a user would.

Energon's tests are not in its wheel: point ``STOKER_ENERGON_CHECKOUT`` at a source checkout of
Energon 7.4.x (the folder holding ``tests/``); without one the test is skipped. The whole suite:
``python scripts/energon_suite.py CHECKOUT`` (docs/energon.md lists what still fails, and why).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from pathlib import Path
from types import ModuleType

import pytest

pytestmark = pytest.mark.energon

SCRIPT = Path(__file__).parents[2] / "scripts" / "energon_suite.py"
#: Test file -> pytest ``-k`` expression (None: the whole file).
SUBSET: dict[str, str | None] = {
    "test_weakref.py": None,
    "test_webdataset_prepare.py": None,
    "test_sample_utils.py": None,
    "test_dataset.py": "test_debug_dataset or test_exclusion",
}


def _suite() -> ModuleType:
    spec = importlib.util.spec_from_file_location("energon_suite", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    source = os.environ.get("STOKER_ENERGON_CHECKOUT")
    if not source or not (Path(source) / "tests").is_dir():
        pytest.skip("set STOKER_ENERGON_CHECKOUT to an Energon source checkout (with tests/)")
    copy = tmp_path_factory.mktemp("energon") / "checkout"  # the tests write next to themselves
    shutil.copytree(Path(source) / "tests", copy / "tests")
    return copy


@pytest.mark.parametrize("test_file", sorted(SUBSET))
def test_energon_tests_pass_through_the_alias(checkout: Path, test_file: str) -> None:
    suite = _suite()
    keyword = SUBSET[test_file]
    extra = ["-k", keyword] if keyword else []
    outcomes = suite.run_file(checkout, checkout / "tests" / test_file, extra, timeout=900.0)
    failed = [o for o in outcomes if o.status != "PASS"]
    assert outcomes and not failed, "\n".join(f"{o.status} {o.test}: {o.reason}" for o in failed)
