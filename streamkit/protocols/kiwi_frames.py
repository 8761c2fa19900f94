"""KiwiSDR SND wire format shared by the client and the server: constants, ``SND`` frames, ``MSG``
messages and client ``SET`` commands. Sans-I/O: no sockets, no asyncio, no clock.

* Encoding: :func:`build_msg` (server ``MSG`` key=value messages), :func:`build_snd_frame` (audio
  frames: ADPCM, PCM, IQ with the GNSS block), :func:`smeter_raw`.
* Parsing: :func:`parse_client_command` (a ``SET`` command as the server reads it),
  :func:`parse_int` / :func:`parse_float` / :func:`parse_number` (``MSG`` and ``SET`` values),
  :func:`samples_per_frame`, :func:`smeter_dbm`, :class:`GpsStamp` and
  :func:`gps_week_time_to_utc_ns`.
* Client ``SET mod`` values: :func:`check_mode`, :func:`check_freq`, :func:`resolve_passband`.

The client state machine is :mod:`streamkit.protocols.kiwi_client`, the server's
:mod:`streamkit.protocols.kiwi_server`. Protocol notes: ``docs/kiwisdr.md``.
"""

from __future__ import annotations

import enum
import math
import re
import struct
from dataclasses import dataclass
from typing import Final
from urllib.parse import quote, unquote

import numpy as np
from numpy.typing import ArrayLike, NDArray

from streamkit.protocols.adpcm import AdpcmDecoder, AdpcmEncoder

__all__ = [
    "DEFAULT_PASSBANDS",
    "ENCODED_KEYS",
    "GPS_EPOCH_UNIX_S",
    "GPS_UTC_LEAP_SECONDS",
    "GPS_WEEK_S",
    "IQ_HEADER_LEN",
    "MODES",
    "SAMPLES_PER_FRAME_ADPCM",
    "SAMPLES_PER_FRAME_IQ",
    "SAMPLES_PER_FRAME_PCM",
    "SND_HEADER_LEN",
    "STEREO_MODES",
    "GpsStamp",
    "SndFlag",
    "SndHeader",
    "adpcm_to_float",
    "build_msg",
    "build_snd_frame",
    "check_freq",
    "check_mode",
    "gps_week_time_to_utc_ns",
    "parse_client_command",
    "parse_float",
    "parse_int",
    "parse_number",
    "parse_snd_header",
    "pcm_to_float",
    "resolve_passband",
    "samples_per_frame",
    "smeter_dbm",
    "smeter_raw",
    "snd_payload_error",
]

MODES: Final[tuple[str, ...]] = (
    "am", "amn", "amw", "sam", "sal", "sau", "sas", "qam", "drm",
    "lsb", "lsn", "usb", "usn", "cw", "cwn", "nbfm", "nnfm", "iq",
)  # fmt: skip
"""Demodulation modes of firmware v1.711 (FW ``rx/mode.h``)."""

STEREO_MODES: Final[frozenset[str]] = frozenset({"iq", "drm", "sas", "qam"})
"""Modes whose frames use the IQ/stereo layout with the GNSS header (flag 0x08)."""

# Default passbands in Hz relative to the carrier, (low_cut, high_cut). The spec fixes only the
# LSB default (-2700..-300); the others are OUR CHOICES, close to the browser's defaults.
DEFAULT_PASSBANDS: Final[dict[str, tuple[int, int]]] = {
    "am": (-4900, 4900),
    "amn": (-2500, 2500),
    "amw": (-6000, 6000),
    "sam": (-4900, 4900),
    "sal": (-4900, 0),
    "sau": (0, 4900),
    "sas": (-4900, 4900),
    "qam": (-4900, 4900),
    "drm": (-5000, 5000),
    "lsb": (-2700, -300),
    "lsn": (-2400, -300),
    "usb": (300, 2700),
    "usn": (300, 2400),
    "cw": (300, 700),  # centred on the usual 500 Hz CW pitch
    "cwn": (470, 530),
    "nbfm": (-6000, 6000),
    "nnfm": (-3000, 3000),
    "iq": (-5000, 5000),
}

ENCODED_KEYS: Final[frozenset[str]] = frozenset(
    {
        "load_cfg",
        "load_dxcfg",
        "load_dxcomm_cfg",
        "redirect",
        "reason_disabled",
        "ip_limit",
        "kiwi_kick",
        "status_msg_html",
        "notify_msg",
    }
)
"""``MSG`` keys whose values the server percent-encodes as a whole."""

SND_HEADER_LEN: Final = 10
"""Bytes of the common SND header: tag, flags, seq (u32 LE), S-meter (u16 BE)."""
IQ_HEADER_LEN: Final = 20
"""Bytes before the samples of an IQ frame: common header + 10-byte GNSS block."""
SAMPLES_PER_FRAME_ADPCM: Final = 2048
SAMPLES_PER_FRAME_PCM: Final = 512
SAMPLES_PER_FRAME_IQ: Final = 512
GPS_UTC_LEAP_SECONDS: Final = 18
"""GPS - UTC in seconds (valid since 2017-01-01)."""
GPS_EPOCH_UNIX_S: Final = 315_964_800  # 1980-01-06T00:00:00Z
GPS_WEEK_S: Final = 604_800

U32: Final = 1 << 32
"""Sequence numbers are uint32."""
_NS: Final = 1_000_000_000
_SCALE: Final = 1.0 / 32768.0

_INT_RE: Final = re.compile(r"[+-]?[0-9]+\Z")
_FLOAT_RE: Final = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?\Z")


class SndFlag(enum.IntFlag):
    """Bits of the SND flags byte."""

    LPF = 0x01
    """Passband changed in this frame."""
    ADC_OVFL = 0x02
    """ADC overload."""
    NEW_FREQ = 0x04
    """Frequency or mode changed."""
    MODE_IQ = 0x08
    """2-channel frame with a GNSS header (modes iq, drm, sas, qam)."""
    COMPRESSED = 0x10
    """Payload is IMA ADPCM (mono only)."""
    RESTART = 0x20
    """ADPCM and AGC state were reset before this frame."""
    SQUELCH_UI = 0x40
    """Squelch closed; the client is expected to mute."""
    LITTLE_ENDIAN = 0x80
    """Uncompressed/IQ samples are little-endian."""


def gps_week_time_to_utc_ns(gpssec: int, gpsnsec: int, reference_utc_ns: int, leap_seconds: int = GPS_UTC_LEAP_SECONDS) -> int:
    """Convert a GPS time-of-week stamp to UTC nanoseconds since the Unix epoch.

    The Kiwi sends only the seconds within the GPS week, so the week is taken from a
    reference UTC time (e.g. the wall clock when the frame arrived): the week whose stamp lies
    closest to the reference is chosen, which is right while the reference is within half a
    week of the true time.

    Args:
        gpssec: Whole GPS seconds of the week, 0..604799.
        gpsnsec: Nanoseconds within that second, 0..999999999.
        reference_utc_ns: A UTC time near the stamp, ns since the Unix epoch.
        leap_seconds: GPS - UTC offset in seconds (18 since 2017).

    Returns:
        UTC time of the stamp in ns since the Unix epoch.

    Raises:
        ValueError: ``gpssec`` or ``gpsnsec`` out of range.
    """
    if not 0 <= gpssec < GPS_WEEK_S:
        raise ValueError(f"gpssec must be in 0..{GPS_WEEK_S - 1}, got {gpssec}")
    if not 0 <= gpsnsec < _NS:
        raise ValueError(f"gpsnsec must be in 0..{_NS - 1}, got {gpsnsec}")
    week_ns = GPS_WEEK_S * _NS
    offset_ns = GPS_EPOCH_UNIX_S * _NS - leap_seconds * _NS  # UTC = GPS + offset
    ref_gps_ns = reference_utc_ns - offset_ns
    candidate = (ref_gps_ns // week_ns) * week_ns + gpssec * _NS + gpsnsec
    diff = candidate - ref_gps_ns
    if diff > week_ns // 2:
        candidate -= week_ns
    elif diff < -(week_ns // 2):
        candidate += week_ns
    return candidate + offset_ns


@dataclass(frozen=True, slots=True)
class GpsStamp:
    """GNSS time stamp of an IQ frame: GPS time of the frame's samples.

    Attributes:
        last_gps_solution: Seconds since the last GPS position solution (capped at 252);
            255 = no GPS timing.
        gpssec: Whole GPS seconds of the week.
        gpsnsec: Nanoseconds within that second.
    """

    last_gps_solution: int
    gpssec: int
    gpsnsec: int

    @property
    def valid(self) -> bool:
        """False for 255 (no GPS timing), 253/254 (never sent), the all-zero stamp of the first
        frame (or of a Kiwi whose stamps are turned off) and out-of-range fields."""
        if self.last_gps_solution > 252:
            return False
        if self.last_gps_solution == 0 and self.gpssec == 0 and self.gpsnsec == 0:
            return False
        return 0 <= self.gpssec < GPS_WEEK_S and 0 <= self.gpsnsec < _NS

    def to_utc_ns(self, reference_utc_ns: int, leap_seconds: int = GPS_UTC_LEAP_SECONDS) -> int:
        """UTC ns since the Unix epoch; see :func:`gps_week_time_to_utc_ns`.

        Raises:
            ValueError: the stamp is not :attr:`valid`.
        """
        if not self.valid:
            raise ValueError(f"invalid GPS stamp {self}")
        return gps_week_time_to_utc_ns(self.gpssec, self.gpsnsec, reference_utc_ns, leap_seconds)


def parse_int(value: str | None) -> int | None:
    """The int of a plain decimal integer (``[+-]digits``), else None."""
    if value is None or not _INT_RE.match(value):
        return None
    return int(value)


def parse_float(value: str | None) -> float | None:
    """The float of a plain decimal number (no nan/inf/underscores), else None."""
    if value is None or not _FLOAT_RE.match(value):
        return None
    return float(value)


def parse_number(value: str) -> int | float | str:
    """int or float if ``value`` is a plain decimal number (no nan/inf/underscores), else str."""
    if _INT_RE.match(value):
        return int(value)
    if _FLOAT_RE.match(value):
        return float(value)
    return value


def samples_per_frame(flags: int) -> int:
    """Nominal samples per SND frame for a flags byte: 512 IQ, 2048 ADPCM, 512 PCM."""
    if flags & SndFlag.MODE_IQ:
        return SAMPLES_PER_FRAME_IQ
    if flags & SndFlag.COMPRESSED:
        return SAMPLES_PER_FRAME_ADPCM
    return SAMPLES_PER_FRAME_PCM


def smeter_dbm(raw: int) -> float:
    """S-meter dBm from the raw uint16: ``raw / 10 - 127``."""
    return raw / 10.0 - 127.0


@dataclass(frozen=True, slots=True)
class SndHeader:
    """The header of a received ``SND`` message and its payload (a view, not a copy).

    Attributes:
        flags: The flags byte (:class:`SndFlag` bits).
        seq: Sequence number.
        smeter_raw: Raw S-meter (:func:`smeter_dbm` converts it).
        gps: The GNSS stamp of an IQ frame, None for mono.
        payload: The samples' bytes.
    """

    flags: int
    seq: int
    smeter_raw: int
    gps: GpsStamp | None
    payload: memoryview

    @property
    def iq(self) -> bool:
        """IQ/stereo layout (flag 0x08)."""
        return bool(self.flags & SndFlag.MODE_IQ)


def parse_snd_header(mv: memoryview) -> SndHeader | str:
    """Split an ``SND`` message (tag included) into its header and payload, or say why it is too short."""
    n = len(mv)
    if n < SND_HEADER_LEN:
        return f"truncated SND frame ({n} bytes < {SND_HEADER_LEN})"
    flags = mv[3]
    (seq,) = struct.unpack_from("<I", mv, 4)
    (raw_smeter,) = struct.unpack_from(">H", mv, 8)
    if not flags & SndFlag.MODE_IQ:
        return SndHeader(flags, seq, raw_smeter, None, mv[SND_HEADER_LEN:])
    if n < IQ_HEADER_LEN:
        return f"truncated IQ frame ({n} bytes < {IQ_HEADER_LEN})"
    last_sol, _dummy, gpssec, gpsnsec = struct.unpack_from("<BBII", mv, SND_HEADER_LEN)
    return SndHeader(flags, seq, raw_smeter, GpsStamp(last_sol, gpssec, gpsnsec), mv[IQ_HEADER_LEN:])


def snd_payload_error(flags: int, nbytes: int) -> str | None:
    """Why a payload of ``nbytes`` cannot be a frame with these flags, or None if it can."""
    if flags & SndFlag.MODE_IQ:
        if flags & SndFlag.COMPRESSED:
            return "IQ frame with the COMPRESSED flag (IQ is never compressed)"
        if nbytes % 4:
            return f"IQ payload of {nbytes} bytes is not a multiple of 4"
    elif nbytes % 2:
        # PCM: half a sample. ADPCM: the server fills every frame to 1024 bytes, so an odd
        # count is a cut or padded frame whose ADPCM state cannot be trusted either.
        return f"{'ADPCM' if flags & SndFlag.COMPRESSED else 'PCM'} payload of {nbytes} bytes is odd"
    return None


def pcm_to_float(payload: memoryview | bytes, flags: int) -> NDArray[np.float32]:
    """16-bit samples (big-endian, little-endian with flag 0x80) as float32 scaled by 1/32768."""
    dtype = "<i2" if flags & SndFlag.LITTLE_ENDIAN else ">i2"
    f = np.frombuffer(payload, dtype=dtype).astype(np.float32)
    f *= np.float32(_SCALE)
    return f


def adpcm_to_float(decoder: AdpcmDecoder, payload: memoryview | bytes) -> NDArray[np.float32]:
    """Decode an ADPCM payload with ``decoder`` (its state carries on) as float32 scaled by 1/32768."""
    f = decoder.decode(payload).astype(np.float32)
    f *= np.float32(_SCALE)
    return f


# Client command fields the server URL-decodes.
_CLIENT_ENCODED: Final[frozenset[str]] = frozenset({"p", "ipl", "ident_user"})


def smeter_raw(dbm: float) -> int:
    """Raw uint16 S-meter for a power in dBm, as the server computes it.

    ``truncate((clamp(dBm, -127, 3.4) + 127) * 10)``, with a 1e-9 guard so that binary
    floating point does not turn e.g. -99.7 into 272: ``smeter_raw(smeter_dbm(r)) == r``.

    Raises:
        ValueError: ``dbm`` is NaN.
    """
    if math.isnan(dbm):
        raise ValueError("dbm is NaN")
    d = min(3.4, max(-127.0, float(dbm)))
    return int((d + 127.0) * 10.0 + 1e-9)


def build_msg(**kv: object) -> bytes:
    """Build a server ``MSG`` message: ``b"MSG key=value key2 ..."``.

    Values of :data:`ENCODED_KEYS` are percent-encoded (spaces, ``:``, ``/`` ... all encoded,
    like the firmware's ``mg_url_encode``). ``None`` gives a bare key, bools give 0/1,
    ``sample_rate`` floats are written ``%.6f`` and ``freq_offset`` floats ``%.3f`` like the
    firmware. Keyword order is kept; pass a ``**{"key": v}`` dict for unusual keys.

    Raises:
        ValueError: no keys, or an unencoded value containing a space or ``=``... in the key.
    """
    if not kv:
        raise ValueError("build_msg needs at least one key")
    tokens: list[str] = []
    for key, value in kv.items():
        if not key or " " in key or "=" in key:
            raise ValueError(f"bad MSG key {key!r}")
        if value is None:
            tokens.append(key)
            continue
        if isinstance(value, bool):
            text = str(int(value))
        elif isinstance(value, float) and key == "sample_rate":
            text = f"{value:.6f}"
        elif isinstance(value, float) and key == "freq_offset":
            text = f"{value:.3f}"
        else:
            text = str(value)
        if key in ENCODED_KEYS:
            text = quote(text, safe="")
        elif " " in text:
            raise ValueError(f"value of {key!r} contains a space and {key!r} is not an encoded key")
        tokens.append(f"{key}={text}")
    return ("MSG " + " ".join(tokens)).encode("utf-8")


def build_snd_frame(
    seq: int,
    smeter_dbm: float,
    samples: ArrayLike | bytes | bytearray | memoryview,
    flags: int = 0,
    gps: GpsStamp | None = None,
    *,
    encoder: AdpcmEncoder | None = None,
) -> bytes:
    """Build one server ``SND`` message.

    Args:
        seq: Sequence number, 0..2**32-1.
        smeter_dbm: S-meter power in dBm (converted with :func:`smeter_raw`).
        samples: Either the raw payload bytes (used verbatim), or int16 samples encoded as
            the flags say: ADPCM if COMPRESSED (mono only, even count), else int16 big-endian
            (little-endian with LITTLE_ENDIAN). For MODE_IQ give interleaved I, Q (shape
            (2n,) or (n, 2)).
        flags: The flags byte (:class:`SndFlag` bits).
        gps: GNSS stamp for IQ frames (default all zero, like the first frame); only with
            MODE_IQ.
        encoder: ADPCM encoder whose state carries across frames; a fresh one (state
            0, 0) if None.

    Returns:
        The whole message: 10-byte header (20 for IQ) + payload.

    Raises:
        ValueError: out-of-range seq/flags/gps, compressed IQ, GPS without IQ, odd ADPCM
            input, samples outside int16.
        TypeError: non-integer samples.
    """
    if not 0 <= seq < U32:
        raise ValueError(f"seq must be a uint32, got {seq}")
    if not 0 <= flags <= 0xFF:
        raise ValueError(f"flags must fit a byte, got {flags}")
    iq = bool(flags & SndFlag.MODE_IQ)
    if iq and flags & SndFlag.COMPRESSED:
        raise ValueError("IQ frames are never compressed")
    header = b"SND" + struct.pack("<BI", flags, seq) + struct.pack(">H", smeter_raw(smeter_dbm))
    if iq:
        g = gps if gps is not None else GpsStamp(0, 0, 0)
        if not (0 <= g.last_gps_solution <= 255 and 0 <= g.gpssec < U32 and 0 <= g.gpsnsec < U32):
            raise ValueError(f"GPS stamp fields out of range: {g}")
        header += struct.pack("<BBII", g.last_gps_solution, 0, g.gpssec, g.gpsnsec)
    elif gps is not None:
        raise ValueError("a GPS stamp needs the MODE_IQ flag")

    if isinstance(samples, bytes | bytearray | memoryview):
        return header + bytes(samples)
    x = np.asarray(samples)
    if flags & SndFlag.COMPRESSED:
        return header + (encoder if encoder is not None else AdpcmEncoder()).encode(x.reshape(-1))
    if x.size and x.dtype.kind not in "iu":
        raise TypeError(f"samples must be integers (int16), got {x.dtype}")
    if x.size and (int(x.min()) < -32768 or int(x.max()) > 32767):
        raise ValueError("samples outside the int16 range")
    dtype = "<i2" if flags & SndFlag.LITTLE_ENDIAN else ">i2"
    return header + np.ascontiguousarray(x, dtype=dtype).reshape(-1).tobytes()


def parse_client_command(text: str) -> tuple[str, dict[str, str]]:
    """Parse one client command as the server sees it.

    One trailing newline is stripped (as the firmware does). The name is the first token's key
    (``"SET mod=lsb ..."`` -> ``"mod"``, and the dict keeps ``mod=lsb``), or the bare first
    token (``"SET keepalive"`` -> ``"keepalive"``), or ``"AR OK"``. Values stay strings;
    ``p``, ``ipl`` and ``ident_user`` are percent-decoded; a bare later token maps to ``""``.

    Examples:
        ``"SET AR OK in=12000 out=44100"`` -> ``("AR OK", {"in": "12000", "out": "44100"})``;
        ``"SET auth t=kiwi p="`` -> ``("auth", {"t": "kiwi", "p": ""})``.

    Raises:
        ValueError: not a ``SET`` command, or an empty one.
    """
    text = text.removesuffix("\n")
    if not text.startswith("SET "):
        raise ValueError(f"not a SET command: {text[:80]!r}")
    body = text[4:]
    tokens = [t for t in body.split(" ") if t]
    if not tokens:
        raise ValueError("empty SET command")
    params: dict[str, str] = {}
    if tokens[:2] == ["AR", "OK"]:
        name, rest = "AR OK", tokens[2:]
    else:
        first = tokens[0]
        name = first.partition("=")[0]
        rest = tokens if "=" in first else tokens[1:]
    for token in rest:
        key, _, value = token.partition("=")
        params[key] = unquote(value) if key in _CLIENT_ENCODED else value
    return name, params


# ------------------------------------------------------------------ client SET mod values


def check_mode(mode: str) -> str:
    """``mode`` if it is one of :data:`MODES`, else ValueError."""
    if mode not in DEFAULT_PASSBANDS:
        raise ValueError(f"unknown mode {mode!r}; expected one of {', '.join(MODES)}")
    return mode


def _as_hz(value: float, name: str) -> int:
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    return round(value)


def check_freq(freq_khz: float) -> float:
    """A tuning frequency (kHz) as a float; ValueError if negative or not finite."""
    f = float(freq_khz)
    if not math.isfinite(f) or f < 0:
        raise ValueError(f"freq_khz must be a finite number >= 0, got {freq_khz}")
    return f


def resolve_passband(mode: str, low_cut: float | None, high_cut: float | None, current: tuple[int, int] | None) -> tuple[int, int]:
    """``(low_cut, high_cut)`` in Hz: the given edges, else ``current`` (the same mode's cuts) or the mode's default."""
    base = current if current is not None else DEFAULT_PASSBANDS[mode]
    lo = base[0] if low_cut is None else _as_hz(low_cut, "low_cut")
    hi = base[1] if high_cut is None else _as_hz(high_cut, "high_cut")
    if not lo < hi:
        raise ValueError(f"low_cut ({lo}) must be < high_cut ({hi})")
    return lo, hi
