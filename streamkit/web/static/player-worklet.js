// AudioWorklet: plays a station's audio from a ring buffer, gaplessly. The main thread posts
// {samples: Float32Array} in stream order and {silence: n} for audio lost in the stream (heard as
// silence, in time). An empty buffer plays silence too (an underrun, counted) and waits for
// `prebuffer` samples before it plays again. The input rate may differ from the context's: a
// linear interpolator steps through the input at inRate / sampleRate.
class StreamkitPlayer extends AudioWorkletProcessor {
  constructor(options) {
    super();
    const o = options.processorOptions || {};
    this.inRate = o.inRate || sampleRate;
    this.step = this.inRate / sampleRate;
    this.buf = new Float32Array(Math.ceil(this.inRate * 8));
    this.r = 0; this.w = 0; this.n = 0; this.frac = 0;
    this.prebuffer = Math.round(this.inRate * (o.prebufferS || 0.3));
    this.playing = false;
    this.stats = { received: 0, played: 0, silenceInserted: 0, underruns: 0, overflow: 0, nonZero: 0 };
    this.lastReport = 0;
    this.port.onmessage = (e) => {
      const d = e.data;
      if (d.samples) this.write(d.samples);
      else if (d.silence) { this.write(new Float32Array(d.silence)); this.stats.silenceInserted += d.silence; }
    };
  }

  write(x) {
    this.stats.received += x.length;
    for (let i = 0; i < x.length; i++) {
      if (this.n === this.buf.length) { this.r = (this.r + 1) % this.buf.length; this.n--; this.stats.overflow++; }
      this.buf[this.w] = x[i];
      this.w = (this.w + 1) % this.buf.length;
      this.n++;
    }
  }

  process(inputs, outputs) {
    const out = outputs[0][0];
    if (!this.playing && this.n >= this.prebuffer) this.playing = true;
    for (let i = 0; i < out.length; i++) {
      if (!this.playing || this.n < 2) {
        if (this.playing) { this.playing = false; this.stats.underruns++; }
        out[i] = 0;
        continue;
      }
      const a = this.buf[this.r], b = this.buf[(this.r + 1) % this.buf.length];
      const v = a + (b - a) * this.frac;
      out[i] = v;
      if (v !== 0) this.stats.nonZero++;
      this.frac += this.step;
      while (this.frac >= 1) { this.frac -= 1; this.r = (this.r + 1) % this.buf.length; this.n--; this.stats.played++; }
    }
    for (let ch = 1; ch < outputs[0].length; ch++) outputs[0][ch].set(out);
    if (currentTime - this.lastReport > 0.25) {
      this.lastReport = currentTime;
      this.port.postMessage({ ...this.stats, buffered: this.n, playing: this.playing });
    }
    return true;
  }
}
registerProcessor("streamkit-player", StreamkitPlayer);
