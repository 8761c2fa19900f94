"""streamkit.dsp/kernels."""
