"""Sans-I/O protocol implementations: no sockets, no asyncio, no clock.

* :mod:`streamkit.protocols.adpcm`: IMA ADPCM codec (numba kernels + pure-Python reference).
* :mod:`streamkit.protocols.kiwi`: KiwiSDR SND WebSocket client protocol and server helpers.

The I/O adapters that drive them live in :mod:`streamkit.io`.
"""

from streamkit.protocols.adpcm import (
    AdpcmDecoder,
    AdpcmEncoder,
    adpcm_decode_kernel,
    adpcm_encode_kernel,
    decode_reference,
    encode_reference,
    warmup,
)
from streamkit.protocols.kiwi import (
    DEFAULT_PASSBANDS,
    MODES,
    AudioFrame,
    AuthResult,
    GapReason,
    GpsStamp,
    IgnoredMessage,
    KiwiClientProtocol,
    KiwiCounters,
    KiwiEvent,
    ProtocolViolation,
    SampleRate,
    SequenceGap,
    ServerInfo,
    SndFlag,
    State,
    Terminal,
    TerminalKind,
    UnknownMessage,
    build_msg,
    build_snd_frame,
    gps_week_time_to_utc_ns,
    parse_client_command,
    smeter_dbm,
    smeter_raw,
)

__all__ = [
    "DEFAULT_PASSBANDS",
    "MODES",
    "AdpcmDecoder",
    "AdpcmEncoder",
    "AudioFrame",
    "AuthResult",
    "GapReason",
    "GpsStamp",
    "IgnoredMessage",
    "KiwiClientProtocol",
    "KiwiCounters",
    "KiwiEvent",
    "ProtocolViolation",
    "SampleRate",
    "SequenceGap",
    "ServerInfo",
    "SndFlag",
    "State",
    "Terminal",
    "TerminalKind",
    "UnknownMessage",
    "adpcm_decode_kernel",
    "adpcm_encode_kernel",
    "build_msg",
    "build_snd_frame",
    "decode_reference",
    "encode_reference",
    "gps_week_time_to_utc_ns",
    "parse_client_command",
    "smeter_dbm",
    "smeter_raw",
    "warmup",
]
