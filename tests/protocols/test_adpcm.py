"""Tests for streamkit.protocols.adpcm: the Kiwi ADPCM test vectors and kernel == reference."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from streamkit.protocols.adpcm import (
    INDEX_ADJUST,
    STEP_TABLE,
    AdpcmDecoder,
    AdpcmEncoder,
    adpcm_decode_kernel,
    adpcm_encode_kernel,
    decode_reference,
    encode_reference,
    warmup,
)
from streamkit.protocols.kiwi_frames import SndFlag, build_snd_frame

# --------------------------------------------------------------------------------------------
# test vectors
# --------------------------------------------------------------------------------------------

V1_IN = [0, 1000, 2000, 3000, 4000, 3000, 2000, 1000, 0, -1000, -2000, -3000, -4000, -3000, -2000, -1000]
V1_BYTES = bytes.fromhex("70 77 77 87 be cb 3b 34")
V1_DECODED = [0, 11, 41, 104, 240, 533, 1164, 1074, 5, -1014, -1941, -3024, -4043, -3116, -2033, -1014]
V1_STATE = (52, -1014)

V2_BYTES = bytes.fromhex("77 77 77 77 ff ff 08 80")
V2_DECODED = [
    11, 41, 104, 240, 533, 1164, 2521, 5431, -805, -14177, -32768, -32768, -32768, -29044, -25659, -28736,
]  # fmt: skip
V2_STATE = (84, -28736)

V3_BYTES16 = bytes.fromhex("70 77 77 fe ef 30 43 12 b9 bd 9a 31 45 02 a9 ad")
V3_STATE32 = (67, -3423)
V3_DECODED32 = [
    0, 11, 41, 104, 240, 533, -14, -1134, -3537, -8003, -7395, -3521, 1, 4118, 6885, 8394,
    7022, 4113, -45, -3919, -6435, -7807, -6561, -3915, -136, 4393, 7436, 7989, 6480, 4193, -380, -3423,
]  # fmt: skip

F1_SHA256 = "2eb67b2818b4107b73e789c68c4b9f70c8f37ec563c9668ac26f43e52b0fb79f"
F1_STATE = (68, -4322)
F2_START = bytes.fromhex("8a 30 25 03 b8 bd 8b 40 34 12 b9 be 8a 40 43 12")
F2_STATE = (65, 8325)
F2_CORRECT8 = [-7365, -7918, -7415, -4213, 360, 3403, 7277, 7780]
F2_WRONG_RESET8 = [-3, -3, -3, 1, 9, 15, 23, 24]


def sine(k0: int, k1: int) -> np.ndarray:
    """k = round(8000 sin(2 pi 1000 k / 12000)), the tone of V3/F1/F2."""
    k = np.arange(k0, k1)
    return np.round(8000 * np.sin(2 * np.pi * 1000 * k / 12000)).astype(np.int16)


def test_tables() -> None:
    assert len(STEP_TABLE) == 89 and STEP_TABLE[0] == 7 and STEP_TABLE[-1] == 32767
    assert INDEX_ADJUST == (-1, -1, -1, -1, 2, 4, 6, 8)


def test_instance() -> None:
    assert AdpcmDecoder().state == (0, 0)
    assert AdpcmEncoder().state == (0, 0)
    warmup()


class TestVectors:
    """The test vectors, all from state (0, 0)."""

    def test_v1_encode(self) -> None:
        enc = AdpcmEncoder()
        assert enc.encode(np.array(V1_IN, np.int16)) == V1_BYTES
        assert enc.state == V1_STATE
        assert encode_reference(V1_IN) == (V1_BYTES, *V1_STATE)

    def test_v1_decode(self) -> None:
        dec = AdpcmDecoder()
        assert dec.decode(V1_BYTES).tolist() == V1_DECODED
        assert dec.state == V1_STATE
        assert decode_reference(V1_BYTES) == (V1_DECODED, *V1_STATE)

    def test_v1_audioop_nibble_order(self) -> None:
        # audioop's output for V1 is the same codes with the nibbles swapped.
        audioop_bytes = bytes.fromhex("07 77 77 78 eb bc b3 43")
        swapped = bytes(((b & 0xF) << 4) | (b >> 4) for b in audioop_bytes)
        assert swapped == V1_BYTES

    def test_v2_decode_clamps(self) -> None:
        dec = AdpcmDecoder()
        out = dec.decode(V2_BYTES)
        assert out.dtype == np.int16
        assert out.tolist() == V2_DECODED
        assert dec.state == V2_STATE
        assert decode_reference(V2_BYTES) == (V2_DECODED, *V2_STATE)

    def test_v3_sine(self) -> None:
        x = sine(0, 32)
        assert x[:12].tolist() == [0, 4000, 6928, 8000, 6928, 4000, 0, -4000, -6928, -8000, -6928, -4000]
        enc = AdpcmEncoder()
        data = enc.encode(x)
        assert data == V3_BYTES16
        assert enc.state == V3_STATE32
        assert encode_reference(x.tolist()) == (V3_BYTES16, *V3_STATE32)
        assert AdpcmDecoder().decode(data).tolist() == V3_DECODED32

    def test_f1_frame_sha256(self) -> None:
        enc = AdpcmEncoder()
        frame = build_snd_frame(1, -73.0, sine(0, 2048), SndFlag.COMPRESSED, encoder=enc)
        assert len(frame) == 1034
        assert frame[:10] == bytes.fromhex("53 4e 44 10 01 00 00 00 02 1c")
        assert hashlib.sha256(frame).hexdigest() == F1_SHA256
        assert enc.state == F1_STATE
        # A fresh encoder (encoder=None) gives the same first frame.
        assert build_snd_frame(1, -73.0, sine(0, 2048), SndFlag.COMPRESSED) == frame

    def test_f2_continuation(self) -> None:
        enc = AdpcmEncoder()
        enc.encode(sine(0, 2048))
        f2 = enc.encode(sine(2048, 4096))
        assert len(f2) == 1024
        assert f2[:16] == F2_START
        assert enc.state == F2_STATE
        ref, idx, prev = encode_reference(sine(2048, 4096).tolist(), *F1_STATE)
        assert (ref, idx, prev) == (f2, *F2_STATE)

    def test_wrong_reset_example(self) -> None:
        """The state carries across frames: decoding the continuation frame with a reset decoder is badly wrong."""
        enc = AdpcmEncoder()
        f1 = enc.encode(sine(0, 2048))
        f2 = enc.encode(sine(2048, 4096))
        dec = AdpcmDecoder()
        dec.decode(f1)
        assert dec.state == F1_STATE
        assert dec.decode(f2)[:8].tolist() == F2_CORRECT8
        assert AdpcmDecoder().decode(f2)[:8].tolist() == F2_WRONG_RESET8
        assert decode_reference(f2, *F1_STATE)[0][:8] == F2_CORRECT8


# --------------------------------------------------------------------------------------------
# numba kernels vs the pure-Python reference
# --------------------------------------------------------------------------------------------


def _random_states(rng: np.random.Generator, n: int) -> list[tuple[int, int]]:
    states = [(0, 0), (88, 32767), (88, -32768), (0, -32768), (44, 0)]
    states += [(int(rng.integers(0, 89)), int(rng.integers(-32768, 32768))) for _ in range(n)]
    return states


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4])
def test_decode_kernel_matches_reference(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for index, prev in _random_states(rng, 3):
        data = rng.integers(0, 256, size=int(rng.integers(1, 3000)), dtype=np.uint8).tobytes()
        dec = AdpcmDecoder()
        dec.preset(index, prev)
        ref, ri, rp = decode_reference(data, index, prev)
        assert dec.decode(data).tolist() == ref
        assert dec.state == (ri, rp)


@pytest.mark.parametrize("code", [0x00, 0x77, 0xFF, 0x88, 0x0F, 0xF0])
def test_decode_extreme_codes(code: int) -> None:
    """Runs of the largest codes saturate both index (88) and prev (int16 limits)."""
    data = bytes([code]) * 500
    for index, prev in [(0, 0), (88, 32767), (88, -32768)]:
        dec = AdpcmDecoder()
        dec.preset(index, prev)
        ref, ri, rp = decode_reference(data, index, prev)
        assert dec.decode(data).tolist() == ref
        assert dec.state == (ri, rp)
        assert 0 <= ri <= 88 and -32768 <= rp <= 32767


def _extreme_signals(rng: np.random.Generator) -> list[np.ndarray]:
    n = 4000
    square = np.where(np.arange(n) % 2 == 0, 32767, -32768).astype(np.int16)
    slow_square = np.where((np.arange(n) // 50) % 2 == 0, 32767, -32768).astype(np.int16)
    noise = rng.integers(-32768, 32768, size=n, dtype=np.int16)
    return [
        square,
        slow_square,
        noise,
        np.full(n, 32767, np.int16),
        np.full(n, -32768, np.int16),
        np.zeros(n, np.int16),
        (rng.standard_normal(n) * 3000).clip(-32768, 32767).astype(np.int16),
    ]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_encode_kernel_matches_reference(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for x in _extreme_signals(rng):
        for index, prev in _random_states(rng, 2):
            enc = AdpcmEncoder()
            enc.preset(index, prev)
            ref, ri, rp = encode_reference(x.tolist(), index, prev)
            assert enc.encode(x) == ref
            assert enc.state == (ri, rp)


@pytest.mark.parametrize("seed", [10, 11, 12])
def test_decode_in_pieces_equals_at_once(seed: int) -> None:
    rng = np.random.default_rng(seed)
    data = rng.integers(0, 256, size=5000, dtype=np.uint8).tobytes()
    whole = AdpcmDecoder().decode(data)
    cuts = sorted({0, len(data), *rng.integers(0, len(data), size=12).tolist()})
    cuts += [len(data)]  # ensure a zero-length piece at the end too
    dec = AdpcmDecoder()
    pieces = [dec.decode(data[a:b]) for a, b in zip(cuts[:-1], cuts[1:], strict=True)]
    np.testing.assert_array_equal(np.concatenate(pieces), whole)
    # 1-byte pieces too
    dec1 = AdpcmDecoder()
    np.testing.assert_array_equal(np.concatenate([dec1.decode(data[i : i + 1]) for i in range(300)]), whole[:600])


@pytest.mark.parametrize("seed", [20, 21])
def test_encode_in_pieces_equals_at_once(seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(6000) * 5000).clip(-32768, 32767).astype(np.int16)
    whole = AdpcmEncoder().encode(x)
    cuts = sorted({0, len(x), *(2 * rng.integers(0, len(x) // 2, size=10)).tolist()})
    enc = AdpcmEncoder()
    pieces = b"".join(enc.encode(x[a:b]) for a, b in zip(cuts[:-1], cuts[1:], strict=True))
    assert pieces == whole


def test_kernels_called_directly_update_state_in_place() -> None:
    state = np.zeros(2, np.int32)
    out = np.empty(16, np.int16)
    adpcm_decode_kernel(np.frombuffer(V1_BYTES, np.uint8), out, state)
    assert out.tolist() == V1_DECODED
    assert tuple(state) == V1_STATE
    # writable input works as well (a second specialisation)
    state[:] = 0
    adpcm_decode_kernel(np.array(list(V1_BYTES), np.uint8), out, state)
    assert out.tolist() == V1_DECODED
    enc_state = np.zeros(2, np.int32)
    enc_out = np.empty(8, np.uint8)
    adpcm_encode_kernel(np.array(V1_IN, np.int16), enc_out, enc_state)
    assert enc_out.tobytes() == V1_BYTES
    assert tuple(enc_state) == V1_STATE


# --------------------------------------------------------------------------------------------
# wrappers
# --------------------------------------------------------------------------------------------


def test_round_trip_equals_encoder_reconstruction() -> None:
    """Decoder output == the encoder's own reconstruction (compare with the decoded reference)."""
    rng = np.random.default_rng(5)
    t = np.arange(24000) / 12000
    x = (6000 * np.sin(2 * np.pi * 440 * t) + 500 * rng.standard_normal(t.size)).astype(np.int16)
    enc = AdpcmEncoder()
    data = enc.encode(x)
    dec = AdpcmDecoder()
    y = dec.decode(data)
    assert y.tolist() == decode_reference(data)[0]
    assert dec.state == enc.state
    # and it is a decent codec once the index has climbed (the start-up transient of the vectors aside)
    err = y[2000:].astype(np.float64) - x[2000:]
    assert np.sqrt(np.mean(err**2)) < 0.1 * np.std(x)


def test_input_types_agree() -> None:
    expected = AdpcmDecoder().decode(V2_BYTES)
    arr = np.frombuffer(V2_BYTES, np.uint8)
    for data in (bytearray(V2_BYTES), memoryview(V2_BYTES), arr, arr.copy(), np.array(list(V2_BYTES), np.uint8)):
        np.testing.assert_array_equal(AdpcmDecoder().decode(data), expected)
    # a non-contiguous uint8 array is made contiguous first
    doubled = np.repeat(arr, 2)[::2]
    np.testing.assert_array_equal(AdpcmDecoder().decode(doubled), expected)
    # a writable caller array stays writable
    buf = arr.copy()
    AdpcmDecoder().decode(buf)
    assert buf.flags.writeable
    with pytest.raises(TypeError):
        AdpcmDecoder().decode(np.zeros(4, np.int16))  # type: ignore[arg-type]


def test_empty_input() -> None:
    dec = AdpcmDecoder()
    assert dec.decode(b"").shape == (0,)
    assert dec.state == (0, 0)
    assert AdpcmEncoder().encode(np.zeros(0, np.int16)) == b""
    assert decode_reference(b"") == ([], 0, 0)
    assert encode_reference([]) == (b"", 0, 0)


def test_encoder_rejects_bad_input() -> None:
    enc = AdpcmEncoder()
    with pytest.raises(ValueError, match="even"):
        enc.encode(np.zeros(3, np.int16))
    with pytest.raises(ValueError, match="even"):
        encode_reference([1, 2, 3])
    with pytest.raises(ValueError):
        enc.encode(np.zeros((2, 2), np.int16))
    with pytest.raises(ValueError):
        enc.encode(np.array([0, 40000]))
    with pytest.raises(ValueError):
        encode_reference([0, 40000])
    with pytest.raises(TypeError):
        enc.encode(np.array([0.5, 1.0]))
    assert enc.state == (0, 0)
    # in-range integers of another dtype are accepted
    assert enc.encode(np.array(V1_IN, np.int64)) == V1_BYTES


def test_preset_reset_and_validation() -> None:
    dec = AdpcmDecoder()
    dec.preset(68, -4322)
    assert dec.state == (68, -4322)
    dec.reset()
    assert dec.state == (0, 0)
    for bad in [(-1, 0), (89, 0), (0, 32768), (0, -32769)]:
        with pytest.raises(ValueError):
            dec.preset(*bad)
        with pytest.raises(ValueError):
            AdpcmEncoder().preset(*bad)
        with pytest.raises(ValueError):
            decode_reference(b"\x00", *bad)
    enc = AdpcmEncoder()
    enc.encode(np.array(V1_IN, np.int16))
    enc.reset()
    assert enc.state == (0, 0)
    enc.preset(*V1_STATE)
    assert enc.state == V1_STATE


def test_decode_is_one_compiled_call_per_frame(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 1024-byte frame is one call of the nopython-compiled kernel (its speed: benchmarks/kiwi_adpcm.py)."""
    import numba

    import streamkit.protocols.adpcm as adpcm_mod

    kernel = adpcm_mod.adpcm_decode_kernel
    assert isinstance(kernel, numba.core.registry.CPUDispatcher) and kernel.targetoptions.get("nopython")
    calls = []

    def counting(*args: object) -> None:
        calls.append(args)
        kernel(*args)

    monkeypatch.setattr(adpcm_mod, "adpcm_decode_kernel", counting)
    dec = AdpcmDecoder()
    frame = AdpcmEncoder().encode(sine(0, 2048))
    for _ in range(3):
        dec.decode(frame)
    assert len(calls) == 3  # one kernel call per frame, no per-sample Python loop
    assert kernel.signatures  # compiled for the arguments it was given (no object-mode fallback)
