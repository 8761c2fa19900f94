"""ctypes glue for streamkit's native C kernels (``native/adpcm.c``, ``native/stat_sad.c``).

The C sources are compiled by the package's own ``setup.py`` into ``streamkit/_native.<abi>.so``
(``pip install -e .`` builds it in place, next to ``streamkit/__init__.py``). The library has no
Python C-API and no ``PyInit__native``: it is *not* importable as a module, only loadable here.

API:

* :func:`available` -- True when the library was found and loaded;
* :func:`adpcm_decode` / :func:`adpcm_encode` -- the IMA ADPCM kernels with the Kiwi's nibble
  order (earlier sample in the low nibble) and the same explicit ``int32[2]`` state
  ``[index, prev]`` as the numba kernels of :mod:`streamkit.protocols.adpcm`, updated in place;
* :func:`stat_sad_batch` -- the statistical SAD's per-frame kernel, the same signature, the same
  caller-owned state arrays and the same algorithm as the numba kernel
  :func:`streamkit.dsp.kernels.minstat.stat_sad_batch` (state moves freely between the two);
  :func:`stat_sad_available` says whether this library has it (a library built before
  ``native/stat_sad.c`` existed still serves the ADPCM kernels);
* :func:`library_path`, :func:`load_error`.

Calls on small inputs keep the GIL, large ones release it (:data:`GIL_RELEASE_BYTES`).

When the library is missing every kernel call raises :class:`NativeUnavailableError` (a
``RuntimeError``) saying how to build it.
"""

from __future__ import annotations

import ctypes
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "ABI_VERSION",
    "GIL_RELEASE_BYTES",
    "NativeUnavailableError",
    "adpcm_decode",
    "adpcm_encode",
    "available",
    "library_path",
    "load_error",
    "stat_sad_available",
    "stat_sad_batch",
]

ABI_VERSION = 1
"""``sk_native_abi_version()`` this module was written for."""

STAT_SAD_ABI_VERSION = 2
"""``sk_stat_sad_abi_version()`` (``native/stat_sad.c``) this module was written for."""

_PKG_DIR = Path(__file__).resolve().parent
_PATTERNS = ("_native*.pyd", "_native*.dll") if sys.platform == "win32" else ("_native*.so", "_native*.dylib")

_lib: Any = None
_lib_gil: Any = None  # the same library through ctypes.PyDLL: calls keep the GIL
_path: Path | None = None
_sad_error: str | None = None  # why the loaded library has no usable stat SAD kernel

GIL_RELEASE_BYTES = 1 << 15
"""Calls on inputs at least this large (about 120 us of work) release the GIL (``ctypes.CDLL``);
smaller ones keep it (``ctypes.PyDLL``). A 1024-byte Kiwi frame takes ~4 us: releasing the GIL
for it would only invite a thread switch in a busy process, and re-acquiring the GIL after it can
cost up to the interpreter's switch interval (5 ms) when another thread is running."""
STAT_SAD_GIL_RELEASE_FRAMES = 8
""":func:`stat_sad_batch` calls with at least this many frames (about 10 us each) release the GIL."""
_error: str | None = None
_loaded = False
_load_lock = threading.Lock()


class NativeUnavailableError(RuntimeError):
    """The native C library is not built (or failed to load)."""


def _candidates() -> list[Path]:
    found: list[Path] = []
    for pattern in _PATTERNS:
        found.extend(sorted(_PKG_DIR.glob(pattern)))
    return found


def _prototype(lib: Any) -> None:
    for name in ("sk_adpcm_decode", "sk_adpcm_encode"):
        fn = getattr(lib, name)
        fn.restype = None
        # (const void *in, size_t n, void *out, int32_t *state): pointers are passed as
        # bytes objects, byref(c_char.from_buffer(array)) or plain addresses (ints)
        fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_void_p]


_VP, _I64 = ctypes.c_void_p, ctypes.c_int64


def _prototype_stat_sad(lib: Any) -> str | None:
    """Declare the stat SAD kernel; a reason string when this build lacks it or is stale."""
    try:
        abi = lib.sk_stat_sad_abi_version
    except AttributeError:
        return "the library was built before native/stat_sad.c existed (stale build)"
    abi.restype = ctypes.c_int
    abi.argtypes = []
    if abi() != STAT_SAD_ABI_VERSION:
        return f"stat_sad ABI version {abi()} != {STAT_SAD_ABI_VERSION} (stale build)"
    fn = lib.sk_stat_sad_batch
    fn.restype = ctypes.c_int
    # y2, k, K, gammas, S, hp_w, lpc_w, lpc_c, bands, B, cfg, ms_vec, ms_buf, U, ms_scal, ms_par, fst, scores
    fn.argtypes = [_VP, _I64, _I64, _VP, _I64, _VP, _VP, _VP, _VP, _I64, _VP, _VP, _VP, _I64, _VP, _VP, _VP, _VP]
    return None


def _load() -> Any:
    if _loaded:
        return _lib
    with _load_lock:
        if not _loaded:
            _load_locked()
    return _lib


def _load_locked() -> None:
    global _loaded
    try:
        _find_and_open()
    finally:
        _loaded = True  # only now: a thread that skips the lock must see the final _lib


def _find_and_open() -> None:
    global _lib, _lib_gil, _path, _error, _sad_error
    candidates = _candidates()
    if not candidates:
        _error = f"no {' or '.join(_PATTERNS)} in {_PKG_DIR}"
        return
    errors = []
    for path in candidates:
        try:
            lib = ctypes.CDLL(str(path))
            abi = lib.sk_native_abi_version
            abi.restype = ctypes.c_int
            abi.argtypes = []
            if abi() != ABI_VERSION:
                errors.append(f"{path.name}: ABI version {abi()} != {ABI_VERSION} (stale build)")
                continue
            _prototype(lib)
            lib_gil = ctypes.PyDLL(str(path))
            _prototype(lib_gil)
            init = lib.sk_adpcm_init
            init.restype = None
            init.argtypes = []
            init()  # build the decode tables now, before any (GIL-free) concurrent call
            sad_error = _prototype_stat_sad(lib)
            if sad_error is None:
                _prototype_stat_sad(lib_gil)
        except (OSError, AttributeError) as exc:
            errors.append(f"{path.name}: {exc}")
            continue
        _lib, _lib_gil, _path = lib, lib_gil, path
        _sad_error = f"{path.name}: {sad_error}" if sad_error else None
        return
    _error = "; ".join(errors)


def available() -> bool:
    """True when the native library is built and loads (its ABI version matches)."""
    return _load() is not None


def stat_sad_available() -> bool:
    """True when the library is loaded and has the statistical SAD kernel (``native/stat_sad.c``)."""
    return _load() is not None and _sad_error is None


def library_path() -> Path | None:
    """Path of the loaded library, or None."""
    _load()
    return _path


def load_error() -> str | None:
    """Why the library is unavailable (None when it loaded)."""
    _load()
    return _error


def _require() -> Any:
    lib = _load()
    if lib is None:
        raise NativeUnavailableError(
            "streamkit's native C kernels are not available "
            f"({_error}). Build them with `pip install -e .` from the repository root "
            "(needs a C compiler; setup.py compiles native/adpcm.c into streamkit/_native*.so), "
            "or use the numba kernels in streamkit.protocols.adpcm."
        )
    return lib


def _check_state(state: Any) -> NDArray[np.int32]:
    if (
        not isinstance(state, np.ndarray)
        or state.dtype != np.int32
        or state.shape != (2,)
        or not state.flags.c_contiguous
        or not state.flags.writeable
    ):
        raise TypeError("state must be a writeable, contiguous numpy int32 array of shape (2,): [index, prev]")
    index, prev = state.tolist()
    if not (0 <= index <= 88 and -32768 <= prev <= 32767):
        raise ValueError(f"ADPCM state out of range: index {index} (0..88), prev {prev} (int16)")
    return state


_from_buffer = ctypes.c_char.from_buffer
_byref = ctypes.byref


def _ptr(a: np.ndarray) -> Any:
    """A ctypes pointer argument to a non-empty contiguous array's data.

    ``byref(c_char.from_buffer(a))`` costs ~0.3 us (and keeps ``a`` alive for the call); a
    read-only array falls back to its address from ``__array_interface__`` (~0.8 us).
    """
    if a.flags.writeable:
        return _byref(_from_buffer(a))
    return a.__array_interface__["data"][0]


def adpcm_decode(
    data: bytes | bytearray | memoryview | NDArray[np.uint8],
    state: NDArray[np.int32],
    out: NDArray[np.int16] | None = None,
) -> NDArray[np.int16]:
    """Decode IMA ADPCM bytes (earlier sample in the low nibble) into ``2 * len(data)`` int16.

    Args:
        data: ADPCM bytes: any buffer or a 1-D uint8 array (not copied when contiguous).
        state: ``int32[2]`` array ``[index, prev]``; read and updated in place, so decoding a
            stream in pieces equals decoding it at once.
        out: Optional int16 output buffer with at least ``2 * len(data)`` elements; the
            first ``2 * len(data)`` are written and returned as a view.

    Returns:
        The decoded samples (``out[: 2 * len(data)]`` if ``out`` was given).

    Raises:
        NativeUnavailableError: the library is not built.
        TypeError, ValueError: bad ``data``, ``state`` or ``out``.
    """
    lib = _require()
    _check_state(state)
    src: Any
    if isinstance(data, bytes):
        src, n = data, len(data)  # ctypes passes a bytes object's own buffer: no copy
    elif isinstance(data, np.ndarray):
        if data.dtype != np.uint8:
            raise TypeError(f"ADPCM data must be uint8, got {data.dtype}")
        arr = np.ascontiguousarray(data.reshape(-1))
        src, n = arr, arr.shape[0]
    else:
        arr = np.frombuffer(data, dtype=np.uint8)
        src, n = arr, arr.shape[0]
    if out is None:
        dst = np.empty(2 * n, dtype=np.int16)
    else:
        if out.dtype != np.int16 or out.ndim != 1 or not out.flags.c_contiguous or not out.flags.writeable or out.shape[0] < 2 * n:
            raise TypeError(f"out must be a writeable contiguous 1-D int16 array of at least {2 * n} elements")
        dst = out[: 2 * n]
    if n:
        fn = (lib if n >= GIL_RELEASE_BYTES else _lib_gil).sk_adpcm_decode
        fn(src if isinstance(src, bytes) else _ptr(src), n, _ptr(dst), _ptr(state))
    return dst


def adpcm_encode(
    samples: NDArray[np.int16],
    state: NDArray[np.int32],
    out: NDArray[np.uint8] | None = None,
) -> NDArray[np.uint8]:
    """Encode an even number of int16 samples into ``len(samples) // 2`` IMA ADPCM bytes.

    Args:
        samples: 1-D int16 array (other integer arrays are accepted if within int16).
        state: ``int32[2]`` array ``[index, prev]``; read and updated in place.
        out: Optional uint8 output buffer with at least ``len(samples) // 2`` elements.

    Returns:
        The ADPCM bytes as a uint8 array, earlier sample of each pair in the low nibble.

    Raises:
        NativeUnavailableError: the library is not built.
        TypeError, ValueError: odd length, not 1-D, values outside int16, bad ``state``/``out``.
    """
    lib = _require()
    _check_state(state)
    x = np.asarray(samples)
    if x.ndim != 1:
        raise ValueError(f"samples must be 1-D, got shape {x.shape}")
    if x.dtype != np.int16:
        if x.size and x.dtype.kind not in "iu":
            raise TypeError(f"samples must be int16 (or integers in range), got {x.dtype}")
        if x.size and (int(x.min()) < -32768 or int(x.max()) > 32767):
            raise ValueError("samples outside the int16 range")
        x = x.astype(np.int16)
    x = np.ascontiguousarray(x)
    n = x.shape[0]
    if n % 2:
        raise ValueError(f"ADPCM encoding needs an even number of samples, got {n}")
    if out is None:
        dst = np.empty(n // 2, dtype=np.uint8)
    else:
        if out.dtype != np.uint8 or out.ndim != 1 or not out.flags.c_contiguous or not out.flags.writeable or out.shape[0] < n // 2:
            raise TypeError(f"out must be a writeable contiguous 1-D uint8 array of at least {n // 2} elements")
        dst = out[: n // 2]
    if n:
        fn = (lib if n >= 2 * GIL_RELEASE_BYTES else _lib_gil).sk_adpcm_encode
        fn(_ptr(x), n, _ptr(dst), _ptr(state))
    return dst


# -- statistical SAD -------------------------------------------------------------------------------


def _require_stat_sad() -> Any:
    lib = _load()
    if lib is None or _sad_error is not None:
        why = _error if lib is None else _sad_error
        raise NativeUnavailableError(
            "streamkit's native statistical SAD kernel is not available "
            f"({why}). Build it with `pip install -e .` from the repository root "
            "(needs a C compiler; setup.py compiles native/stat_sad.c into streamkit/_native*.so), "
            'or use backend="numba".'
        )
    return lib


def _f64(name: str, a: Any, shape: tuple[int, ...], writeable: bool = False) -> np.ndarray:
    if (
        not isinstance(a, np.ndarray)
        or a.dtype != np.float64
        or a.shape != shape
        or not a.flags.c_contiguous
        or (writeable and not a.flags.writeable)
    ):
        got = f"{a.dtype} {a.shape}" if isinstance(a, np.ndarray) else type(a).__name__
        raise TypeError(f"stat_sad_batch: {name} must be a {'writeable ' if writeable else ''}contiguous float64 array of shape {shape}, got {got}")
    return a


def stat_sad_batch(
    y2: NDArray[np.float64],
    gammas: NDArray[np.float64],
    hp_w: NDArray[np.float64],
    lpc_w: NDArray[np.float64],
    lpc_c: NDArray[np.float64],
    bands: NDArray[np.int64],
    cfg: NDArray[np.float64],
    ms_vec: NDArray[np.float64],
    ms_buf: NDArray[np.float64],
    ms_scal: NDArray[np.float64],
    ms_par: NDArray[np.float64],
    fst: NDArray[np.float64],
    scores: NDArray[np.float64],
) -> None:
    """The C twin of :func:`streamkit.dsp.kernels.minstat.stat_sad_batch` (same arguments, same state).

    Soft speech scores of the ``k`` periodogram frames ``y2`` (k, K) into ``scores`` (k,); the
    tracker states ``ms_vec`` (S, 8, K), ``ms_buf`` (S, U, K), ``ms_scal`` (S, 4) and the feature
    state ``fst`` (2 + 3B,) are updated in place. Results agree with the numba kernel to rounding
    (not bit for bit: see ``native/stat_sad.c``).

    Raises:
        NativeUnavailableError: the library (or its stat SAD kernel) is not built.
        TypeError, ValueError: arrays of the wrong dtype, layout or shape.
    """
    lib = _require_stat_sad()
    if not isinstance(y2, np.ndarray) or y2.ndim != 2:
        raise TypeError("stat_sad_batch: y2 must be a 2-D float64 array (frames, bins)")
    k, K = y2.shape
    _f64("y2", y2, (k, K))
    S = gammas.shape[0] if isinstance(gammas, np.ndarray) and gammas.ndim == 1 else -1
    _f64("gammas", gammas, (S,))
    for name, a in (("hp_w", hp_w), ("lpc_w", lpc_w), ("lpc_c", lpc_c)):
        _f64(name, a, (K,))
    if not isinstance(bands, np.ndarray) or bands.dtype != np.int64 or bands.ndim != 2 or bands.shape[1] != 2 or not bands.flags.c_contiguous:
        raise TypeError("stat_sad_batch: bands must be a contiguous int64 array of shape (B, 2)")
    B = bands.shape[0]
    U = ms_buf.shape[1] if isinstance(ms_buf, np.ndarray) and ms_buf.ndim == 3 else -1
    _f64("cfg", cfg, (13,))
    _f64("ms_vec", ms_vec, (S, 8, K), True)
    _f64("ms_buf", ms_buf, (S, U, K), True)
    _f64("ms_scal", ms_scal, (S, 4), True)
    _f64("ms_par", ms_par, (21,))
    _f64("fst", fst, (2 + 3 * B,), True)
    _f64("scores", scores, (k,), True)
    if k == 0:
        return
    fn = (lib if k >= STAT_SAD_GIL_RELEASE_FRAMES else _lib_gil).sk_stat_sad_batch
    rc = fn(_ptr(y2), k, K, _ptr(gammas), S, _ptr(hp_w), _ptr(lpc_w), _ptr(lpc_c), _ptr(bands), B, _ptr(cfg),
            _ptr(ms_vec), _ptr(ms_buf), U, _ptr(ms_scal), _ptr(ms_par), _ptr(fst), _ptr(scores))  # fmt: skip
    if rc != 0:
        raise ValueError(f"stat_sad_batch: parameters do not fit the arrays (C kernel returned {rc}: "
                         "ms_par's U must equal ms_buf.shape[1], 1 <= bands_needed <= B, bands inside 0..K)")  # fmt: skip
