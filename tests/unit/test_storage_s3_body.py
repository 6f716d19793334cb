"""The checks of a GET's answer against its request (stoker.storage.s3_body), on small fake
answers: the length comes from the range asked, a wrong or unreadable frame is refused, a short
body keeps what arrived, and the connection is reused only after a body read to its end."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from urllib3 import HTTPHeaderDict

from stoker.errors import StorageError
from stoker.storage.retry import BadResponse, ShortRead, is_transient
from stoker.storage.s3_body import body_length, content_length, receive


@dataclass
class Answer:
    """A urllib3-like answer: status, headers and a body read in the pieces given."""

    status: int
    headers: HTTPHeaderDict
    pieces: list[bytes] = field(default_factory=list)
    released: bool = False
    closed: bool = False

    def read(self, amt: int | None = None) -> bytes:
        if not self.pieces:
            return b""
        piece = self.pieces[0][: amt if amt is not None else None]
        self.pieces[0] = self.pieces[0][len(piece) :]
        if not self.pieces[0]:
            self.pieces.pop(0)
        return piece

    def release_conn(self) -> None:
        self.released = True

    def close(self) -> None:
        self.closed = True


@dataclass
class Got:
    chunks: list[bytes] = field(default_factory=list)
    size: int = 0


def answer(status: int, *headers: tuple[str, str], body: bytes = b"") -> Answer:
    found = HTTPHeaderDict()
    for name, value in headers:
        found.add(name, value)
    return Answer(status, found, [body] if body else [])


@pytest.mark.parametrize("text", ["100, 100", "²", "-5", "1e3", " ", "99999999999999999999"])
def test_a_content_length_that_is_not_one_number_is_a_transient_error(text: str) -> None:
    with pytest.raises(BadResponse) as caught:
        content_length(HTTPHeaderDict({"Content-Length": text}))
    assert is_transient(caught.value)


def test_the_length_comes_from_the_range_asked() -> None:
    ok = answer(206, ("Content-Range", "bytes 10-19/100"), ("Content-Length", "10"))
    assert body_length(ok, 10, 20, True, "s3://b/k") == 10
    # A range past the object's end: the answer stops at its last byte.
    tail = answer(206, ("Content-Range", "bytes 90-99/100"), ("Content-Length", "10"))
    assert body_length(tail, 90, 120, True, "s3://b/k") == 10


@pytest.mark.parametrize(
    "headers",
    [
        [("Content-Range", "bytes 11-20/100"), ("Content-Length", "10")],  # another offset
        [("Content-Range", "bytes 10-18/100"), ("Content-Length", "9")],  # shorter range
        [("Content-Range", "bytes 10-19/100"), ("Content-Length", "110")],  # longer body
        [("Content-Length", "10")],  # no Content-Range
        [
            ("Content-Range", "bytes 10-19/100"),
            ("Transfer-Encoding", "chunked"),
            ("Content-Length", "10"),
        ],  # both framings
    ],
)
def test_a_wrong_range_or_frame_is_refused(headers: list[tuple[str, str]]) -> None:
    with pytest.raises(BadResponse):
        body_length(answer(206, *headers), 10, 20, True, "s3://b/k")


def test_the_whole_object_for_a_range_is_a_clear_error() -> None:
    whole = answer(200, ("Content-Length", "100"))
    with pytest.raises(StorageError, match="the server sent the whole object"):
        body_length(whole, 10, 20, True, "s3://b/k")


def test_a_short_body_keeps_what_arrived_and_closes_the_connection() -> None:
    got, cut = Got(), answer(206, body=b"x" * 6)
    with pytest.raises(ShortRead, match="received 6 of 10"):
        receive(cut, got, 10, framed=True)
    assert got.chunks == [b"x" * 6] and got.size == 6
    assert cut.closed and not cut.released


def test_a_chunked_body_longer_than_asked_keeps_nothing() -> None:
    got, longer = Got(), answer(206, body=b"y" * 11)
    with pytest.raises(BadResponse, match="sent more"):
        receive(longer, got, 10, framed=False)
    assert got.chunks == [] and got.size == 0 and longer.closed


def test_a_body_read_to_its_end_gives_the_connection_back() -> None:
    got, whole = Got(), answer(206, body=b"z" * 10)
    receive(whole, got, 10, framed=False)
    assert b"".join(got.chunks) == b"z" * 10 and whole.released and not whole.closed
