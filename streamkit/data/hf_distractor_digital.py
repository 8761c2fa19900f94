"""Digital and keyed HF modes as an SSB receiver hears them (audio, 300-3000 Hz passband).

Each generator is ``gen(n, rng, rate=8000, **overrides) -> (audio float64 (n,), info dict)``;
every random parameter is drawn from ``rng`` unless given as a keyword, and ``info`` records the
values used (JSON-able). Amplitudes are nominal (peak about 1); the caller sets the level
(:func:`streamkit.data.hf_distractors.distractor`).

* :func:`cw`: Morse (real dit/dah/space timing, 12-35 WPM, hand or machine keying) on a 400-900 Hz
  tone with raised-cosine key edges, a little key-down chirp and slow drift.
* :func:`rtty`: 170 Hz FSK at 45.45 Bd, 5-bit ITA2 characters with start and 1.5 stop bits,
  continuous phase.
* :func:`psk31`: 31.25 Bd BPSK, cosine-shaped amplitude through each phase reversal, varicode.
* :func:`ft8`, :func:`ft4`: 8-FSK 6.25 Hz / 0.16 s (79 symbols = 12.64 s in 15 s slots) and
  4-FSK 20.83 Hz / 0.048 s (103 symbols in 7.5 s slots), Gaussian-smoothed frequency, Costas sync
  blocks, several stations at once.
* :func:`ofdm`: a FreeDV 700D / codec2 datac-like multi-carrier modem: 16-30 QPSK carriers
  spaced ``1/Ts``, a cyclic prefix, a BPSK pilot row every 8 symbols.
* :func:`sstv`: Martin 1/2, Scottie 1/2 and Robot 36 lines (1200 Hz sync, 1500-2300 Hz
  luminance) of a random smooth image, optionally with the VIS header.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from streamkit.data.hf_distractor_dsp import fm, gauss_smooth, hold, keyed_envelope, ramp, random_walk, times

__all__ = ["cw", "ft4", "ft8", "ofdm", "psk31", "rtty", "sstv"]

Info = dict[str, Any]

MORSE = {
    "A": ".-", "B": "-...", "C": "-.-.", "D": "-..", "E": ".", "F": "..-.", "G": "--.", "H": "....", "I": "..", "J": ".---",
    "K": "-.-", "L": ".-..", "M": "--", "N": "-.", "O": "---", "P": ".--.", "Q": "--.-", "R": ".-.", "S": "...", "T": "-",
    "U": "..-", "V": "...-", "W": ".--", "X": "-..-", "Y": "-.--", "Z": "--..", "0": "-----", "1": ".----", "2": "..---",
    "3": "...--", "4": "....-", "5": ".....", "6": "-....", "7": "--...", "8": "---..", "9": "----.", "/": "-..-.",
    "?": "..--..", "=": "-...-", ",": "--..--",
}  # fmt: skip

#: ITA2 letter codes, bits in transmission order (1 = mark)
ITA2 = {
    "A": "11000", "B": "10011", "C": "01110", "D": "10010", "E": "10000", "F": "10110", "G": "01011", "H": "00101",
    "I": "01100", "J": "11010", "K": "11110", "L": "01001", "M": "00111", "N": "00110", "O": "00011", "P": "01101",
    "Q": "11101", "R": "01010", "S": "10100", "T": "00001", "U": "11100", "V": "01111", "W": "11001", "X": "10111",
    "Y": "10101", "Z": "10001", " ": "00100", "\r": "01000", "\n": "00010",
}  # fmt: skip

#: PSK31 varicode of the lower-case letters and space (characters are separated by "00")
VARICODE = {
    " ": "1", "e": "11", "t": "101", "o": "111", "a": "1011", "i": "1101", "n": "1111", "r": "10101", "s": "10111",
    "l": "11011", "h": "101011", "d": "101101", "c": "101111", "u": "110111", "m": "111011", "f": "111101",
    "p": "111111", "g": "1011011", "y": "1011101", "b": "1011111", "w": "1101011", "k": "10111111", "v": "11110111",
    "x": "11011111", "j": "111101011", "q": "110111111", "z": "111010101",
}  # fmt: skip

WORDS = ("name", "here", "rig", "ant", "dipole", "wx", "sunny", "rain", "temp", "report", "thanks", "qso", "best", "regards", "power",
         "watts", "band", "condx", "good", "hope", "see", "you", "again", "test", "contest", "grid", "locator", "vy", "fb", "om")  # fmt: skip


def _draw(kw: dict[str, Any], key: str, fn: Any) -> Any:
    return kw[key] if key in kw else fn()


def callsign(rng: np.random.Generator) -> str:
    """A plausible amateur callsign (1-2 letter prefix, digit, 1-3 letter suffix)."""
    L = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    pre = "".join(L[i] for i in rng.integers(0, 26, int(rng.integers(1, 3))))
    suf = "".join(L[i] for i in rng.integers(0, 26, int(rng.integers(1, 4))))
    return f"{pre}{int(rng.integers(0, 10))}{suf}"


def _qso_text(rng: np.random.Generator) -> str:
    a, b = callsign(rng), callsign(rng)
    words = " ".join(WORDS[i] for i in rng.integers(0, len(WORDS), 6))
    forms = [
        f"CQ CQ CQ DE {a} {a} {a} K",
        f"{b} DE {a} TNX FER CALL UR RST 599 599 {words} {b} DE {a} KN",
        f"CQ TEST {a} {a} TEST",
        f"{b} 5NN {int(rng.integers(1, 999)):03d} TU {a}",
        " ".join("".join("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"[i] for i in rng.integers(0, 36, 5)) for _ in range(8)),
    ]
    return forms[int(rng.integers(len(forms)))].upper()


# ----------------------------------------------------------------------------------------- CW
def cw(n: int, rng: np.random.Generator, rate: int = 8000, **kw: Any) -> tuple[np.ndarray, Info]:
    """Morse code: dit = 1.2/WPM s, dah = ``dah_ratio`` dits, 1 dit between elements, 3 between
    characters, 7 between words (``spacing`` ≥ 1 stretches the character and word gaps). A hand
    key jitters every element (σ 8-15 %); a keyer 1 %. The tone chirps by ``chirp_hz`` at each
    key-down (decaying with ``chirp_ms``) and drifts linearly."""
    wpm = float(_draw(kw, "wpm", lambda: rng.uniform(12, 35)))
    tone = float(_draw(kw, "tone_hz", lambda: rng.uniform(400, 900)))
    hand = bool(_draw(kw, "hand", lambda: rng.random() < 0.35))
    dah = float(_draw(kw, "dah_ratio", lambda: rng.uniform(2.7, 3.6) if hand else 3.0))
    jit = float(_draw(kw, "jitter", lambda: rng.uniform(0.08, 0.15) if hand else 0.01))
    spacing = float(_draw(kw, "spacing", lambda: rng.uniform(1.0, 1.6) if hand else 1.0))
    rise = float(_draw(kw, "rise_ms", lambda: rng.uniform(3, 8))) * 1e-3
    chirp = float(_draw(kw, "chirp_hz", lambda: rng.uniform(0, 25) * (rng.random() < 0.4)))
    chirp_tau = float(_draw(kw, "chirp_ms", lambda: rng.uniform(5, 30))) * 1e-3
    drift = float(_draw(kw, "drift_hz_s", lambda: rng.normal(0, 0.5)))
    t0 = float(_draw(kw, "start_s", lambda: rng.uniform(0.0, 0.5)))
    unit = 1.2 / wpm
    states: list[float] = []
    units: list[float] = []
    texts: list[str] = []
    while sum(units) * unit < n / rate - t0 + 1.0:
        text = _qso_text(rng) if "text" not in kw else str(kw["text"]).upper()
        if not any(ch in MORSE for ch in text):
            raise ValueError(f"cw text {text!r} has no Morse character")
        texts.append(text)
        for word in text.split():
            for ch in word:
                for sym in MORSE.get(ch, ""):
                    states += [1.0, 0.0]
                    units += [1.0 if sym == "." else dah, 1.0]
                if units:
                    units[-1] = 3.0 * spacing  # character gap
            if units:
                units[-1] = 7.0 * spacing  # word gap
    d = np.asarray(units) * unit * np.clip(rng.normal(1.0, jit, len(units)), 0.5, 1.5)
    key = hold(states, d, n, rate, t0)
    env = keyed_envelope(key, rise, rate)
    t = times(n, rate)
    on = np.flatnonzero(np.diff(key, prepend=0.0) > 0)
    last = np.zeros(n, np.int64)
    last[on] = on
    since = (np.arange(n) - np.maximum.accumulate(last)) / rate
    freq = tone + drift * t + chirp * np.exp(-since / chirp_tau)
    x = env * fm(freq, rate, rng.uniform(0, 2 * np.pi))
    info = {"wpm": round(wpm, 3), "dit_s": round(unit, 5), "tone_hz": round(tone, 2), "hand": hand, "dah_ratio": round(dah, 3),
            "jitter": round(jit, 3), "rise_ms": round(rise * 1e3, 2), "chirp_hz": round(chirp, 2), "drift_hz_s": round(drift, 3),
            "text": " / ".join(texts)[:200]}  # fmt: skip
    return x, info


# --------------------------------------------------------------------------------------- RTTY
def rtty(n: int, rng: np.random.Generator, rate: int = 8000, **kw: Any) -> tuple[np.ndarray, Info]:
    """Radioteletype: AFSK mark/space ``shift_hz`` apart (170) around ``center_hz``, ``baud``
    (45.45) bits; each character = start bit (space), 5 ITA2 bits, 1.5 stop bits (mark); idle
    mark between lines; the frequency is continuous-phase with ~1.5 ms smoothed transitions."""
    baud = float(_draw(kw, "baud", lambda: 45.45))
    shift = float(_draw(kw, "shift_hz", lambda: 170.0))
    fc = float(_draw(kw, "center_hz", lambda: rng.uniform(700, 2500)))
    inv = bool(_draw(kw, "reverse", lambda: rng.random() < 0.2))
    t0 = float(_draw(kw, "start_s", lambda: rng.uniform(0.0, 0.3)))
    bit = 1.0 / baud
    vals: list[float] = [1.0]
    durs: list[float] = [float(rng.uniform(0.1, 0.6))]  # carrier (mark) before the text
    while sum(durs) < n / rate - t0 + 1.0:
        line = "RYRYRYRY " if rng.random() < 0.2 else _qso_text(rng)
        for ch in line + "\r\n":
            code = ITA2.get(ch, ITA2[" "])
            vals += [0.0, *(float(b) for b in code), 1.0]
            durs += [bit] * 6 + [1.5 * bit]
        if rng.random() < 0.5:
            vals.append(1.0)
            durs.append(float(rng.uniform(0.05, 0.8)))  # idle mark between lines
    mark = hold(vals, durs, n, rate, t0, fill=1.0)
    sign = -1.0 if inv else 1.0
    freq = gauss_smooth(fc + sign * shift * (mark - 0.5), 0.0015, rate)
    x = fm(freq, rate, rng.uniform(0, 2 * np.pi)) * ramp(n, int(0.004 * rate))
    info = {
        "baud": baud,
        "shift_hz": shift,
        "mark_hz": round(fc + sign * shift / 2, 2),
        "space_hz": round(fc - sign * shift / 2, 2),
        "start_s": round(t0, 4),
    }
    return x, info


# -------------------------------------------------------------------------------------- PSK31
def psk31(n: int, rng: np.random.Generator, rate: int = 8000, **kw: Any) -> tuple[np.ndarray, Info]:
    """BPSK at ``baud`` (31.25): a 0 bit reverses the phase, a 1 keeps it; through a reversal the
    amplitude follows ``cos(pi tau / T)`` (zero in the middle of the symbol), so the envelope dips
    at multiples of the symbol period. Preamble of reversals, varicode text with "00" separators,
    a short steady-carrier postamble; slow carrier drift."""
    baud = float(_draw(kw, "baud", lambda: 31.25))
    fc = float(_draw(kw, "carrier_hz", lambda: rng.uniform(500, 2500)))
    t0 = float(_draw(kw, "start_s", lambda: rng.uniform(0.0, 0.3)))
    need = max(2, int(math.ceil((n / rate - t0) * baud)) + 2)
    bits: list[str] = ["0" * int(rng.integers(16, 48))]
    have = len(bits[0])
    while have < need:
        words = " ".join([callsign(rng).lower(), *(WORDS[i] for i in rng.integers(0, len(WORDS), int(rng.integers(3, 12))))]) + " "
        code = "".join(VARICODE.get(c, "1") + "00" for c in words)
        post = "1" * int(rng.integers(0, 32)) + "0" * int(rng.integers(8, 32))
        bits += [code, post]
        have += len(code) + len(post)
    b = np.frombuffer("".join(bits).encode()[:need], np.uint8) - ord("0")
    lev = np.cumprod(np.where(b == 0, -1.0, 1.0))  # symbol levels (0 = reversal)
    prev = np.concatenate(([1.0], lev[:-1]))
    u = (times(n, rate) - t0) * baud
    k = np.clip(np.floor(u).astype(np.int64), 0, need - 1)
    tau = np.clip(u - np.floor(u), 0.0, 1.0)
    base = np.where(lev[k] != prev[k], prev[k] * np.cos(np.pi * tau), lev[k])
    base[u < 0] = 0.0
    drift = random_walk(rng, n, rate, 1.0, 0.3)
    x = base * fm(fc + drift, rate, rng.uniform(0, 2 * np.pi))
    return x, {"baud": baud, "carrier_hz": round(fc, 2), "start_s": round(t0, 4)}


# ------------------------------------------------------------------------------------ FT8/FT4
COSTAS8 = (3, 1, 4, 0, 6, 5, 2)
COSTAS4 = ((0, 1, 3, 2), (1, 0, 2, 3), (2, 3, 1, 0), (3, 2, 0, 1))


def _mfsk_slots(n: int, rng: np.random.Generator, rate: int, kw: dict[str, Any], *, tones: int, spacing: float, sym_s: float,
                n_sym: int, slot_s: float, bt: float, sync: Any, max_stations: int, f_lo: float) -> tuple[np.ndarray, Info]:  # fmt: skip
    """WSJT-X-like slotted MFSK: ``stations`` signals, each in even or odd ``slot_s`` slots starting
    0.5 s (+ clock error) after the slot edge; continuous-phase GFSK with bandwidth-time ``bt``."""
    k = int(_draw(kw, "stations", lambda: rng.integers(1, max_stations + 1)))
    phase_s = float(_draw(kw, "slot_phase_s", lambda: rng.uniform(0, slot_s)))  # where the segment starts in the slot grid
    bw = tones * spacing
    x = np.zeros(n)
    t = times(n, rate, phase_s)
    sig = math.sqrt(math.log(2)) / (2 * math.pi * bt / sym_s)
    st = []
    for s in range(k):
        f0 = float(kw["base_hz"]) if "base_hz" in kw and s == 0 else float(rng.uniform(f_lo, 2900 - bw))
        # station 0 always sends in the slot around the middle of the segment; the others in random slots
        parity = int(rng.integers(2)) if s else int(math.floor((phase_s + n / rate / 2 - 0.5) / slot_s)) % 2
        dt = float(rng.normal(0.0, 0.2))
        amp = 10 ** (rng.uniform(-20, 0) / 20) if s else 1.0
        first = int(math.floor(phase_s / slot_s)) - 1
        for slot in range(first, first + int(n / rate / slot_s) + 3):
            if slot % 2 != parity:
                continue
            ts = slot * slot_s + 0.5 + dt
            i0 = max(0, int(math.floor((ts - phase_s) * rate)))
            i1 = min(n, int(math.ceil((ts + n_sym * sym_s - phase_s) * rate)))
            if i1 <= i0 or (s and rng.random() < 0.15):  # a station does not call in every slot
                continue
            sym = rng.integers(0, tones, n_sym)
            for pos, pat in sync:
                sym[pos : pos + len(pat)] = pat
            tt = t[i0:i1] - ts
            tone = sym[np.clip(np.floor(tt / sym_s).astype(np.int64), 0, n_sym - 1)].astype(float)
            f = f0 + spacing * gauss_smooth(tone, sig, rate)
            env = np.clip(np.minimum(tt, n_sym * sym_s - tt) / (sym_s / 8), 0.0, 1.0)
            env = 0.5 * (1 - np.cos(np.pi * env))
            x[i0:i1] += amp * env * fm(f, rate, rng.uniform(0, 2 * np.pi))
        st.append({"base_hz": round(f0, 2), "parity": parity, "dt_s": round(dt, 3), "rel_db": round(20 * math.log10(amp), 2)})
    return x, {"tones": tones, "spacing_hz": spacing, "symbol_s": sym_s, "symbols": n_sym, "slot_s": slot_s, "slot_phase_s": round(phase_s, 3),
               "stations": st}  # fmt: skip


def ft8(n: int, rng: np.random.Generator, rate: int = 8000, **kw: Any) -> tuple[np.ndarray, Info]:
    """FT8-like: 8-FSK, 6.25 Hz spacing, 0.16 s symbols, 79 symbols (12.64 s) per 15 s slot, GFSK
    BT 2, Costas 7×7 sync at symbols 0, 36 and 72; 1-10 stations across 200-2900 Hz."""
    sync = [(0, COSTAS8), (36, COSTAS8), (72, COSTAS8)]
    return _mfsk_slots(n, rng, rate, kw, tones=8, spacing=6.25, sym_s=0.16, n_sym=79, slot_s=15.0, bt=2.0, sync=sync, max_stations=10, f_lo=200.0)


def ft4(n: int, rng: np.random.Generator, rate: int = 8000, **kw: Any) -> tuple[np.ndarray, Info]:
    """FT4-like: 4-FSK, 20.833 Hz spacing, 0.048 s symbols, 103 symbols (4.94 s) per 7.5 s slot,
    GFSK BT 1, four 4-symbol Costas blocks; 1-6 stations."""
    sync = [(0, COSTAS4[0]), (33, COSTAS4[1]), (66, COSTAS4[2]), (99, COSTAS4[3])]
    return _mfsk_slots(n, rng, rate, kw, tones=4, spacing=12000 / 576, sym_s=0.048, n_sym=103, slot_s=7.5, bt=1.0, sync=sync, max_stations=6,
                       f_lo=200.0)  # fmt: skip


# --------------------------------------------------------------------------------------- OFDM
def ofdm(n: int, rng: np.random.Generator, rate: int = 8000, **kw: Any) -> tuple[np.ndarray, Info]:
    """FreeDV 700D / codec2 datac-like OFDM: ``carriers`` (16-30) QPSK carriers at multiples of
    ``1/ts`` (ts 16-20 ms: 62.5-50 Hz spacing) centred at 1000-1900 Hz inside 350-2800 Hz, a cyclic prefix of
    ``tcp`` (2-6 ms), a known BPSK pilot symbol every 8 symbols (FreeDV's Ns = 8)."""
    nc = int(_draw(kw, "carriers", lambda: rng.integers(16, 31)))
    ts = float(_draw(kw, "ts", lambda: float(rng.choice([0.016, 0.018, 0.020]))))
    tcp = float(_draw(kw, "tcp", lambda: float(rng.choice([0.002, 0.004, 0.006]))))
    N, ncp = int(round(ts * rate)), int(round(tcp * rate))
    half = nc * rate / N / 2
    center = float(_draw(kw, "center_hz", lambda: rng.uniform(max(1000, 350 + half), max(min(1900, 2800 - half), 350 + half))))
    t0 = float(_draw(kw, "start_s", lambda: rng.uniform(0.0, 0.2)))
    k0 = max(1, int(round(center * N / rate - nc / 2)))
    L = N + ncp
    i0 = min(int(round(t0 * rate)), n - 1)
    nsym = max(1, -(-(n - i0) // L))
    qpsk = (rng.choice([-1.0, 1.0], (nsym, nc)) + 1j * rng.choice([-1.0, 1.0], (nsym, nc))) / math.sqrt(2)
    pilots = rng.choice([-1.0, 1.0], nc)
    qpsk[::8] = pilots
    spec = np.zeros((nsym, N), complex)
    spec[:, k0 : k0 + nc] = qpsk
    body = np.fft.ifft(spec, axis=1) * N / math.sqrt(nc)
    frames = np.concatenate((body[:, N - ncp :], body), axis=1).real.reshape(-1)
    x = np.zeros(n)
    m = min(n - i0, frames.shape[0])
    x[i0 : i0 + m] = frames[:m] * ramp(m, int(0.002 * rate))
    return x, {"carriers": nc, "ts": ts, "tcp": tcp, "spacing_hz": rate / N, "first_hz": round(k0 * rate / N, 3), "pilot_every": 8,
               "start_sample": i0}  # fmt: skip


# --------------------------------------------------------------------------------------- SSTV
#: line layouts: (name, [(kind, duration ms)]): kind "sync" 1200 Hz, "porch" 1500, "g"/"b"/"r"/"y"/"c" scans
SSTV_MODES: dict[str, tuple[tuple[str, float], ...]] = {
    "martin1": (("sync", 4.862), ("porch", 0.572), ("g", 146.432), ("porch", 0.572), ("b", 146.432), ("porch", 0.572), ("r", 146.432), ("porch", 0.572)),
    "martin2": (("sync", 4.862), ("porch", 0.572), ("g", 73.216), ("porch", 0.572), ("b", 73.216), ("porch", 0.572), ("r", 73.216), ("porch", 0.572)),
    "scottie1": (("porch", 1.5), ("g", 138.24), ("porch", 1.5), ("b", 138.24), ("sync", 9.0), ("porch", 1.5), ("r", 138.24)),
    "scottie2": (("porch", 1.5), ("g", 88.064), ("porch", 1.5), ("b", 88.064), ("sync", 9.0), ("porch", 1.5), ("r", 88.064)),
    "robot36": (("sync", 9.0), ("porch", 3.0), ("y", 88.0), ("sep", 4.5), ("porch2", 1.5), ("c", 44.0)),
}  # fmt: skip
VIS = {"martin1": 44, "martin2": 40, "scottie1": 60, "scottie2": 56, "robot36": 8}
PIXELS = 320


def _image(rng: np.random.Generator, lines: int, px: int) -> np.ndarray:
    """A random smooth colour picture (3, lines, px) in [0, 1]: a few 2-D cosines and blobs."""
    yy, xx = np.meshgrid(np.linspace(0, 1, lines), np.linspace(0, 1, px), indexing="ij")
    img = np.zeros((3, lines, px))
    for c in range(3):
        for _ in range(4):
            fx, fy = rng.uniform(0.3, 4, 2)
            img[c] += rng.uniform(0.2, 1) * np.cos(2 * np.pi * (fx * xx + fy * yy) + rng.uniform(0, 2 * np.pi))
        for _ in range(3):
            cx, cy, r = rng.uniform(0, 1), rng.uniform(0, 1), rng.uniform(0.05, 0.3)
            img[c] += rng.uniform(-2, 2) * np.exp(-((xx - cx) ** 2 + (yy - cy) ** 2) / (2 * r * r))
    lo, hi = img.min(axis=(1, 2), keepdims=True), img.max(axis=(1, 2), keepdims=True)
    return (img - lo) / np.maximum(hi - lo, 1e-9)


def sstv(n: int, rng: np.random.Generator, rate: int = 8000, **kw: Any) -> tuple[np.ndarray, Info]:
    """Slow-scan TV: ``mode`` lines of 1200 Hz sync, 1500 Hz porches and 1500 (black) - 2300 Hz
    (white) scans of a random smooth image (320 pixels per scan); the segment starts at a random
    line, or (``vis``) with the VIS header (1900 Hz leaders, 1100/1300 Hz code bits)."""
    mode = str(_draw(kw, "mode", lambda: ["martin1", "martin2", "scottie1", "scottie2", "robot36"][int(rng.integers(5))]))
    vis = bool(_draw(kw, "vis", lambda: rng.random() < 0.3))
    layout = SSTV_MODES[mode]
    durs = np.array([d for _, d in layout]) * 1e-3
    line_s = float(durs.sum())
    n_lines = 256 if mode != "robot36" else 240
    img = _image(rng, n_lines, PIXELS)
    y = 0.299 * img[0] + 0.587 * img[1] + 0.114 * img[2]
    chroma = np.stack((0.5 + 0.5 * (img[0] - y), 0.5 + 0.5 * (img[2] - y)))  # R-Y, B-Y alternate lines (Robot 36)
    line0 = int(_draw(kw, "first_line", lambda: 0 if vis else rng.integers(0, n_lines)))
    head_v: list[float] = []
    head_d: list[float] = []
    if vis:
        code = VIS[mode]
        bits = [(code >> i) & 1 for i in range(7)]
        bits.append(sum(bits) % 2)
        head_v = [1900, 1200, 1900, 1200, *(1100 if b else 1300 for b in bits), 1200]
        head_d = [0.3, 0.01, 0.3, 0.03, *([0.03] * 8), 0.03]
    t_head = float(sum(head_d))
    t = times(n, rate) - t_head
    line = np.floor(t / line_s)
    tau = t - line * line_s
    edges = np.concatenate(([0.0], np.cumsum(durs)))
    seg = np.clip(np.searchsorted(edges, tau, side="right") - 1, 0, len(layout) - 1)
    li = (line.astype(np.int64) + line0) % n_lines
    frac = np.clip((tau - edges[seg]) / durs[seg], 0.0, 1.0 - 1e-9)
    pix = (frac * PIXELS).astype(np.int64)
    freq = np.full(n, 1500.0)
    kinds = np.array([k for k, _ in layout])
    for kind in set(kinds.tolist()):
        sel = kinds[seg] == kind
        if kind == "sync":
            freq[sel] = 1200.0
        elif kind in ("g", "b", "r"):
            freq[sel] = 1500 + 800 * img["rgb".index(kind), li[sel], pix[sel]]
        elif kind == "y":
            freq[sel] = 1500 + 800 * y[li[sel], pix[sel]]
        elif kind == "c":
            freq[sel] = 1500 + 800 * chroma[li[sel] % 2, li[sel], pix[sel]]
        elif kind == "sep":
            freq[sel] = np.where(li[sel] % 2 == 0, 1500.0, 2300.0)
        elif kind == "porch2":
            freq[sel] = 1900.0
    if vis:
        head = t < 0
        freq[head] = hold(head_v, head_d, int(head.sum()), rate)
    freq = gauss_smooth(freq, 0.0002, rate)
    x = fm(freq, rate, rng.uniform(0, 2 * np.pi)) * ramp(n, int(0.003 * rate))
    return x, {"mode": mode, "line_s": round(line_s, 6), "vis": vis, "first_line": line0, "header_s": round(t_head, 3)}
