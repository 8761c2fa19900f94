// Click to listen: a station's live audio through the Web Audio API (an AudioWorklet, player-worklet.js).
export class Player {
  constructor() { this.ctx = null; this.node = null; this.station = null; this.expect = null; this.stats = {}; this.gapsHeard = 0; this.lostHeardS = 0; this.rate = null; }

  async start(station, rate) {
    await this.stop();
    let ctx;
    try { ctx = new AudioContext({ sampleRate: rate, latencyHint: "playback" }); }
    catch (e) { ctx = new AudioContext({ latencyHint: "playback" }); } // the worklet resamples
    await ctx.audioWorklet.addModule("/static/player-worklet.js");
    const node = new AudioWorkletNode(ctx, "streamkit-player", { numberOfInputs: 0, outputChannelCount: [1], processorOptions: { inRate: rate, prebufferS: 0.4 } });
    node.port.onmessage = (e) => { this.stats = e.data; };
    node.connect(ctx.destination);
    if (ctx.state !== "running") await ctx.resume();
    this.ctx = ctx; this.node = node; this.station = station; this.rate = rate; this.expect = null;
    this.stats = {}; this.gapsHeard = 0; this.lostHeardS = 0;
  }

  async stop() {
    if (this.ctx) { const c = this.ctx; this.ctx = null; this.node = null; await c.close().catch(() => {}); }
    this.station = null;
  }

  // one decoded audio frame: lost audio (a gap in the stream, or frames this viewer missed) is played as silence
  push(f) {
    if (!this.node || f.station !== this.station) return 0;
    let silence = 0;
    if (f.gap && f.lost > 0) silence += Math.round(f.lost * f.rate);
    if (this.expect !== null && f.start > this.expect) silence += f.start - this.expect;
    if (silence > 0) {
      this.gapsHeard++; this.lostHeardS += silence / f.rate;
      this.node.port.postMessage({ silence: Math.min(silence, Math.round(f.rate * 5)) });
    }
    const x = new Float32Array(f.pcm.length);
    for (let i = 0; i < x.length; i++) x[i] = f.pcm[i] / 32768;
    this.node.port.postMessage({ samples: x }, [x.buffer]);
    this.expect = f.start + f.pcm.length;
    return silence;
  }
}
