"""Whether this process can decode on a GPU with an optional package, and the one warning if not.

GPU decoding is asked for by name (``image_decode="nvimgcodecrgb8"``, ``video_decode_device=0``)
and is only a speed-up: where CUDA or the package is missing, stoker decodes on the CPU and
says so once per process and reason (:func:`warn_once`), not once per sample.

Example:
    >>> gpu_problem(cuda=False, package="nvidia.nvimgcodec", extra="gpu", device=0)
    'CUDA is not available (torch.cuda.is_available() is False)'
    >>> gpu_problem(cuda=True, package="json", extra="gpu", device=0) is None
    True
"""

from __future__ import annotations

import importlib.util
import threading
import warnings

_warned: set[str] = set()
_lock = threading.Lock()


class GpuDecodeFallbackWarning(RuntimeWarning):
    """GPU decoding was asked for but runs on the CPU (CUDA or its package is missing)."""


def gpu_problem(*, cuda: bool, package: str, extra: str, device: int) -> str | None:
    """Why GPU decoding with ``package`` on CUDA device ``device`` cannot run (None: it can).

    ``cuda`` says whether CUDA is usable in this process (:func:`cuda_usable`).
    """
    if not cuda:
        return "CUDA is not available (torch.cuda.is_available() is False)"
    if importlib.util.find_spec(package.partition(".")[0]) is None or not _found(package):
        return f"the package {package!r} is not installed (pip install 'stoker[{extra}]')"
    if device < 0:
        return f"device={device} is not a CUDA device ordinal"
    return None


def _found(package: str) -> bool:
    try:
        return importlib.util.find_spec(package) is not None
    except ModuleNotFoundError:
        return False


def cuda_usable(device: int) -> bool:
    """Whether this process may use CUDA device ``device`` (not a forked child of a process that
    had initialised CUDA, where every CUDA call fails)."""
    import torch

    if not torch.cuda.is_available() or device >= torch.cuda.device_count():
        return False
    bad_fork = getattr(torch.cuda, "_is_in_bad_fork", None)
    return not (bad_fork is not None and bad_fork())


def warn_once(key: str, message: str, stacklevel: int = 3) -> bool:
    """Warn ``message`` (a :class:`GpuDecodeFallbackWarning`) unless ``key`` was warned about
    in this process already; True where it warned. ``stacklevel`` as ``warnings.warn``'s,
    counted from the caller of this function."""
    with _lock:
        if key in _warned:
            return False
        _warned.add(key)
    warnings.warn(message, GpuDecodeFallbackWarning, stacklevel=stacklevel + 1)
    return True


def forget_warnings() -> None:
    """Let every fallback warn again (for tests)."""
    with _lock:
        _warned.clear()
