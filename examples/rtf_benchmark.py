"""RT factor of a graph built in Python, per block, with the first call (warm-up) reported apart.

    python examples/rtf_benchmark.py
"""

from streamkit import FreeRun, Graph, Runner
from streamkit.cli.graphs import format_rtf_table
from streamkit.dsp import STFT, EnergyVAD, Highpass, Resample
from streamkit.io import DemoSignal


def main() -> None:
    g = Graph("rtf")
    src = g.add(DemoSignal(rate="12001.188", duration_s=120, seed=3), name="src")
    hp = g.add(Highpass(cutoff_hz=100), name="hp")
    rs = g.add(Resample(to_hz=8000), name="rs")
    g.chain(src, hp, rs, g.add(EnergyVAD(), name="vad"))
    g.connect(rs, g.add(STFT(n_fft=256, hop=80), name="stft"))  # fan-out: a feature branch
    st = Runner(g, FreeRun(), chunk_s=0.1).run()
    print(format_rtf_table(st))


if __name__ == "__main__":
    main()
