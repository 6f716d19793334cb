"""A worker sends only what changed in what its stages hold; the main process rebuilds it."""

from __future__ import annotations

import pickle

import pytest

from stoker.runtime.held_wire import SAME, Receiver, Sender

LONG = "refs1:" + "a" * 40


def wire(sender: Sender, receiver: Receiver, stream: int, held: object) -> object:
    sent = pickle.loads(pickle.dumps(sender.compact(stream, held)))
    return receiver.expand(stream, sent), sent


def test_unchanged_long_strings_travel_as_a_marker_and_come_back() -> None:
    sender, receiver = Sender(), Receiver()
    first = {"inner": {"pack": {"refs": LONG, "popped": 0}}, "own": [1, "x" * 40]}
    assert wire(sender, receiver, 3, first) == (first, first)  # first batch: all of it
    second = {"inner": {"pack": {"refs": LONG, "popped": 1}}, "own": [2, "x" * 40]}
    got, sent = wire(sender, receiver, 3, second)
    assert got == second
    assert sent == {"inner": {"pack": {"refs": SAME, "popped": 1}}, "own": [2, SAME]}
    third = {"inner": {"pack": {"refs": LONG + "b", "popped": 0}}}  # a new round
    assert wire(sender, receiver, 3, third) == (third, third)


def test_streams_are_apart_and_none_resets() -> None:
    sender, receiver = Sender(), Receiver()
    held = {"pack": {"refs": LONG}}
    wire(sender, receiver, 0, held)
    assert wire(sender, receiver, 1, held) == (held, held)  # stream 1 had sent nothing yet
    wire(sender, receiver, 0, None)
    assert wire(sender, receiver, 0, held) == (held, held)
    assert wire(sender, receiver, 0, {"pack": {"refs": "short"}})[1] == {"pack": {"refs": "short"}}


def test_a_marker_without_a_previous_value_is_an_error() -> None:
    receiver = Receiver()
    receiver.expand(0, {"pack": {"refs": LONG}})
    with pytest.raises(RuntimeError, match="lacks"):
        receiver.expand(0, {"group": SAME})
