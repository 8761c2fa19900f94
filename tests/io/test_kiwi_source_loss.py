"""KiwiSource: an odd ADPCM payload is a counted loss, and a server flooding messages is named as such."""

from __future__ import annotations

import threading

import pytest
from websockets.sync.server import serve

from streamkit.core import tags as T
from streamkit.core.tags import GapCause
from streamkit.io.kiwi_emulator import EmulatorThread
from tests.io.kiwi_run import run_source, states


def run(port: int, duration: float = 30.0, **kw):
    return run_source(port, duration, "loss-test", **{"stall_s": 1.0, "max_retries": 0, **kw})


@pytest.mark.timeout(60)
def test_odd_adpcm_payload_is_a_counted_gap_not_a_short_frame() -> None:
    with EmulatorThread(speed=8.0) as emu:
        emu.call(lambda: emu.emulator.set_faults(spec="malformed=5:odd_payload;max_frames=10"))
        sink, r, src = run(emu.port)  # ends when the server closes after frame 10 (no retry)
    gaps = [t.value for t in sink.tags if t.key == T.GAP and t.value.cause == GapCause.SEQ_GAP]
    assert [g.lost for g in gaps] == [2048]
    assert sink.samples.shape[0] == 9 * 2048  # nothing short: 9 whole frames delivered, 1 reported lost
    assert any("ADPCM payload of 1023 bytes is odd" in d for s, d in states(r) if s == "warning")


class FloodServer:
    """Accepts one WebSocket client, reads its first message, then sends ``message`` as fast as it can."""

    def __init__(self, message: bytes | str) -> None:
        self.message = message
        self.stop = threading.Event()
        self.server = serve(self.handler, "127.0.0.1", 0, ping_interval=None)
        self.port = self.server.socket.getsockname()[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def handler(self, ws) -> None:
        ws.recv()
        n = 0
        while not self.stop.is_set():
            try:
                ws.send(self.message)
            except Exception:
                return
            n += 1
            if n % 200 == 0:
                self.stop.wait(0.001)

    def __enter__(self) -> FloodServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.server.shutdown()
        self.thread.join(10)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("message", "kind"), [(b"MSG flood=1", "MSG flood x"), ("MSG \x1b[2Jflood=1", "text message x")], ids=["msg", "text"])
def test_message_flood_is_reported_as_what_the_server_sent(message: bytes | str, kind: str) -> None:
    with FloodServer(message) as fs:
        sink, r, src = run(fs.port, stall_s=0.5)
    msg = src.fatal_message or ""
    assert "no_audio: no audio for" in msg and kind in msg and "stalled" not in msg, msg
    s = states(r)
    assert ("fatal", msg) in s and s[-1] == ("closed", msg)
    assert sink.samples.shape[0] == 0
    assert len([d for st, d in s if st == "warning"]) <= 10  # a text flood is summarised, not echoed per message
    assert all("\x1b" not in d for _, d in s)
