"""Sans-I/O protocol implementations: no sockets, no asyncio, no clock.

* :mod:`streamkit.protocols.adpcm`: IMA ADPCM codec (numba kernels + pure-Python reference).
* KiwiSDR audio (``SND``) WebSocket protocol: :mod:`~streamkit.protocols.kiwi_frames` (the wire
  format shared by both sides), :mod:`~streamkit.protocols.kiwi_client` (the client state machine)
  and :mod:`~streamkit.protocols.kiwi_events` (its events), :mod:`~streamkit.protocols.kiwi_server`
  (the server state machine, with :mod:`~streamkit.protocols.kiwi_server_log` and
  :mod:`~streamkit.protocols.kiwi_faults`), :mod:`~streamkit.protocols.kiwi_url` (receiver URLs),
  :mod:`~streamkit.protocols.kiwi_tally` and :mod:`~streamkit.protocols.kiwi_fuzz` (test input).

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
from streamkit.protocols.kiwi_client import KiwiClientProtocol
from streamkit.protocols.kiwi_events import (
    AudioFrame,
    AuthResult,
    GapReason,
    IgnoredMessage,
    KiwiCounters,
    KiwiEvent,
    ProtocolViolation,
    SampleRate,
    SequenceGap,
    ServerInfo,
    State,
    Terminal,
    TerminalKind,
    UnknownMessage,
)
from streamkit.protocols.kiwi_frames import (
    DEFAULT_PASSBANDS,
    MODES,
    GpsStamp,
    SndFlag,
    build_msg,
    build_snd_frame,
    gps_week_time_to_utc_ns,
    parse_client_command,
    samples_per_frame,
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
    "samples_per_frame",
    "smeter_dbm",
    "smeter_raw",
    "warmup",
]
