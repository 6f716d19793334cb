"""``stoker doctor``: which optional backends are installed, and which extras they complete."""

from __future__ import annotations

import platform
import re
from dataclasses import dataclass, field
from importlib import metadata

import click

from stoker.cli.common import CONTEXT_SETTINGS, echo_json, reports_errors, style

#: (distribution, what stoker uses it for), in the order shown.
BACKENDS: tuple[tuple[str, str], ...] = (
    ("torch", "the loader, batches, tensors"),
    ("pillow", "image decoding"),
    ("simplejpeg", "fast JPEG decoding"),
    ("av", "video and audio (PyAV)"),
    ("boto3", "s3:// paths"),
    ("obstore", "object stores (not used by stoker itself)"),
    ("fsspec", "http(s):// and other URLs"),
    ("aiohttp", "http(s):// through fsspec"),
    ("msgpack", "msgpack parts"),
    ("cbor2", "cbor parts"),
    ("pytorch-lightning", "stoker.integrations.lightning"),
    ("megatron-energon", "interoperability checks"),
)
_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[([^\]]*)\])?")
_EXTRA = re.compile(r"""extra\s*==\s*["']([^"']+)["']""")


@dataclass
class DoctorReport:
    """Versions of stoker, Python and each backend (None: not installed), and the extras."""

    stoker: str | None
    python: str
    backends: dict[str, str | None] = field(default_factory=dict)
    extras: dict[str, bool] = field(default_factory=dict)
    missing: dict[str, list[str]] = field(default_factory=dict)


def version_of(distribution: str) -> str | None:
    """The installed version of ``distribution``, or None."""
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def extra_requirements() -> dict[str, list[str]]:
    """stoker's extras -> the distributions each needs (``all`` expanded), from its metadata."""
    try:
        requires = metadata.requires("stoker") or []
    except metadata.PackageNotFoundError:
        return {}
    extras: dict[str, list[str]] = {}
    nested: dict[str, list[str]] = {}
    for requirement in requires:
        name, marker = _NAME.match(requirement), _EXTRA.search(requirement)
        if name is None or marker is None:
            continue
        if name.group(1).lower() == "stoker":
            nested.setdefault(marker.group(1), []).extend((name.group(2) or "").split(","))
        else:
            extras.setdefault(marker.group(1), []).append(name.group(1))
    for extra, parts in nested.items():
        names = [n for part in parts for n in extras.get(part.strip(), [])]
        extras.setdefault(extra, []).extend(names)
    return extras


def diagnose() -> DoctorReport:
    """What :command:`stoker doctor` reports."""
    report = DoctorReport(stoker=version_of("stoker"), python=platform.python_version())
    report.backends = {name: version_of(name) for name, _ in BACKENDS}
    for extra, names in sorted(extra_requirements().items()):
        missing = [n for n in names if version_of(n) is None]
        report.extras[extra] = not missing
        if missing:
            report.missing[extra] = missing
    return report


@click.command(name="doctor", context_settings=CONTEXT_SETTINGS)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@reports_errors
def command(as_json: bool) -> None:
    """List the optional backends installed here, with versions, and the extras they complete.

    Nothing is imported: this runs in a fraction of a second even without torch.

    \b
    Examples:
      stoker doctor
      stoker doctor --json
    """
    report = diagnose()
    if as_json:
        echo_json(report)
        return
    click.echo(f"stoker {report.stoker or '(not installed as a package)'}, Python {report.python}")
    click.echo("\nBackends:")
    for name, purpose in BACKENDS:
        version = report.backends[name]
        shown = (
            style(f"{version:<16}", fg="green")
            if version
            else style(f"{'not installed':<16}", fg="yellow")
        )
        click.echo(f"  {name:<18} {shown}  {purpose}")
    click.echo("\nExtras (pip install 'stoker[EXTRA]'):")
    for extra, complete in report.extras.items():
        if complete:
            click.echo(f"  {extra:<10} " + style("installed", fg="green"))
        else:
            needs = ", ".join(report.missing[extra])
            click.echo(f"  {extra:<10} missing {needs}")
