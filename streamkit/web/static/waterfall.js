// A scrolling spectrogram: time runs left to right (the right edge is the station's newest row),
// frequency bottom (0 Hz) to top (Nyquist). One canvas column per row (10 rows/s = 60 s in 600 px).
const STOPS = [[0, 0, 0, 0], [0.15, 0, 0, 80], [0.35, 0, 90, 200], [0.55, 0, 200, 200], [0.75, 255, 220, 0], [0.9, 255, 60, 0], [1, 255, 255, 255]];

function palette() {
  const lut = new Uint32Array(256);
  for (let i = 0; i < 256; i++) {
    const x = i / 255;
    let k = 1;
    while (k < STOPS.length - 1 && STOPS[k][0] < x) k++;
    const [x0, r0, g0, b0] = STOPS[k - 1], [x1, r1, g1, b1] = STOPS[k];
    const f = (x - x0) / (x1 - x0 || 1);
    const r = Math.round(r0 + f * (r1 - r0)), g = Math.round(g0 + f * (g1 - g0)), b = Math.round(b0 + f * (b1 - b0));
    lut[i] = (255 << 24) | (b << 16) | (g << 8) | r; // little-endian RGBA
  }
  return lut;
}
const LUT = palette();
const EMPTY = ((255 << 24) | (24 << 16) | (18 << 8) | 14) >>> 0;

export class Waterfall {
  constructor(canvas, { rowsPerS = 10, historyS = 60 } = {}) {
    this.canvas = canvas;
    this.ctx = canvas.getContext("2d", { willReadFrequently: true });
    this.w = canvas.width; this.h = canvas.height;
    this.rowsPerS = rowsPerS; this.historyS = historyS;
    this.cols = [];          // {t, px: Uint32Array(h)} oldest first
    this.now = null;         // time of the newest row (s, UTC)
    this.rows = 0;           // rows received
    this.nonBlankRows = 0;   // rows with any level above the floor
    this.dirty = false;
    this.image = this.ctx.createImageData(this.w, this.h);
    this.floor = null;       // auto contrast: a running estimate of the noise floor (quantised units)
    this.span = 127;         // levels shown from the floor up: 127 steps = 60 dB
  }

  // the colour of a quantised level: the noise floor dark blue, 60 dB above it white
  colour(v) {
    const i = Math.round(((v - this.floor) * 230) / this.span + 25);
    return LUT[i < 0 ? 0 : i > 255 ? 255 : i];
  }

  addRows(rows) {
    for (const r of rows) {
      if (!Number.isFinite(r.t)) continue;
      const n = r.levels.length, col = new Uint32Array(this.h);
      const q = Array.from(r.levels).sort((a, b) => a - b)[Math.floor(n * 0.3)];
      this.floor = this.floor === null ? q : this.floor + 0.05 * (q - this.floor);
      let any = false;
      for (let y = 0; y < this.h; y++) { // top pixel = highest frequency; a pixel shows the loudest of its bins
        const b0 = Math.floor(((this.h - 1 - y) * n) / this.h), b1 = Math.max(b0 + 1, Math.floor(((this.h - y) * n) / this.h));
        let v = 0;
        for (let b = b0; b < b1; b++) if (r.levels[b] > v) v = r.levels[b];
        if (v > 0) any = true;
        col[y] = this.colour(v);
      }
      this.rows++;
      if (any) this.nonBlankRows++;
      this.cols.push({ t: r.t, px: col });
      if (this.now === null || r.t > this.now) this.now = r.t;
    }
    const keep = this.now - this.historyS - 1;
    while (this.cols.length && this.cols[0].t < keep) this.cols.shift();
    this.dirty = true;
  }

  draw() {
    if (!this.dirty || this.now === null) return;
    this.dirty = false;
    const data = new Uint32Array(this.image.data.buffer);
    data.fill(EMPTY);
    const pxPerS = this.w / this.historyS;
    for (const c of this.cols) {
      const x = Math.round(this.w - 1 - (this.now - c.t) * pxPerS);
      if (x < 0 || x >= this.w) continue;
      for (let y = 0; y < this.h; y++) data[y * this.w + x] = c.px[y];
    }
    this.ctx.putImageData(this.image, 0, 0);
  }

  // Columns of the canvas that are not the empty background (what a viewer sees drawn)
  paintedColumns() {
    const img = this.ctx.getImageData(0, 0, this.w, this.h);
    const d = new Uint32Array(img.data.buffer);
    let n = 0;
    for (let x = 0; x < this.w; x++) {
      for (let y = 0; y < this.h; y++) { if (d[y * this.w + x] !== EMPTY && d[y * this.w + x] !== LUT[0]) { n++; break; } }
    }
    return n;
  }
}
