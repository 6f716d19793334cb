"""Every code block of README.md and docs/*.md runs as written, on the demo data.

Python and bash blocks run in a fresh process, in a folder holding a copy of the demo data that
README's step-by-step block makes (run once per session); fragments are compiled (Python) or
syntax-checked (bash). What a block prints is checked where the page shows it (an
``<!-- output -->`` block after it). YAML and JSON blocks must parse. See
tests/docs/markdown_blocks.py for the marks.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.docs.markdown_blocks import Block, output_matches, read_blocks
from tests.docs.setups import SETUPS

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCKS = [block for page in PAGES for block in read_blocks(page)]
RUNNABLE = {"python", "bash"}
#: README's step-by-step demo: it makes the data every other block runs on.
DEMO_MARKER = "python scripts/make_demo_files.py demo-data/raw"
#: A hang guard, not a speed check: under load the demo block alone took over 120 s.
TIMEOUT_S = 600


def _outputs(blocks: list[Block]) -> dict[str, Block]:
    """The ``<!-- output -->`` block of each block that shows one, by the block's id: an output
    belongs to the nearest code block above it that runs (not a fragment)."""
    shown: dict[str, Block] = {}
    source: Block | None = None
    for block in blocks:
        if block.mark == "output":
            assert source is not None, f"{block.id}: an output block needs a code block above it"
            assert source.id not in shown, f"{block.id}: {source.id} already shows its output"
            shown[source.id] = block
        elif block.language in RUNNABLE:
            source = None if block.mark == "fragment" else block
    return shown


OUTPUTS = {k: v for page in PAGES for k, v in _outputs(read_blocks(page)).items()}


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in [str(ROOT / "src"), env.get("PYTHONPATH", "")] if p
    )
    env["PYTHONWARNINGS"] = "error"  # as pytest: a warning is a failure
    for name in ("STOKER_STORAGE_CONFIG", "AWS_PROFILE", "AWS_ENDPOINT_URL_S3", "MSC_CONFIG"):
        env.pop(name, None)
    env.update(extra or {})
    return env


def _run(
    block: Block, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    suffix = ".py" if block.language == "python" else ".sh"
    script = cwd / f"docs_block{suffix}"
    script.write_text(block.code)
    argv = (
        [sys.executable, script.name]
        if block.language == "python"
        else ["bash", "-eo", "pipefail", script.name]
    )
    return subprocess.run(
        argv, cwd=cwd, env=_env(env), capture_output=True, text=True, timeout=TIMEOUT_S
    )


def _failure(block: Block, done: subprocess.CompletedProcess[str]) -> str:
    return (
        f"{block.path.relative_to(ROOT)} line {block.line}: the {block.language} block exited "
        f"{done.returncode}\n--- stdout\n{done.stdout[-3000:]}\n--- stderr\n{done.stderr[-3000:]}"
    )


@pytest.fixture(scope="session")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder where README's step-by-step demo block ran: demo-data/raw and demo-data/shards."""
    (block,) = [b for b in BLOCKS if b.path.name == "README.md" and DEMO_MARKER in b.code]
    work = tmp_path_factory.mktemp("docs-demo")
    (work / "scripts").symlink_to(ROOT / "scripts")
    done = _run(block, work)
    assert done.returncode == 0, _failure(block, done)
    return work


def _workdir(demo: Path, tmp_path: Path) -> Path:
    shutil.copytree(demo / "demo-data", tmp_path / "demo-data")
    (tmp_path / "scripts").symlink_to(ROOT / "scripts")
    return tmp_path


#: Pages of prose only (no code to run).
PROSE_PAGES = {"architecture.md"}


def test_every_page_has_blocks_and_marks_are_known() -> None:
    assert len(PAGES) >= 10
    assert all(read_blocks(page) for page in PAGES if page.name not in PROSE_PAGES)
    for block in BLOCKS:
        if block.mark == "fragment":
            assert block.note, f"{block.id}: a fragment mark needs a reason"
        if block.mark == "setup":
            assert block.note in SETUPS, f"{block.id}: unknown setup {block.note!r}"
        if block.mark not in ("run", "output"):
            assert block.language in RUNNABLE, f"{block.id}: only code blocks take marks"
    assert len(OUTPUTS) >= 10  # the pages show what their examples print


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.language in RUNNABLE], ids=lambda b: b.id)
def test_code_block(
    block: Block, demo: Path, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if block.mark == "fragment":
        if block.language == "python":
            compile(block.code, block.id, "exec")
        else:
            done = subprocess.run(["bash", "-n"], input=block.code, capture_output=True, text=True)
            assert done.returncode == 0, f"{block.id}: {done.stderr}"
        return
    if DEMO_MARKER in block.code:
        assert (demo / "demo-data/shards/.nv-meta/index.sqlite").is_file()
        return
    work = _workdir(demo, tmp_path)
    env = SETUPS[block.note](work, request) if block.mark == "setup" else {}
    done = _run(block, work, env)
    assert done.returncode == 0, _failure(block, done)
    shown = OUTPUTS.get(block.id)
    if shown is not None:
        assert output_matches(shown.code, done.stdout), (
            f"{block.id} printed what {shown.id} does not show:\n--- shown\n{shown.code}"
            f"--- printed\n{done.stdout[-3000:]}"
        )


@pytest.mark.parametrize(
    "block", [b for b in BLOCKS if b.language in {"yaml", "json"}], ids=lambda b: b.id
)
def test_data_block_parses(block: Block) -> None:
    if block.language == "yaml":
        assert isinstance(yaml.safe_load(block.code), dict)
    else:
        assert [json.loads(line) for line in block.code.splitlines() if line.strip()]


def test_marks_apply_to_the_next_block_only(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "# t\n<!-- fragment: needs a GPU -->\n```python\nx = 1\n```\n\n"
        "<!-- setup: unprepared -->\n```bash\nstoker info demo-data/shards\n```\n"
        "text\n\n```python\nprint(1)\n```\n````md\n```\n````\n"
    )
    blocks = read_blocks(page)
    assert [(b.line, b.language, b.mark, b.note) for b in blocks] == [
        (3, "python", "fragment", "needs a GPU"),
        (8, "bash", "setup", "unprepared"),
        (13, "python", "run", ""),
        (16, "md", "run", ""),
    ]
    assert blocks[0].code == "x = 1\n" and blocks[3].code == "```\n"
    page.write_text("```python\nx = 1\n")
    with pytest.raises(ValueError, match=r"page\.md:1: the code block is never closed"):
        read_blocks(page)
