"""No module of stoker reads the environment except the options-defaults module and a few named
exceptions (third-party tools' own variables, the energon_alias install switch)."""

from __future__ import annotations

import ast
from pathlib import Path

import stoker

SRC = Path(stoker.__file__).parent

#: Module (relative to src/stoker) -> why it may read the environment.
ALLOWED = {
    "storage/options.py": "the one defaults module: STOKER_* variables of LoaderOptions",
    "__init__.py": "STOKER_ENERGON_ALIAS, the install switch of stoker.energon_alias",
    "energon_alias/__init__.py": "STOKER_ENERGON_ALIAS, set for child processes by install()",
    "storage/msc.py": "Multi-Storage Client's MSC_CONFIG, HOME/XDG_CONFIG_HOME and ${VAR}s",
    "storage/epath.py": "NVDATASET_CACHE_DIR, Energon's variable for dss:// paths",
    "storage/s3_client.py": "the AWS credential chain (AWS_*) keys the client cache",
    "storage/s3_http.py": "REQUESTS_CA_BUNDLE, the CA bundle botocore falls back to",
    "format/distributed.py": "torchrun's RANK/WORLD_SIZE/MASTER_* and SLURM's SLURM_* variables",
}
_NAMES = {"environ", "getenv", "putenv", "unsetenv", "environb"}


def env_reads(path: Path) -> list[int]:
    """Lines of ``path`` that touch ``os.environ`` / ``os.getenv`` (or import them)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in _NAMES:
            lines.append(node.lineno)
        elif isinstance(node, ast.ImportFrom) and node.module == "os":
            lines += [node.lineno for alias in node.names if alias.name in _NAMES][:1]
    return lines


def test_only_the_allowed_modules_read_the_environment() -> None:
    found = {
        str(path.relative_to(SRC)): env_reads(path)
        for path in sorted(SRC.rglob("*.py"))
        if env_reads(path)
    }
    outside = {module: lines for module, lines in found.items() if module not in ALLOWED}
    assert outside == {}, (
        "read LoaderOptions (stoker.storage.options.current()) instead of the environment, "
        f"or add the variable to stoker.storage.options: {outside}"
    )
    assert set(found) == set(ALLOWED)  # an exception no longer needed leaves the list


def test_the_scan_finds_each_form_of_reading(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text(
        "import os\nfrom os import getenv\nos.environ.get('A')\nos.getenv('B')\nx = 1\n"
    )
    assert sorted(env_reads(source)) == [2, 3, 4]
