"""IMA/DVI ADPCM codec as used by the KiwiSDR SND stream.

This is the standard 4-bit IMA ADPCM algorithm (89-entry step table, 8-entry index adjustment)
(IMA Recommended Practice for Enhancing Digital Audio Compatibility in Multimedia Systems, 1992), with the Kiwi's packing: two samples per byte,
the **earlier sample in the low nibble**. The state is two integers, ``index`` (0..88) and
``prev`` (the last reconstructed sample, clamped to int16); both start at 0. The Kiwi
carries this state across SND frames for the whole connection, so a decoder must be reset only
when the server resets its encoder (a frame flagged 0x20, a compression or IQ-mode switch; the protocol object in :mod:`streamkit.protocols.kiwi_client` does that).

Two implementations live here:

* numba kernels (:func:`adpcm_decode_kernel`, :func:`adpcm_encode_kernel`) with an explicit
  ``int32[2]`` state array ``[index, prev]`` updated in place, wrapped by :class:`AdpcmDecoder`
  and :class:`AdpcmEncoder`. One 1024-byte Kiwi frame is one kernel call.
* a pure-Python reference (:func:`decode_reference`, :func:`encode_reference`) written straight
  from the IMA algorithm's description, used by the tests to check the kernels.

Both agree with the test vectors V1, V2, V3, F1 and F2 of ``tests/protocols/test_adpcm.py``.
"""

from __future__ import annotations

from collections.abc import Iterable

import numba
import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "INDEX_ADJUST",
    "STEP_TABLE",
    "AdpcmDecoder",
    "AdpcmEncoder",
    "adpcm_decode_kernel",
    "adpcm_encode_kernel",
    "decode_reference",
    "encode_reference",
    "warmup",
]

STEP_TABLE: tuple[int, ...] = (
    7, 8, 9, 10, 11, 12, 13, 14, 16, 17, 19, 21, 23, 25, 28, 31, 34, 37, 41, 45, 50, 55, 60,
    66, 73, 80, 88, 97, 107, 118, 130, 143, 157, 173, 190, 209, 230, 253, 279, 307, 337, 371,
    408, 449, 494, 544, 598, 658, 724, 796, 876, 963, 1060, 1166, 1282, 1411, 1552, 1707, 1878,
    2066, 2272, 2499, 2749, 3024, 3327, 3660, 4026, 4428, 4871, 5358, 5894, 6484, 7132, 7845,
    8630, 9493, 10442, 11487, 12635, 13899, 15289, 16818, 18500, 20350, 22385, 24623, 27086,
    29794, 32767,
)  # fmt: skip
"""IMA ADPCM step sizes, indexed by the state ``index`` (0..88)."""

INDEX_ADJUST: tuple[int, ...] = (-1, -1, -1, -1, 2, 4, 6, 8)
"""Index adjustment for the magnitude bits (``code & 7``) of a 4-bit code."""

INDEX_MAX = len(STEP_TABLE) - 1  # 88
INT16_MIN = -32768
INT16_MAX = 32767

# Module-level arrays are frozen into the compiled kernels as constants by numba.
_STEP = np.array(STEP_TABLE, dtype=np.int32)
_ADJ = np.array(INDEX_ADJUST, dtype=np.int32)


# --------------------------------------------------------------------------------------------
# numba kernels
# --------------------------------------------------------------------------------------------


@numba.njit(cache=True, nogil=True)
def adpcm_decode_kernel(data: NDArray[np.uint8], out: NDArray[np.int16], state: NDArray[np.int32]) -> None:
    """Decode IMA ADPCM bytes (low nibble first) into int16 samples.

    Args:
        data: ADPCM bytes, 1-D uint8 (may be read-only).
        out: Output buffer, 1-D int16 with at least ``2 * len(data)`` elements; the first
            ``2 * len(data)`` are written.
        state: ``int32[2]`` array ``[index, prev]``; read at entry and updated in place.
    """
    index = int(state[0])
    prev = int(state[1])
    j = 0
    for i in range(data.shape[0]):
        byte = int(data[i])
        for shift in (0, 4):
            code = (byte >> shift) & 0xF
            step = int(_STEP[index])
            diff = step >> 3
            if code & 1:
                diff += step >> 2
            if code & 2:
                diff += step >> 1
            if code & 4:
                diff += step
            if code & 8:
                diff = -diff
            prev += diff
            if prev > INT16_MAX:
                prev = INT16_MAX
            elif prev < INT16_MIN:
                prev = INT16_MIN
            out[j] = prev
            j += 1
            index += int(_ADJ[code & 7])
            if index < 0:
                index = 0
            elif index > INDEX_MAX:
                index = INDEX_MAX
    state[0] = index
    state[1] = prev


@numba.njit(cache=True, nogil=True)
def adpcm_encode_kernel(x: NDArray[np.int16], out: NDArray[np.uint8], state: NDArray[np.int32]) -> None:
    """Encode int16 samples into IMA ADPCM bytes (earlier sample in the low nibble).

    Args:
        x: Samples, 1-D int16 of even length (may be read-only). An odd trailing sample is
            ignored; the public wrapper rejects odd lengths.
        out: Output buffer, 1-D uint8 with at least ``len(x) // 2`` elements.
        state: ``int32[2]`` array ``[index, prev]``; read at entry and updated in place.
    """
    index = int(state[0])
    prev = int(state[1])
    n_bytes = x.shape[0] // 2
    for i in range(n_bytes):
        packed = 0
        for half in range(2):
            sample = int(x[2 * i + half])
            step = int(_STEP[index])
            # Quantise the difference (IMA encoding steps 1-2).
            d = sample - prev
            code = 0
            if d < 0:
                code = 8
                d = -d
            if d >= step:
                code |= 4
                d -= step
            half_step = step >> 1
            if d >= half_step:
                code |= 2
                d -= half_step
            if d >= half_step >> 1:
                code |= 1
            # Step 3: update the state by decoding the code just made.
            diff = step >> 3
            if code & 1:
                diff += step >> 2
            if code & 2:
                diff += step >> 1
            if code & 4:
                diff += step
            if code & 8:
                diff = -diff
            prev += diff
            if prev > INT16_MAX:
                prev = INT16_MAX
            elif prev < INT16_MIN:
                prev = INT16_MIN
            index += int(_ADJ[code & 7])
            if index < 0:
                index = 0
            elif index > INDEX_MAX:
                index = INDEX_MAX
            packed |= code << (4 * half)
        out[i] = packed
    state[0] = index
    state[1] = prev


# --------------------------------------------------------------------------------------------
# array helpers
# --------------------------------------------------------------------------------------------


def _readonly(a: NDArray[np.generic]) -> NDArray[np.generic]:
    """Return ``a`` as a read-only view, so the kernels always see one array type.

    numba compiles writable and read-only arrays as different types; funnelling every call
    through read-only views means one specialisation per kernel, compiled by :func:`warmup`.
    """
    if a.flags.writeable:
        a = a.view()
        a.flags.writeable = False
    return a


def _as_bytes_array(data: bytes | bytearray | memoryview | NDArray[np.uint8]) -> NDArray[np.uint8]:
    """View ADPCM input as a contiguous read-only 1-D uint8 array (no copy for buffers)."""
    if isinstance(data, np.ndarray):
        if data.dtype != np.uint8:
            raise TypeError(f"ADPCM data must be uint8, got {data.dtype}")
        arr = np.ascontiguousarray(data).reshape(-1)
    else:
        arr = np.frombuffer(data, dtype=np.uint8)
    return _readonly(arr)  # type: ignore[return-value]


def _as_int16_array(samples: ArrayLike) -> NDArray[np.int16]:
    """Convert encoder input to a contiguous read-only 1-D int16 array.

    Raises:
        TypeError: non-integer input.
        ValueError: not 1-D, or integer values outside the int16 range.
    """
    a = np.asarray(samples)
    if a.ndim != 1:
        raise ValueError(f"samples must be 1-D, got shape {a.shape}")
    if a.dtype != np.int16:
        if a.size and a.dtype.kind not in "iu":
            raise TypeError(f"samples must be int16 (or integers in range), got {a.dtype}")
        if a.size and (int(a.min()) < INT16_MIN or int(a.max()) > INT16_MAX):
            raise ValueError("samples outside the int16 range")
        a = a.astype(np.int16)
    return _readonly(np.ascontiguousarray(a))  # type: ignore[return-value]


def _check_state(index: int, prev: int) -> None:
    if not 0 <= index <= INDEX_MAX:
        raise ValueError(f"ADPCM index must be in 0..{INDEX_MAX}, got {index}")
    if not INT16_MIN <= prev <= INT16_MAX:
        raise ValueError(f"ADPCM prev must be in the int16 range, got {prev}")


# --------------------------------------------------------------------------------------------
# stateful wrappers
# --------------------------------------------------------------------------------------------


class _AdpcmState:
    """The codec state ``(index, prev)`` shared by :class:`AdpcmDecoder` and :class:`AdpcmEncoder`."""

    __slots__ = ("_state",)

    def __init__(self) -> None:
        self._state = np.zeros(2, dtype=np.int32)

    def reset(self) -> None:
        """Set the state to ``(index=0, prev=0)``."""
        self._state[:] = 0

    def preset(self, index: int, prev: int) -> None:
        """Set the state, e.g. to the ``audio_adpcm_state`` a camping client receives.

        Raises:
            ValueError: ``index`` outside 0..88 or ``prev`` outside the int16 range.
        """
        _check_state(index, prev)
        self._state[0] = index
        self._state[1] = prev

    @property
    def state(self) -> tuple[int, int]:
        """The current ``(index, prev)``."""
        return int(self._state[0]), int(self._state[1])


class AdpcmDecoder(_AdpcmState):
    """Streaming IMA ADPCM decoder whose state carries across calls.

    Decoding a byte string in pieces gives exactly the samples of decoding it at once.

    State:
        ``(index, prev)``; :meth:`reset` sets it to ``(0, 0)``, :meth:`preset` to given values
        (Kiwi camp mode, ``MSG audio_adpcm_state``).
    """


    def decode(self, data: bytes | bytearray | memoryview | NDArray[np.uint8]) -> NDArray[np.int16]:
        """Decode ADPCM bytes into ``2 * len(data)`` int16 samples.

        Args:
            data: ADPCM bytes (any buffer or a uint8 array).

        Returns:
            A new int16 array.

        Raises:
            TypeError: an array input whose dtype is not uint8.
        """
        arr = _as_bytes_array(data)
        out = np.empty(2 * arr.shape[0], dtype=np.int16)
        adpcm_decode_kernel(arr, out, self._state)
        return out



class AdpcmEncoder(_AdpcmState):
    """Streaming IMA ADPCM encoder (server side) whose state carries across calls.

    State:
        ``(index, prev)``; :meth:`reset` sets it to ``(0, 0)``.
    """


    def encode(self, samples: ArrayLike) -> bytes:
        """Encode an even number of int16 samples into ``len(samples) // 2`` bytes.

        Args:
            samples: 1-D int16 array (other integer arrays are accepted if in range).

        Returns:
            The ADPCM bytes, earlier sample of each pair in the low nibble.

        Raises:
            ValueError: odd length, not 1-D, or values outside the int16 range.
            TypeError: non-integer input.
        """
        x = _as_int16_array(samples)
        if x.shape[0] % 2:
            raise ValueError(f"ADPCM encoding needs an even number of samples, got {x.shape[0]}")
        out = np.empty(x.shape[0] // 2, dtype=np.uint8)
        adpcm_encode_kernel(x, out, self._state)
        return out.tobytes()



def warmup() -> None:
    """Compile both kernels for the array types the wrappers pass (read-only inputs).

    Cheap after the first process thanks to numba's on-disk cache (``cache=True``).
    """
    AdpcmDecoder().decode(b"\x00")
    AdpcmEncoder().encode(np.zeros(2, dtype=np.int16))


# --------------------------------------------------------------------------------------------
# pure-Python reference (straight from the IMA algorithm; slow, for tests and documentation)
# --------------------------------------------------------------------------------------------


def _ref_decode_code(code: int, index: int, prev: int) -> tuple[int, int]:
    """Apply one 4-bit code to the state; returns the new ``(index, prev)``."""
    step = STEP_TABLE[index]
    diff = step >> 3
    if code & 1:
        diff += step >> 2
    if code & 2:
        diff += step >> 1
    if code & 4:
        diff += step
    if code & 8:
        diff = -diff
    prev = min(INT16_MAX, max(INT16_MIN, prev + diff))
    index = min(INDEX_MAX, max(0, index + INDEX_ADJUST[code & 7]))
    return index, prev


def decode_reference(data: Iterable[int], index: int = 0, prev: int = 0) -> tuple[list[int], int, int]:
    """Pure-Python IMA ADPCM decoder (low nibble first).

    Args:
        data: ADPCM bytes (``bytes`` or any iterable of ints 0..255).
        index: Initial step index.
        prev: Initial predictor value.

    Returns:
        ``(samples, index, prev)``: the decoded samples and the final state.

    Raises:
        ValueError: invalid initial state.
    """
    _check_state(index, prev)
    samples: list[int] = []
    for byte in data:
        for code in (byte & 0xF, (byte >> 4) & 0xF):
            index, prev = _ref_decode_code(code, index, prev)
            samples.append(prev)
    return samples, index, prev


def encode_reference(samples: Iterable[int], index: int = 0, prev: int = 0) -> tuple[bytes, int, int]:
    """Pure-Python IMA ADPCM encoder (earlier sample in the low nibble).

    Args:
        samples: An even number of ints in the int16 range.
        index: Initial step index.
        prev: Initial predictor value.

    Returns:
        ``(data, index, prev)``: the ADPCM bytes and the final state.

    Raises:
        ValueError: odd number of samples, a sample outside int16, or an invalid state.
    """
    _check_state(index, prev)
    xs = [int(s) for s in samples]
    if len(xs) % 2:
        raise ValueError(f"ADPCM encoding needs an even number of samples, got {len(xs)}")
    codes: list[int] = []
    for x in xs:
        if not INT16_MIN <= x <= INT16_MAX:
            raise ValueError(f"sample {x} outside the int16 range")
        d = x - prev
        code = 0
        if d < 0:
            code = 8
            d = -d
        step = STEP_TABLE[index]
        if d >= step:
            code |= 4
            d -= step
        step >>= 1
        if d >= step:
            code |= 2
            d -= step
        step >>= 1
        if d >= step:
            code |= 1
        index, prev = _ref_decode_code(code, index, prev)
        codes.append(code)
    out = bytes(codes[i] | (codes[i + 1] << 4) for i in range(0, len(codes), 2))
    return out, index, prev
