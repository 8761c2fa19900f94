"""Marker-based time alignment of a reception with its transmitted reference (pure functions).

* :mod:`~streamkit.dsp.align.detect`: markers found in the STFT domain (binary-mask correlation)
  and refined to a fraction of a sample on the waveform;
* :mod:`~streamkit.dsp.align.clock`: the sample-clock map (offset + ratio, i.e. the sampling-rate
  offset) fitted robustly to marker positions, and band-limited interpolation at arbitrary
  positions (the SRO compensation);
* :mod:`~streamkit.dsp.align.gcc`: GCC-PHAT delay estimation (Knapp & Carter).

The file-level pipeline (schedule, sanity checks, outputs) is :mod:`streamkit.data.alignment`.
"""
