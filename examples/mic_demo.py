"""Live microphone: level meter and energy-VAD segments on the console (Ctrl-C to stop).

    python examples/mic_demo.py [device]
"""

import sys

from streamkit import Graph, RealTime, Runner
from streamkit.dsp import EnergyVAD, LevelMeter, Resample
from streamkit.io import ConsoleSink, MicSource


def main() -> None:
    device = sys.argv[1] if len(sys.argv) > 1 else None
    g = Graph("mic")
    mic = g.add(MicSource(device=device, channels=1), name="mic")
    g.chain(mic, g.add(Resample(to_hz=8000), name="rs"), g.add(LevelMeter(interval_s=0.1), name="level"), g.add(EnergyVAD(), name="vad"))
    g.subscribe(ConsoleSink())
    Runner(g, RealTime()).run()


if __name__ == "__main__":
    main()
