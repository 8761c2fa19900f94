"""Monitor one KiwiSDR channel from Python: Kiwi -> resample 8 kHz -> level -> energy VAD.

    python examples/live_sdr_monitor.py                       # the built-in emulator on loopback
    python examples/live_sdr_monitor.py kiwi.example.org 8073 7100 lsb

Public receivers are listed at kiwisdr.com; be polite: one channel, and stop when done.
"""

import sys

from streamkit import Graph, RealTime, Runner
from streamkit.dsp import EnergyVAD, LevelMeter, Resample
from streamkit.io import ConsoleSink, JsonlEventSink, KiwiSource


def main() -> None:
    emu = None
    if len(sys.argv) >= 4:
        host, port, freq = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
        mode = sys.argv[4] if len(sys.argv) > 4 else "lsb"
    else:
        from streamkit.io.kiwi_emulator import EmulatorThread

        emu = EmulatorThread()
        host, port, freq, mode = "127.0.0.1", emu.start(), 7100.0, "lsb"
    g = Graph(f"kiwi-{freq:g}")
    kiwi = g.add(KiwiSource(host=host, port=port, freq_khz=freq, mode=mode), name="kiwi")
    g.chain(kiwi, g.add(Resample(to_hz=8000), name="rs"), g.add(LevelMeter(interval_s=0.5), name="level"), g.add(EnergyVAD(), name="vad"))
    g.subscribe(JsonlEventSink(path="events/{graph}.jsonl"))
    g.subscribe(ConsoleSink())
    print(g.describe())
    try:
        Runner(g, RealTime(), duration=20.0).run()
    finally:
        if emu is not None:
            emu.stop()


if __name__ == "__main__":
    main()
