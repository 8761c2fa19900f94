// streamkit live view: the search box over the archive index (`monitor --record DIR --index IDX`).
// Shown only when the server has an index (/api/stations says `search: true`). A hit plays on click:
// its audio comes from /api/clip as WAV, into an <audio> element. Text from the server is only ever
// set with textContent (never parsed as HTML).
const $ = (sel) => document.querySelector(sel);
const token = new URLSearchParams(location.search).get("token");

function api(path, params) {
  const url = new URL(path, location.href);
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== "") url.searchParams.set(k, v);
  if (token) url.searchParams.set("token", token);
  return url;
}

function cell(tr, text) {
  const td = document.createElement("td");
  td.textContent = text;
  tr.appendChild(td);
  return td;
}

function play(hit, tr) {
  const audio = $("#search-audio");
  for (const r of document.querySelectorAll("#search-table tr.playing")) r.classList.remove("playing");
  tr.classList.add("playing");
  audio.hidden = false;
  audio.src = api("/api/clip", { file: hit.file, start: hit.start_sample, end: hit.end_sample }).toString();
  audio.play().catch(() => {}); // a browser that wants a gesture first still shows the controls
  window.streamkitSearch.playing = hit;
}

function show(res) {
  const body = $("#search-table tbody");
  body.replaceChildren();
  for (const h of res.hits) {
    const tr = document.createElement("tr");
    const btn = document.createElement("button");
    btn.type = "button";
    btn.textContent = "▶";
    btn.title = "play this hit";
    btn.addEventListener("click", () => play(h, tr));
    tr.appendChild(document.createElement("td")).appendChild(btn);
    cell(tr, h.score.toFixed(3));
    cell(tr, h.station || h.file);
    cell(tr, h.utc_start ? h.utc_start.replace("T", " ").replace("Z", "") : `+${h.start_s.toFixed(1)} s`);
    cell(tr, `${h.kind}${h.label ? " " + h.label : ""} ${(h.end_s - h.start_s).toFixed(1)} s`);
    cell(tr, h.transcript ? h.transcript.slice(0, 200) : "");
    tr.addEventListener("dblclick", () => play(h, tr));
    body.appendChild(tr);
  }
  const understood = res.classes.length ? res.classes.join(", ") : "no sound class";
  $("#search-status").textContent = `${res.hits.length} hit(s) of ${res.candidates} entries (${understood}; ${Math.round(res.seconds * 1000)} ms)`;
}

async function run(ev) {
  ev.preventDefault();
  const q = $("#search-q").value.trim();
  if (!q) return;
  $("#search-status").textContent = "searching…";
  try {
    const r = await fetch(api("/api/search", { q, top: 20, station: $("#search-station").value.trim() }));
    const text = await r.text();
    if (!r.ok) { $("#search-status").textContent = `search failed (${r.status}): ${text.trim()}`; return; }
    const res = JSON.parse(text);
    window.streamkitSearch.result = res;
    show(res);
  } catch (err) {
    $("#search-status").textContent = `search failed: ${err}`;
  }
}

async function init() {
  window.streamkitSearch = { result: null, playing: null };
  try {
    const r = await fetch(api("/api/stations", {}));
    if (!r.ok || !(await r.json()).search) return;
  } catch (err) { return; }
  $("#search").hidden = false;
  $("#search-form").addEventListener("submit", run);
}

init();
