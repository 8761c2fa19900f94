// Binary frames of the live view (the format is documented in streamkit/web/frames.py).
export const ROWS = 1, AUDIO = 2, BATCH = 3, VERSION = 1;

// every rows/audio frame of a message (a batch holds one server tick's frames)
export function decodeAll(buf, gapCauses) {
  const dv = new DataView(buf);
  if (dv.getUint8(0) !== BATCH) return [decode(buf, gapCauses)];
  if (dv.getUint8(1) !== VERSION) throw new Error(`frame version ${dv.getUint8(1)}`);
  const n = dv.getUint16(2, true), out = [];
  let off = 4;
  for (let i = 0; i < n; i++) {
    const len = dv.getUint32(off, true);
    off += 4;
    if (off + len > buf.byteLength) throw new Error("batch part runs past the end");
    out.push(decode(buf.slice(off, off + len), gapCauses));
    off += len;
  }
  return out;
}

export function decode(buf, gapCauses) {
  const dv = new DataView(buf);
  const type = dv.getUint8(0), ver = dv.getUint8(1);
  if (ver !== VERSION) throw new Error(`frame version ${ver}`);
  if (type === ROWS) {
    const station = dv.getUint16(2, true), n = dv.getUint16(4, true), bins = dv.getUint16(6, true);
    const rows = [];
    let off = 8;
    for (let i = 0; i < n; i++) {
      const t = dv.getFloat64(off, true), lost = dv.getFloat32(off + 8, true);
      const flags = dv.getUint8(off + 12), cause = dv.getUint8(off + 13);
      rows.push({ t, lost, gap: (flags & 1) === 1, cause: gapCauses[cause] || "other", levels: new Uint8Array(buf, off + 14, bins) });
      off += 14 + bins;
    }
    return { type, station, rows };
  }
  if (type === AUDIO) {
    const station = dv.getUint16(2, true), n = dv.getUint32(4, true);
    const rate = dv.getFloat64(8, true), start = dv.getFloat64(16, true), lost = dv.getFloat32(24, true);
    const gap = (dv.getUint8(28) & 1) === 1;
    const pcm = new Int16Array(buf.slice(32, 32 + 2 * n));
    return { type, station, rate, start, lost, gap, pcm };
  }
  throw new Error(`unknown frame type ${type}`);
}
