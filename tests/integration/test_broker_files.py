"""The embedded default's broker (osmo.broker): a consumer never reads a message file that is still
being written. kombu's own filesystem transport does (celery/kombu#1551), and its worker then stops.

The producer is held between creating its file and writing it (the JSON encoding waits on an event)
while the consumer looks for a message; no broker server is involved, only files in a folder."""

from __future__ import annotations

import json
import threading

import pytest
from kombu import Connection
from kombu.transport import filesystem
from kombu.utils import encoding

from osmo import broker


def channel(transport: type, folder) -> object:
    for sub in ("queue", "processed", "control"):
        (folder / sub).mkdir(exist_ok=True)
    connection = Connection(transport=transport, transport_options={
        "data_folder_in": str(folder / "queue"), "data_folder_out": str(folder / "queue"),
        "processed_folder": str(folder / "processed"), "control_folder": str(folder / "control"),
        "store_processed": False,
    })
    return connection.default_channel


def put_held(monkeypatch, chan, module) -> tuple[threading.Thread, threading.Event, threading.Event]:
    """Start ``chan._put`` in a thread that stops after its file exists and before its bytes are written."""
    writing, go = threading.Event(), threading.Event()

    def held(value, *args, **kwargs):
        writing.set()
        go.wait(10)
        return encoding.str_to_bytes(value, *args, **kwargs)

    monkeypatch.setattr(module, "str_to_bytes", held)
    thread = threading.Thread(target=chan._put, args=("q", {"body": "whole"}))
    thread.start()
    assert writing.wait(10)
    return thread, writing, go


def test_kombus_transport_hands_a_consumer_a_file_still_being_written(monkeypatch, tmp_path):
    # given kombu's transport, a producer held between creating its message file and writing it
    chan = channel(filesystem.Transport, tmp_path)
    thread, _writing, go = put_held(monkeypatch, chan, filesystem)
    # when a consumer looks for a message, then it reads the empty file and fails as the worker did
    try:
        with pytest.raises(json.JSONDecodeError):
            chan._get("q")
    finally:
        go.set()
        thread.join(10)


def test_a_consumer_sees_a_message_only_once_it_is_written_whole(monkeypatch, tmp_path):
    # given osmo.broker's transport, a producer held at the same point
    chan = channel(broker.Transport, tmp_path)
    thread, _writing, go = put_held(monkeypatch, chan, broker)
    # when a consumer looks for a message meanwhile, and again once the producer is done
    try:
        with pytest.raises(filesystem.Empty):
            chan._get("q")
    finally:
        go.set()
        thread.join(10)
    # then it saw none the first time and the whole message the second; no file is left behind
    assert chan._get("q") == {"body": "whole"}
    assert list((tmp_path / "queue").iterdir()) == []
