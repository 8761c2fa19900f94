"""The native C ADPCM kernels (native/adpcm.c via streamkit.native) against the numba kernels and
the pure-Python reference of streamkit.protocols.adpcm, bit-exactly, on the Kiwi ADPCM test
vectors and on random data with the state carried across splits.

These tests FAIL (they do not skip) when the library is not built: CI builds it with
``pip install -e .[test]`` (``make test``).
"""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from streamkit import native
from streamkit.protocols.adpcm import (
    AdpcmDecoder,
    AdpcmEncoder,
    adpcm_decode_kernel,
    adpcm_encode_kernel,
    decode_reference,
    encode_reference,
)
from streamkit.protocols.kiwi_frames import SndFlag, build_snd_frame

BUILD_HINT = (
    "the native C library streamkit/_native*.so is not built ({why}). Build it with "
    "`pip install -e .` (or `make test`, which runs `pip install -e .[test]`); it needs a C compiler."
)


def lib() -> None:
    """Fail (not skip) when the library is missing, saying how to build it."""
    if not native.available():
        pytest.fail(BUILD_HINT.format(why=native.load_error()), pytrace=False)


def st(index: int = 0, prev: int = 0) -> np.ndarray:
    return np.array([index, prev], dtype=np.int32)


def numba_decode(data: bytes, state: np.ndarray) -> np.ndarray:
    out = np.empty(2 * len(data), dtype=np.int16)
    adpcm_decode_kernel(np.frombuffer(data, dtype=np.uint8), out, state)
    return out


def numba_encode(x: np.ndarray, state: np.ndarray) -> bytes:
    out = np.empty(x.shape[0] // 2, dtype=np.uint8)
    adpcm_encode_kernel(np.ascontiguousarray(x, dtype=np.int16), out, state)
    return out.tobytes()


def sine(k0: int, k1: int) -> np.ndarray:
    k = np.arange(k0, k1)
    return np.round(8000 * np.sin(2 * np.pi * 1000 * k / 12000)).astype(np.int16)


# ------------------------------------------------------------------ test vectors

V1_IN = np.array([0, 1000, 2000, 3000, 4000, 3000, 2000, 1000, 0, -1000, -2000, -3000, -4000, -3000, -2000, -1000], dtype=np.int16)
V1_BYTES = bytes.fromhex("70 77 77 87 be cb 3b 34")
V1_DECODED = [0, 11, 41, 104, 240, 533, 1164, 1074, 5, -1014, -1941, -3024, -4043, -3116, -2033, -1014]
V2_BYTES = bytes.fromhex("77 77 77 77 ff ff 08 80")
V2_DECODED = [11, 41, 104, 240, 533, 1164, 2521, 5431, -805, -14177, -32768, -32768, -32768, -29044, -25659, -28736]
V3_BYTES16 = bytes.fromhex("70 77 77 fe ef 30 43 12 b9 bd 9a 31 45 02 a9 ad")
V3_DECODED = [0, 11, 41, 104, 240, 533, -14, -1134, -3537, -8003, -7395, -3521, 1, 4118, 6885, 8394,
              7022, 4113, -45, -3919, -6435, -7807, -6561, -3915, -136, 4393, 7436, 7989, 6480, 4193, -380, -3423]  # fmt: skip


def test_library_is_built_and_loads() -> None:
    lib()
    assert native.library_path() is not None
    assert native.library_path().parent.name == "streamkit"


def test_v1_encode() -> None:
    lib()
    s = st()
    assert native.adpcm_encode(V1_IN, s).tobytes() == V1_BYTES
    assert tuple(s) == (52, -1014)
    s_nb = st()
    assert numba_encode(V1_IN, s_nb) == V1_BYTES
    ref, idx, prev = encode_reference(V1_IN.tolist())
    assert ref == V1_BYTES and (idx, prev) == (52, -1014)


def test_v1_decode() -> None:
    lib()
    s = st()
    assert native.adpcm_decode(V1_BYTES, s).tolist() == V1_DECODED
    assert tuple(s) == (52, -1014)
    assert decode_reference(V1_BYTES) == (V1_DECODED, 52, -1014)
    s_nb = st()
    assert numba_decode(V1_BYTES, s_nb).tolist() == V1_DECODED and tuple(s_nb) == (52, -1014)


def test_v2_decode_clamps() -> None:
    lib()
    s = st()
    assert native.adpcm_decode(V2_BYTES, s).tolist() == V2_DECODED
    assert tuple(s) == (84, -28736)


def test_v3_sine() -> None:
    lib()
    s = st()
    data = native.adpcm_encode(sine(0, 32), s).tobytes()
    assert data == V3_BYTES16 and tuple(s) == (67, -3423)
    s = st()
    assert native.adpcm_decode(data, s).tolist() == V3_DECODED


def test_f1_f2_frames_state_carried() -> None:
    """F1 (whole SND message, SHA-256 from the notes) and its continuation F2."""
    lib()
    s = st()
    payload = native.adpcm_encode(sine(0, 2048), s).tobytes()
    assert tuple(s) == (68, -4322)
    frame = build_snd_frame(1, -73.0, payload, SndFlag.COMPRESSED)
    assert len(frame) == 1034
    assert hashlib.sha256(frame).hexdigest() == "2eb67b2818b4107b73e789c68c4b9f70c8f37ec563c9668ac26f43e52b0fb79f"
    payload2 = native.adpcm_encode(sine(2048, 4096), s).tobytes()
    assert payload2[:16] == bytes.fromhex("8a 30 25 03 b8 bd 8b 40 34 12 b9 be 8a 40 43 12")
    assert tuple(s) == (65, 8325)
    # and the numba encoder agrees on both frames
    enc = AdpcmEncoder()
    assert enc.encode(sine(0, 2048)) == payload and enc.encode(sine(2048, 4096)) == payload2


# ------------------------------------------------------------------ random data, split streams


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_decode_equals_numba_and_reference_across_splits(seed: int) -> None:
    lib()
    rng = np.random.default_rng(seed)
    data = rng.integers(0, 256, 6000, dtype=np.uint8).tobytes()
    whole = numba_decode(data, st())
    ref, ref_idx, ref_prev = decode_reference(data)
    assert whole.tolist() == ref
    # random split points, state carried from piece to piece (incl. empty pieces)
    cuts = np.sort(rng.integers(0, len(data) + 1, 25))
    s = st()
    pieces = [native.adpcm_decode(data[a:b], s) for a, b in zip([0, *cuts], [*cuts, len(data)])]
    got = np.concatenate(pieces)
    assert got.dtype == np.int16
    np.testing.assert_array_equal(got, whole)
    assert tuple(s) == (ref_idx, ref_prev)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_encode_equals_numba_and_reference_across_splits(seed: int) -> None:
    lib()
    rng = np.random.default_rng(seed)
    n = 8000
    # a mix of full-scale noise (clamping, fast index swings) and a quiet tone
    x = np.concatenate([rng.integers(-32768, 32768, n // 2), (3000 * np.sin(np.arange(n // 2) * 0.05)).astype(np.int64)]).astype(np.int16)
    ref, ref_idx, ref_prev = encode_reference(x.tolist())
    s_nb = st()
    assert numba_encode(x, s_nb) == ref and tuple(s_nb) == (ref_idx, ref_prev)
    cuts = np.sort(rng.integers(0, n // 2 + 1, 20)) * 2  # even split points
    s = st()
    got = b"".join(native.adpcm_encode(x[a:b], s).tobytes() for a, b in zip([0, *cuts], [*cuts, n]))
    assert got == ref and tuple(s) == (ref_idx, ref_prev)


def test_large_inputs_release_the_gil_and_agree() -> None:
    """Inputs above GIL_RELEASE_BYTES go through the GIL-releasing handle: same results."""
    lib()
    rng = np.random.default_rng(9)
    big = rng.integers(0, 256, native.GIL_RELEASE_BYTES + 1000, dtype=np.uint8).tobytes()
    s_big, s_nb = st(), st()
    np.testing.assert_array_equal(native.adpcm_decode(big, s_big), numba_decode(big, s_nb))
    assert tuple(s_big) == tuple(s_nb)
    x = rng.integers(-20000, 20000, 2 * native.GIL_RELEASE_BYTES + 2000).astype(np.int16)
    s1, s2 = st(), st()
    assert native.adpcm_encode(x, s1).tobytes() == numba_encode(x, s2) and tuple(s1) == tuple(s2)


def test_nonzero_initial_state_and_numba_wrapper() -> None:
    """A preset state (camp mode) gives the same result in all three decoders."""
    lib()
    rng = np.random.default_rng(5)
    data = rng.integers(0, 256, 1024, dtype=np.uint8).tobytes()
    for index, prev in [(0, 0), (88, 32767), (88, -32768), (40, -1234), (1, 5)]:
        ref, ri, rp = decode_reference(data, index, prev)
        s = st(index, prev)
        assert native.adpcm_decode(data, s).tolist() == ref and tuple(s) == (ri, rp)
        d = AdpcmDecoder()
        d.preset(index, prev)
        assert d.decode(data).tolist() == ref and d.state == (ri, rp)


def test_input_and_output_forms() -> None:
    lib()
    data = bytes(range(256)) * 4
    expect = numba_decode(data, st())
    arr = np.frombuffer(data, dtype=np.uint8)
    np.testing.assert_array_equal(native.adpcm_decode(arr, st()), expect)
    np.testing.assert_array_equal(native.adpcm_decode(memoryview(data), st()), expect)
    np.testing.assert_array_equal(native.adpcm_decode(bytearray(data), st()), expect)
    np.testing.assert_array_equal(native.adpcm_decode(arr[::2].copy(), st()), numba_decode(data[::2], st()))
    out = np.full(2 * len(data) + 10, 7, dtype=np.int16)
    view = native.adpcm_decode(data, st(), out=out)
    np.testing.assert_array_equal(view, expect)
    assert np.shares_memory(view, out) and (out[-10:] == 7).all()
    assert native.adpcm_decode(b"", st()).shape == (0,)
    # encoder: any integer dtype in range; output buffer
    x = (np.arange(64) * 300 - 9000).astype(np.int32)
    s1, s2 = st(), st()
    b1 = native.adpcm_encode(x, s1)
    obuf = np.zeros(40, dtype=np.uint8)
    b2 = native.adpcm_encode(x.astype(np.int16), s2, out=obuf)
    assert b1.tobytes() == b2.tobytes() == encode_reference(x.tolist())[0]


def test_bad_arguments() -> None:
    lib()
    with pytest.raises(TypeError):
        native.adpcm_decode(b"\x00", np.zeros(2, dtype=np.int64))
    with pytest.raises(TypeError):
        native.adpcm_decode(b"\x00", np.zeros(3, dtype=np.int32))
    with pytest.raises(ValueError):
        native.adpcm_decode(b"\x00", st(89, 0))
    with pytest.raises(TypeError):
        native.adpcm_decode(np.zeros(4, dtype=np.int16), st())
    with pytest.raises(TypeError):
        native.adpcm_decode(b"\x00\x00", st(), out=np.zeros(3, dtype=np.int16))
    with pytest.raises(ValueError):
        native.adpcm_encode(np.zeros(3, dtype=np.int16), st())
    with pytest.raises(ValueError):
        native.adpcm_encode(np.array([40000, 0]), st())
    with pytest.raises(TypeError):
        native.adpcm_encode(np.zeros(2, dtype=np.float32), st())
    ro = st()
    ro.flags.writeable = False
    with pytest.raises(TypeError):
        native.adpcm_decode(b"\x00", ro)


def test_unavailable_message_says_how_to_build(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Without the library every kernel raises a RuntimeError naming `pip install -e .`."""
    monkeypatch.setattr(native, "_PKG_DIR", tmp_path)
    monkeypatch.setattr(native, "_loaded", False)
    monkeypatch.setattr(native, "_lib", None)
    monkeypatch.setattr(native, "_lib_gil", None)
    monkeypatch.setattr(native, "_path", None)
    monkeypatch.setattr(native, "_error", None)
    assert not native.available()
    with pytest.raises(native.NativeUnavailableError, match=r"pip install -e \.") as info:
        native.adpcm_decode(b"\x00", st())
    assert isinstance(info.value, RuntimeError)
    with pytest.raises(native.NativeUnavailableError):
        native.adpcm_encode(np.zeros(2, dtype=np.int16), st())
