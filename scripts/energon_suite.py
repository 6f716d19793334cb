"""Run Energon's own test suite against stoker, through ``stoker.energon_alias``.

Each test file of ENERGON_CHECKOUT/tests runs in its own pytest process with
``-p stoker.energon_alias.pytest_plugin``, so ``import megatron.energon...`` inside the tests is
served by stoker (the tests are read from the checkout, never copied). Prints one line per test
(PASS / FAIL / ERROR / SKIP, with the first line of the reason) and a summary.

Usage:
    python scripts/energon_suite.py /path/to/energon-checkout [-k EXPR] [--timeout 900] [FILE...]
"""

from __future__ import annotations

import argparse
import ast
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Outcome:
    test: str
    status: str  # PASS, FAIL, ERROR, SKIP
    reason: str


def run_file(
    checkout: Path, test_file: Path, extra: list[str], timeout: float, alias: bool = True
) -> list[Outcome]:
    """Run one test file (under the alias, or against the installed Energon for a reference);
    one Outcome per test."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.xml"
        command = [
            sys.executable,
            *("-m", "pytest", *(("-p", "stoker.energon_alias.pytest_plugin") if alias else ())),
            *("-p", "no:cacheprovider", "-v", "--tb=line", "-o", "addopts="),
            *("--rootdir", str(checkout), f"--junitxml={report}", *extra),
            str(test_file.relative_to(checkout)),
        ]
        # Energon's tests are unmodified client code: they run the sample_loader.py and the
        # metadataset joiners they write, which stoker does only with these documented opt-ins.
        env = {
            **os.environ,
            "PYTHONDONTWRITEBYTECODE": "1",
            "STOKER_TRUST_SAMPLE_LOADER": "1",
            "STOKER_TRUST_METADATASET": "1",
        }
        try:
            done = subprocess.run(
                command, cwd=checkout, env=env, capture_output=True, text=True, timeout=timeout
            )
        except subprocess.TimeoutExpired as e:
            return timed_out(test_file, e.stdout, timeout)
        if not report.exists():
            tail = (done.stdout + done.stderr).strip().splitlines()[-1:] or ["no output"]
            return [Outcome(test_file.name, "ERROR", f"pytest exited {done.returncode}: {tail[0]}")]
        return expand_collection_errors(parse_report(report), test_file)


_VERBOSE = {"PASSED": "PASS", "FAILED": "FAIL", "ERROR": "ERROR", "SKIPPED": "SKIP"}


def timed_out(test_file: Path, output: bytes | str | None, timeout: float) -> list[Outcome]:
    """The outcomes pytest printed (``-v``) before the file's time ran out; the test running
    then and those not reached count as ERROR."""
    if isinstance(output, bytes):
        output = output.decode(errors="replace")
    done: dict[str, Outcome] = {}
    running = None
    for line in (output or "").splitlines():
        if "::" not in line or not line.startswith("tests/"):
            continue
        node, _, rest = line.partition(" ")
        name = _junit_name(node)
        status = _VERBOSE.get(rest.split(" ")[0]) if rest else None
        if status is None:
            running = name
        else:
            done[name] = Outcome(name, status, "")
    reason = f"timed out after {timeout:.0f} s"
    outcomes = list(done.values())
    if running is not None and running not in done:
        outcomes.append(Outcome(running, "ERROR", f"{reason} in this test"))
    for name in defined_tests(test_file):
        if name not in done and name != running:
            outcomes.append(Outcome(name, "ERROR", f"not reached: the file {reason}"))
    return outcomes


def _junit_name(node: str) -> str:
    """``tests/test_a.py::TestA::test_b`` as JUnit names it: ``tests.test_a.TestA::test_b``."""
    parts = node.split("::")
    module = parts[0].removesuffix(".py").replace("/", ".")
    return f"{'.'.join([module, *parts[1:-1]])}::{parts[-1]}"


def parse_report(report: Path) -> list[Outcome]:
    """The outcomes in a pytest JUnit XML report."""
    outcomes = []
    for case in ET.parse(report).getroot().iter("testcase"):
        name = f"{case.get('classname', '')}::{case.get('name', '')}".strip(":")
        status, reason = "PASS", ""
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                status = {"failure": "FAIL", "error": "ERROR", "skipped": "SKIP"}[child.tag]
                reason = first_line(child.get("message") or child.text or "")
                if reason == "collection failure":  # the cause is the last "E   " line
                    errors = [ln[1:] for ln in (child.text or "").splitlines() if ln[:2] == "E "]
                    reason = first_line(errors[-1] if errors else reason)
                break
        outcomes.append(Outcome(name, status, reason))
    return outcomes


def expand_collection_errors(outcomes: list[Outcome], test_file: Path) -> list[Outcome]:
    """A file that failed to import counts as one ERROR per test it defines (found by reading
    its source), so the totals compare with a run of the real package."""
    module = f"tests.{test_file.stem}"
    if len(outcomes) != 1 or outcomes[0].test != module or outcomes[0].status != "ERROR":
        return outcomes
    reason = f"import of the file failed: {outcomes[0].reason}"
    return [Outcome(name, "ERROR", reason) for name in defined_tests(test_file)] or outcomes


def defined_tests(test_file: Path) -> list[str]:
    """The JUnit names of the tests ``test_file`` defines (read from its source)."""
    module = f"tests.{test_file.stem}"
    tree = ast.parse(test_file.read_text())
    names = [f"{module}::{n.name}" for n in tree.body if _is_test(n)]
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            names += [f"{module}.{node.name}::{n.name}" for n in node.body if _is_test(n)]
    return names


def _is_test(node: ast.stmt) -> bool:
    functions = (ast.FunctionDef, ast.AsyncFunctionDef)
    return isinstance(node, functions) and node.name.startswith("test")


def first_line(text: str, width: int = 200) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    line = lines[0] if lines else ""
    return line if len(line) <= width else line[: width - 3] + "..."


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkout", type=Path, help="Energon's source checkout (has tests/)")
    parser.add_argument("files", nargs="*", help="test files to run (default: all test_*.py)")
    parser.add_argument("-k", dest="keyword", help="pytest -k expression")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per test file")
    parser.add_argument(
        "--reference", action="store_true", help="run against the installed Energon, no alias"
    )
    args = parser.parse_args()
    checkout = args.checkout.resolve()
    tests = sorted((checkout / "tests").glob("test_*.py"))
    if args.files:
        tests = [t for t in tests if t.name in {Path(f).name for f in args.files}]
    extra = ["-k", args.keyword] if args.keyword else []
    outcomes: list[Outcome] = []
    for test_file in tests:
        start = time.monotonic()
        found = run_file(checkout, test_file, extra, args.timeout, alias=not args.reference)
        for outcome in found:
            reason = f"  ({outcome.reason})" if outcome.reason else ""
            print(f"{outcome.status:5} {outcome.test}{reason}", flush=True)
        print(f"      [{test_file.name}: {time.monotonic() - start:.0f} s]", flush=True)
        outcomes.extend(found)
    counts = {s: sum(o.status == s for o in outcomes) for s in ("PASS", "FAIL", "ERROR", "SKIP")}
    print(" ".join(f"{k.lower()}={v}" for k, v in counts.items()), f"total={len(outcomes)}")
    return 0 if counts["FAIL"] == counts["ERROR"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
