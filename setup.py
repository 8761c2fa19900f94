"""Build hook for streamkit's native C kernels (all metadata lives in pyproject.toml).

``native/adpcm.c`` and ``native/stat_sad.c`` are compiled into ``streamkit/_native.<abi>.so``
(``.pyd`` on Windows): a plain shared library with no Python C-API and no ``PyInit__native``, loaded
by ``streamkit/native.py`` through ctypes. With ``pip install -e .`` (PEP 660) setuptools builds
extensions in place, so the library lands next to ``streamkit/__init__.py``, where
``streamkit/native.py`` looks for it.

A missing or failing C compiler must not fail the install: the error is reported as a warning
and the package installs without the native backend (``streamkit.native.available()`` is then
False and the numba kernels are used).
"""

from __future__ import annotations

import sys
import warnings

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class NativeBuildExt(build_ext):
    """build_ext for ctypes-loaded libraries: no init-function export, never fatal."""

    def get_export_symbols(self, ext: Extension) -> list[str]:
        # The default adds "PyInit_<name>" (only used when linking a Windows .pyd, where the
        # linker would fail because the C file defines no such function). The functions are
        # exported by the SK_EXPORT attribute in the source instead.
        return list(ext.export_symbols or [])

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # no compiler at all (DistutilsPlatformError), ...
            self._warn(exc)

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as exc:  # CompileError, LinkError, OSError ...
            self._warn(exc, ext.name)

    @staticmethod
    def _warn(exc: BaseException, name: str = "streamkit._native") -> None:
        msg = (
            f"streamkit: could not build the native C kernels ({name}): {type(exc).__name__}: {exc}. "
            "Installing without them; streamkit.native.available() will be False "
            "(install a C compiler and re-run `pip install -e .` to build them)."
        )
        warnings.warn(msg, stacklevel=1)
        print(f"WARNING: {msg}", file=sys.stderr)


extra_compile_args = [] if sys.platform == "win32" else ["-O3", "-std=c99"]

setup(
    ext_modules=[
        Extension(
            "streamkit._native",
            sources=["native/adpcm.c", "native/stat_sad.c"],
            libraries=[] if sys.platform == "win32" else ["m"],  # stat_sad.c: exp, log10, pow, sqrt
            extra_compile_args=extra_compile_args,
            py_limited_api=False,
            optional=True,  # a failed build is skipped (and not copied in place), not fatal
        )
    ],
    cmdclass={"build_ext": NativeBuildExt},
)
