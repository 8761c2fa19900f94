// streamkit live view: one card per station (spectrogram + timeline + meters), a station filter,
// an event log (search, download as JSONL) and click-to-listen. Text from the server is only ever
// set with textContent (never parsed as HTML).
import { decodeAll, ROWS, AUDIO } from "./frames.js";
import { Waterfall } from "./waterfall.js";
import { Timeline } from "./timeline.js";
import { Player } from "./player.js";

const $ = (sel, root = document) => root.querySelector(sel);
const token = new URLSearchParams(location.search).get("token");
const LOG_KEEP = 5000, LOG_SHOW = 400, SPEECH_NOW_S = 10, CLASS_RECENT_S = 60;

const state = {
  hello: null, stations: new Map(), log: [], kinds: new Set(), langs: new Set(), classes: new Set(),
  viewer: {}, conn: "connecting", ended: null, framesIn: 0, bytesIn: 0, badFrames: 0, errors: [],
  player: new Player(), logDirty: true,
};
window.streamkit = state; // for people poking at the page, and for the tests' browser

function connect() {
  const url = new URL("/ws", location.href);
  url.protocol = location.protocol === "https:" ? "wss:" : "ws:";
  if (token) url.searchParams.set("token", token);
  const ws = new WebSocket(url);
  ws.binaryType = "arraybuffer";
  state.ws = ws;
  ws.onopen = () => setConn("connected");
  ws.onclose = (e) => setConn(state.ended ? "run ended" : `disconnected${e.code === 1006 ? "" : ` (${e.code}${e.reason ? " " + e.reason : ""})`}`);
  ws.onerror = () => setConn("connection error");
  ws.onmessage = (e) => {
    state.framesIn++;
    if (typeof e.data === "string") { state.bytesIn += e.data.length; onText(JSON.parse(e.data)); return; }
    state.bytesIn += e.data.byteLength;
    let parts;
    try { parts = decodeAll(e.data, (state.hello && state.hello.gap_causes) || []); } catch (err) { state.badFrames++; return; }
    for (const f of parts) {
      const st = state.stations.get(f.station);
      if (f.type === ROWS && st) {
        st.wf.addRows(f.rows);
        for (const r of f.rows) if (r.gap) st.tl.addGap(r.t, r.lost, r.cause);
      } else if (f.type === AUDIO) {
        state.player.push(f);
      }
    }
  };
}

function setConn(text) {
  state.conn = text;
  const el = $("#conn");
  el.textContent = text;
  el.className = "pill " + (text === "connected" ? "streaming" : text === "run ended" ? "stopped" : "connecting");
}

function send(obj) { if (state.ws && state.ws.readyState === 1) state.ws.send(JSON.stringify(obj)); }

function onText(m) {
  if (m.type === "hello") {
    state.hello = m;
    for (const s of m.stations) ensureStation(s);
    if (m.ended) onEnd(m.ended);
  } else if (m.type === "events") {
    for (const ev of m.items) onEvent(ev);
  } else if (m.type === "status") {
    state.viewer = m.viewer || {};
    for (const s of m.stations) updateStatus(s);
    renderViewer();
    applyFilters();
    if (m.ended) onEnd(m.ended);
  } else if (m.type === "end") {
    onEnd(m.reason);
  } else if (m.type === "error") {
    state.errors.push(m.error);
  }
}

function onEnd(reason) {
  state.ended = reason;
  const el = $("#run");
  el.textContent = reason;
  el.className = "pill stopped";
}

function ensureStation(info) {
  let st = state.stations.get(info.index);
  if (st) { Object.assign(st.info, info); renderHead(st); return st; }
  const node = $("#station-tpl").content.firstElementChild.cloneNode(true);
  node.dataset.index = info.index;
  const hs = (state.hello && state.hello.history_s) || 60, rps = (state.hello && state.hello.rows_per_s) || 10;
  st = { info, node, status: {}, wf: new Waterfall($(".wf", node), { rowsPerS: rps, historyS: hs }), tl: new Timeline($(".tl", node), { historyS: hs }) };
  state.stations.set(info.index, st);
  $(".listen", node).addEventListener("click", () => toggleListen(st));
  const tl = $(".tl", node), tip = $(".tip", node);
  tl.addEventListener("mousemove", (e) => {
    const t = st.tl.tipAt(e.offsetX, e.offsetY);
    tip.hidden = !t;
    if (t) { tip.textContent = t; tip.style.left = `${Math.min(e.offsetX + 12, 380)}px`; tip.style.top = `${tl.offsetTop + e.offsetY + 14}px`; }
  });
  tl.addEventListener("mouseleave", () => { tip.hidden = true; });
  $("#stations").appendChild(node);
  renderHead(st);
  return st;
}

function renderHead(st) {
  const i = st.info;
  $(".name", st.node).textContent = i.name;
  const f = i.freq_khz != null ? `${Number(i.freq_khz).toFixed(2)} kHz` : "";
  $(".freq", st.node).textContent = [f, i.mode ? String(i.mode).toUpperCase() : "", i.host || ""].filter(Boolean).join(" · ");
}

function updateStatus(s) {
  const st = state.stations.get(s.index);
  if (!st) return;
  st.status = s;
  const n = st.node;
  const stEl = $(".state", n);
  stEl.textContent = s.state + (s.state === "reconnecting" && s.retry_in_s ? ` (${s.retry_in_s.toFixed(1)} s)` : "");
  stEl.className = `state pill ${s.state}`;
  $(".detail", n).textContent = s.detail || "";
  const sm = s.smeter_dbm, lv = s.level_dbfs;
  $(".smeter .bar", n).style.width = sm == null ? "0" : `${clamp((sm + 127) / 100, 0, 1) * 100}%`; // S0 ~ -127 dBm .. S9+40
  $(".smeter-val", n).textContent = sm == null ? "–" : `${sm.toFixed(1)} dBm`;
  $(".level .bar", n).style.width = lv == null ? "0" : `${clamp((lv + 90) / 90, 0, 1) * 100}%`;
  $(".level-val", n).textContent = lv == null ? "–" : `${lv.toFixed(1)} dBFS`;
  $(".rtf", n).textContent = s.rtf == null ? "" : `RT factor ${s.rtf.toFixed(4)}`;
  $(".gaps", n).textContent = `gaps ${s.gaps}` + (s.lost_s ? ` (${s.lost_s.toFixed(2)} s lost)` : "") +
    (s.rows_dropped ? `, ${s.rows_dropped} row(s) dropped by its shard` : "");
  $(".lang", n).textContent = s.lang ? `lang ${s.lang}` : "";
  $(".asr", n).textContent = s.partial ? `… ${s.partial}` : s.text ? `“${s.text}”` : "";
  if (s.lang) addOption("#f-lang", state.langs, s.lang);
  for (const c of Object.keys(s.classes || {})) addOption("#f-class", state.classes, c);
}

function onEvent(ev) {
  const st = state.stations.get(ev.station);
  if (st) st.tl.addEvent(ev);
  state.log.push(ev);
  if (state.log.length > LOG_KEEP) state.log.splice(0, state.log.length - LOG_KEEP);
  addOption("#log-kind", state.kinds, ev.kind);
  state.logDirty = true;
}

function addOption(sel, set, value) {
  if (set.has(value)) return;
  set.add(value);
  const o = document.createElement("option");
  o.value = value; o.textContent = value;
  $(sel).appendChild(o);
}

async function toggleListen(st) {
  const p = state.player;
  for (const s of state.stations.values()) s.node.classList.remove("listening");
  if (p.station === st.info.index) {
    await p.stop();
    send({ listen: null });
    $(".listen", st.node).textContent = "▶ listen";
    $("#listening").textContent = "";
    return;
  }
  for (const s of state.stations.values()) $(".listen", s.node).textContent = "▶ listen";
  const rate = st.status.rate || st.info.rate || 8000;
  await p.start(st.info.index, rate);
  send({ listen: st.info.index });
  st.node.classList.add("listening");
  $(".listen", st.node).textContent = "■ stop";
}

function renderViewer() {
  const v = state.viewer;
  const lost = (v.dropped_frames || 0) + (v.missed_rows || 0) + (v.missed_events || 0) + (v.missed_audio || 0);
  $("#viewer").textContent = `received ${(state.bytesIn / 1024).toFixed(0)} kB` + (lost ? ` · this view lost ${v.dropped_frames || 0} frame(s), ${v.missed_rows || 0} row(s), ${v.missed_events || 0} event(s), ${v.missed_audio || 0} audio chunk(s) (it fell behind)` : " · nothing lost");
  const p = state.player;
  if (p.station !== null && p.stats) {
    const s = p.stats;
    $("#listening").textContent = `listening: ${(s.played / p.rate || 0).toFixed(1)} s played, buffer ${((s.buffered || 0) / p.rate).toFixed(2)} s` + (p.gapsHeard ? `, ${p.gapsHeard} gap(s) heard as ${p.lostHeardS.toFixed(2)} s of silence` : "") + (s.underruns ? `, ${s.underruns} underrun(s)` : "");
  }
}

// --- filters -----------------------------------------------------------------------------------
function visible(st) {
  const s = st.status, now = st.wf.now;
  if ($("#f-speech").checked && !(s.speech_t != null && now != null && now - s.speech_t <= SPEECH_NOW_S)) return false;
  const lang = $("#f-lang").value;
  if (lang && s.lang !== lang) return false;
  const cls = $("#f-class").value;
  if (cls && !(s.classes && s.classes[cls] != null && now != null && now - s.classes[cls] <= CLASS_RECENT_S)) return false;
  const q = $("#f-name").value.trim().toLowerCase();
  if (q && !`${st.info.name} ${st.info.freq_khz ?? ""} ${st.info.mode ?? ""}`.toLowerCase().includes(q)) return false;
  return true;
}

let lastWatch = "";
function applyFilters() {
  const shown = [];
  for (const st of state.stations.values()) {
    const v = visible(st);
    st.node.hidden = !v;
    if (v) shown.push(st.info.index);
  }
  $("#f-count").textContent = `${shown.length} of ${state.stations.size} station(s)`;
  const all = shown.length === state.stations.size;
  const key = all ? "all" : shown.join(",");
  if (key !== lastWatch) { lastWatch = key; send({ watch: all ? null : shown }); }
}
for (const id of ["#f-speech", "#f-lang", "#f-class", "#f-name"]) $(id).addEventListener("input", applyFilters);

// --- event log ---------------------------------------------------------------------------------
function logMatches() {
  const q = $("#log-q").value.trim().toLowerCase(), kind = $("#log-kind").value;
  return state.log.filter((ev) => (!kind || ev.kind === kind) && (!q || logText(ev).toLowerCase().includes(q)));
}

function logText(ev) {
  const st = state.stations.get(ev.station);
  return `${st ? st.info.name : ev.stream} ${ev.kind} ${summary(ev)}`;
}

function summary(ev) {
  const p = ev.payload || {};
  switch (ev.kind) {
    case "vad.segment": return `${p.detector} speech ${fmtT(ev.t_start_ns)}–${fmtT(ev.t_end_ns)} (${((ev.t_end_ns - ev.t_start_ns) / 1e9).toFixed(2)} s, score ${(+p.score).toFixed(2)})`;
    case "asr.final": return `[${p.lang || "?"} ${(+p.confidence || 0).toFixed(2)}] ${p.text || ""}`;
    case "sed.detection": return `${p.label} ${(+p.confidence || 0).toFixed(2)}`;
    case "stream.gap": return `${p.cause}: lost ${p.lost ?? "?"} items ${p.detail ? "(" + p.detail + ")" : ""}`;
    case "source.state": return `${p.state} ${p.detail || ""}${p.retry_in_s ? ` (retry in ${p.retry_in_s.toFixed(1)} s)` : ""}`;
    default: return JSON.stringify(p).slice(0, 200);
  }
}

function clamp(x, lo, hi) { return Math.min(hi, Math.max(lo, x)); }

function fmtT(ns) { return ns == null ? "?" : new Date(ns / 1e6).toISOString().slice(11, 22); }

function renderLog() {
  if (!state.logDirty) return;
  state.logDirty = false;
  const rows = logMatches();
  $("#log-count").textContent = `${rows.length} of ${state.log.length} event(s)`;
  const body = document.createElement("tbody");
  for (const ev of rows.slice(-LOG_SHOW).reverse()) {
    const tr = document.createElement("tr");
    tr.className = "k-" + ev.kind.replace(/[^a-z0-9]/gi, "-");
    const st = state.stations.get(ev.station);
    for (const text of [fmtT(ev.t_start_ns ?? ev.emitted_ns), st ? st.info.name : ev.stream, ev.kind, summary(ev)]) {
      const td = document.createElement("td");
      td.textContent = text;
      tr.appendChild(td);
    }
    body.appendChild(tr);
  }
  $("#log-table tbody").replaceWith(body);
}
for (const id of ["#log-q", "#log-kind"]) $(id).addEventListener("input", () => { state.logDirty = true; });

function downloadLog() {
  const lines = logMatches().map((ev) => { const { station, ...rest } = ev; return JSON.stringify(rest); });
  const blob = new Blob([lines.join("\n") + (lines.length ? "\n" : "")], { type: "application/x-ndjson" });
  const a = document.createElement("a");
  a.href = URL.createObjectURL(blob);
  a.download = "streamkit-events.jsonl";
  document.body.appendChild(a); a.click(); a.remove();
  setTimeout(() => URL.revokeObjectURL(a.href), 10000);
}
$("#log-dl").addEventListener("click", downloadLog);

// --- drawing -----------------------------------------------------------------------------------
function frame() {
  for (const st of state.stations.values()) {
    if (st.node.hidden) continue;
    st.wf.draw();
    st.tl.draw(st.wf.now);
    if (st.wf.now !== null) {
      $(".t0", st.node).textContent = `−${st.wf.historyS} s`;
      $(".t1", st.node).textContent = `${new Date(st.wf.now * 1000).toISOString().slice(11, 19)} UTC`;
    }
  }
  renderLog();
  requestAnimationFrame(frame);
}

// what the tests' browser reads (and a quick look for people)
state.snapshot = () => ({
  conn: state.conn, ended: state.ended, viewer: state.viewer, framesIn: state.framesIn, bytesIn: state.bytesIn, badFrames: state.badFrames,
  audio: { station: state.player.station, ...state.player.stats, gapsHeard: state.player.gapsHeard, lostHeardS: state.player.lostHeardS, contextState: state.player.ctx ? state.player.ctx.state : null },
  log: state.log.length,
  stations: [...state.stations.values()].map((st) => ({
    index: st.info.index, name: st.info.name, state: st.status.state, hidden: st.node.hidden, rows: st.wf.rows, nonBlankRows: st.wf.nonBlankRows,
    painted: st.node.hidden ? null : st.wf.paintedColumns(),
    segments: st.tl.order.filter((n) => n.startsWith("speech")).flatMap((n) => st.tl.items(n).map((i) => ({ lane: n, t0: i.t0, t1: i.t1 }))),
    gaps: st.tl.items("gaps").map((i) => ({ t0: i.t0, t1: i.t1, cause: i.cause, lost: i.lost })),
  })),
});

setConn("connecting");
connect();
requestAnimationFrame(frame);
