// The timeline under a station's spectrogram: one lane per speech detector, ASR finals, sound
// events and gaps, on the same time axis (the right edge is the station's newest row).
const COLORS = { energy: "#5bd17a", stat: "#3fc1c9", dnn: "#a48bff", asr: "#4fb3ff", sed: "#ffb347", gap: "#ff5b5b" };
const LANE_H = 12, GAP_Y = 2;

export class Timeline {
  constructor(canvas, { historyS = 60 } = {}) {
    this.canvas = canvas;
    this.ctx = canvas.getContext("2d");
    this.w = canvas.width; this.h = canvas.height;
    this.historyS = historyS;
    this.lanes = new Map(); // name -> items [{t0, t1, color, label, tip}]
    this.order = [];
    this.keepS = historyS * 5;
  }

  lane(name) {
    if (!this.lanes.has(name)) {
      this.lanes.set(name, []);
      // speech lanes first, then asr, events, gaps
      const rank = (n) => (n.startsWith("speech") ? 0 : n === "asr" ? 1 : n === "events" ? 2 : 3);
      this.order = [...this.lanes.keys()].sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
      this.h = this.canvas.height = Math.max(LANE_H + 2 * GAP_Y, GAP_Y + this.order.length * (LANE_H + 2));
    }
    return this.lanes.get(name);
  }

  add(laneName, item) {
    const items = this.lane(laneName);
    items.push(item);
    const keep = item.t1 - this.keepS;
    while (items.length && items[0].t1 < keep) items.shift();
    this.dirty = true;
  }

  // one live event (as the server sends it: event_to_dict + station)
  addEvent(ev) {
    const p = ev.payload || {};
    const t0 = ev.t_start_ns != null ? ev.t_start_ns / 1e9 : null, t1 = ev.t_end_ns != null ? ev.t_end_ns / 1e9 : t0;
    if (t0 === null) return;
    if (ev.kind === "vad.segment") {
      const det = p.detector || "?";
      this.add(`speech ${det}`, { t0, t1, color: COLORS[det] || "#5bd17a", label: "", tip: `speech (${det}) ${(t1 - t0).toFixed(2)} s, score ${num(p.score)}` });
    } else if (ev.kind === "asr.final") {
      this.add("asr", { t0, t1, color: COLORS.asr, label: p.text || "", tip: `ASR [${p.lang || "?"} ${num(p.confidence)}] ${p.text || ""}` });
    } else if (ev.kind === "sed.detection") {
      this.add("events", { t0, t1, color: COLORS.sed, label: p.label || "", tip: `${p.label} ${num(p.confidence)} (${(t1 - t0).toFixed(1)} s)` });
    }
  }

  // a gap as the waterfall rows carry it: lost_s seconds lost just before time t
  addGap(t, lostS, cause) {
    this.add("gaps", { t0: t - lostS, t1: t, color: COLORS.gap, label: "", tip: `gap: ${cause}, ${lostS.toFixed(3)} s lost`, cause, lost: lostS });
  }

  items(name) { return this.lanes.get(name) || []; }

  draw(now) {
    if (now === null || now === undefined) return;
    const c = this.ctx, pxPerS = this.w / this.historyS;
    c.clearRect(0, 0, this.w, this.h);
    c.font = "9px system-ui, sans-serif";
    this.boxes = [];
    this.order.forEach((name, i) => {
      const y = GAP_Y + i * (LANE_H + 2);
      if (y + LANE_H > this.h) return;
      c.fillStyle = "#161b22";
      c.fillRect(0, y, this.w, LANE_H);
      for (const it of this.lanes.get(name)) {
        let x0 = this.w - (now - it.t0) * pxPerS, x1 = this.w - (now - it.t1) * pxPerS;
        if (x1 < 0 || x0 > this.w) continue;
        if (x1 - x0 < 2) { x0 -= 1; x1 = x0 + 2; }
        c.fillStyle = it.color;
        c.fillRect(x0, y, x1 - x0, LANE_H);
        if (it.label && x1 - x0 > 20) {
          c.fillStyle = "#000";
          c.save(); c.beginPath(); c.rect(x0, y, x1 - x0, LANE_H); c.clip();
          c.fillText(it.label, x0 + 2, y + LANE_H - 3);
          c.restore();
        }
        this.boxes.push({ x0, x1, y0: y, y1: y + LANE_H, tip: it.tip });
      }
      c.fillStyle = "#8894a3";
      c.fillText(name, 2, y + LANE_H - 3);
    });
  }

  tipAt(x, y) {
    for (const b of this.boxes || []) if (x >= b.x0 && x <= b.x1 && y >= b.y0 && y <= b.y1) return b.tip;
    return null;
  }
}

function num(x) { return typeof x === "number" ? x.toFixed(2) : "?"; }
