"""The body of a GET, checked against what was asked: exactly the bytes of the range, or an error.

The length a body must have comes from the request (``Range: bytes=a-b`` asks for ``b - a + 1``
bytes), never from the answer alone. A ranged answer must be ``206`` with a ``Content-Range`` that
starts at ``a`` and ends at ``b`` (or at the object's last byte, when the range runs past it), and
a ``Content-Length``, if any, of the same length. Then:

- a body that ends early keeps what arrived and raises :class:`~stoker.storage.retry.ShortRead`
  (the request is retried from the missing offset);
- framing that cannot be trusted (a ``Content-Length`` twice, or not a number, together with
  chunks, a ``206`` without a readable ``Content-Range``, a chunk size that is not one) raises
  :class:`~stoker.storage.retry.BadResponse`, also transient; an attempt whose body was read
  whole but whose framing then broke keeps none of it;
- another range than the one asked, or a body longer than asked, raises a
  :class:`~stoker.storage.retry.BadResponse` naming both (a proxy or a connection may have
  garbled one answer; a server that always does it is reported when the budget is spent, with
  this as the last error); a ``200`` with the whole object for a range is a
  :class:`StorageError` at once (the server does not serve ranges).

The connection goes back to the pool only when the body was read to its exact end; else it is
closed. The attempt's deadline (:mod:`stoker.storage.deadline`) is armed on its socket while the
body is read.
"""

from __future__ import annotations

import re
from typing import Any, Protocol

from stoker.errors import StorageError
from stoker.storage.deadline import DeadlineExceeded, arm_response
from stoker.storage.retry import BadResponse, ShortRead, attempt_deadline
from stoker.storage.s3_client import STATS

#: The most bytes read at once when the length is not known (a body to the end).
_CHUNK = 1 << 20
_CONTENT_RANGE = re.compile(r"bytes ([0-9]{1,19})-([0-9]{1,19})/([0-9]{1,19}|\*)", re.ASCII)


class Sink(Protocol):
    """Where the bytes go (``chunks`` appended, ``size`` their total)."""

    chunks: list[bytes]
    size: int


def content_length(headers: Any) -> int | None:
    """The ``Content-Length`` of an answer, or None if it has none.

    Raises:
        BadResponse: it is not one whole number of ASCII digits (e.g. given twice, even with
            equal values, which urllib3 joins as ``"100, 100"``).
    """
    text = headers.get("Content-Length")
    if text is None:
        return None
    text = str(text).strip()
    if not (text.isascii() and text.isdigit() and len(text) <= 19):
        raise BadResponse(f"the answer's Content-Length {text[:40]!r} is not one number")
    return int(text)


def body_length(response: Any, start: int, end: int | None, ranged: bool, url: str) -> int | None:
    """How many body bytes the answer to a GET of ``[start, end)`` must hold (None: to its end,
    where a body of unknown length asked for the whole object).

    ``ranged``: a ``Range`` header was sent. Raises :class:`BadResponse` (transient) or
    :class:`StorageError` as the module says.
    """
    status = int(response.status)
    length = content_length(response.headers)
    encoding = str(response.headers.get("Transfer-Encoding") or "")
    if length is not None and encoding:
        raise BadResponse(f"the answer has both Content-Length and Transfer-Encoding {encoding!r}")
    asked = f"bytes={start}-{'' if end is None else end - 1}"
    if status == 200:
        whole_ok = not ranged or (
            start == 0 and length is not None and (end is None or length <= end)
        )
        if not whole_ok:
            raise StorageError(
                f"asked for {asked}, the server sent the whole object.",
                path=url,
                hint="Use an S3 server that answers ranged GETs with 206 Partial Content.",
            )
        return length
    if status != 206 or not ranged:
        raise BadResponse(f"asked for {asked or 'the object'}, the answer has status {status}")
    found = _CONTENT_RANGE.fullmatch(str(response.headers.get("Content-Range") or "").strip())
    if found is None:
        text = str(response.headers.get("Content-Range"))[:80]
        raise BadResponse(f"a 206 answer with Content-Range {text!r}")
    first, last, total = int(found[1]), int(found[2]), found[3]
    ends_object = total != "*" and last == int(total) - 1
    right_end = last == end - 1 if end is not None else ends_object
    if end is not None and last < end - 1 and ends_object:
        right_end = True  # the range runs past the object's end: the answer stops there
    if first != start or not right_end or last < first:
        raise BadResponse(f"asked for {asked}, the server answered bytes {first}-{last}/{total}")
    want = last - first + 1
    if length is not None and length > want:
        raise BadResponse(f"asked for {asked} ({want} bytes), the server announced {length}")
    return want


def receive(raw: Any, got: Sink, expected: int | None, framed: bool) -> None:
    """Read a body of ``expected`` bytes (None: to its end) into ``got``, which keeps what
    arrived when the body is cut short.

    ``framed``: the answer has a ``Content-Length`` (else the end of a chunked body is read and
    checked too). Raises :class:`ShortRead` for a short body, :class:`DeadlineExceeded` when the
    attempt's deadline cut it, :class:`BadResponse` for broken framing, :class:`StorageError` for
    a body longer than asked.
    """
    watch = arm_response(raw, attempt_deadline())
    kept, size = len(got.chunks), got.size
    received = 0
    try:
        try:
            while expected is None or received < expected:
                # One read of the whole rest: a single buffer, filled straight from the socket
                # (a cut connection ends the read early with what arrived, kept for the resume).
                chunk = raw.read(_CHUNK if expected is None else expected - received)
                if not chunk:
                    break
                got.chunks.append(chunk)
                got.size += len(chunk)
                received += len(chunk)
                STATS.count(received=len(chunk))
            if expected is not None and received == expected and not framed:
                try:  # a chunked body must end here
                    extra = raw.read(1)
                except Exception as e:
                    del got.chunks[kept:]  # framing broke after the data: trust none of it
                    got.size = size
                    raise BadResponse(f"the chunked body did not end after {expected} bytes") from e
                if extra:
                    del got.chunks[kept:]
                    got.size = size
                    raise BadResponse(f"asked for {expected} bytes, the server sent more")
        except (ValueError, OverflowError) as e:  # framing the client could not parse
            raise BadResponse(f"the answer's framing is broken: {type(e).__name__}: {e}") from e
    except BaseException as e:
        raw.close()  # a broken connection never goes back to the pool
        if watch is not None and watch.disarm():
            raise DeadlineExceeded(f"the request passed its deadline ({received} bytes)") from e
        raise
    if watch is not None and watch.disarm():
        raw.close()
        raise DeadlineExceeded(f"the request passed its deadline ({received} bytes)")
    if expected is not None and received < expected:
        raw.close()
        raise ShortRead(f"received {received} of {expected} bytes")
    raw.release_conn()
