"""Output files: nothing but a regular file is ever replaced; whole files are written atomically.

No test writes to a device: the char-device case only checks /dev/null without opening it.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys

import numpy as np
import pytest

from streamkit.core.errors import ConfigError
from streamkit.io.outputs import (
    OutputPathError,
    atomic_output,
    check_output_path,
    open_soundfile,
    open_stream,
    open_stream_fd,
    write_audio,
    write_bytes,
    write_text,
)

sf = pytest.importorskip("soundfile")


def not_regular(tmp_path):
    """(name, path, what the error says) for a symlink, a FIFO and a directory in tmp_path."""
    target = tmp_path / "target.txt"
    target.write_text("target content\n")
    link = tmp_path / "link"
    link.symlink_to(target)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    d = tmp_path / "dir"
    d.mkdir()
    (d / "keep").write_text("k")
    return [("symlink", link, "is a symlink"), ("fifo", fifo, "is a FIFO"), ("directory", d, "is a directory")]


def unchanged(tmp_path):
    """The things of :func:`not_regular` are as they were, and no temporary file is left."""
    assert (tmp_path / "link").is_symlink() and os.readlink(tmp_path / "link") == str(tmp_path / "target.txt")
    assert (tmp_path / "target.txt").read_text() == "target content\n"
    assert stat.S_ISFIFO(os.lstat(tmp_path / "fifo").st_mode)
    assert (tmp_path / "dir").is_dir() and os.listdir(tmp_path / "dir") == ["keep"]
    assert not [p for p in os.listdir(tmp_path) if "tmp" in p]


# -------------------------------------------------------------------------------- the helper
def test_char_device_is_refused_by_the_check_alone():
    # only lstat: /dev/null is neither opened nor written
    with pytest.raises(OutputPathError, match=r"^/dev/null: is a character device, not a regular file"):
        check_output_path("/dev/null")
    assert stat.S_ISCHR(os.lstat("/dev/null").st_mode)


def test_free_path_and_regular_file_pass_the_check(tmp_path):
    assert check_output_path(tmp_path / "new.txt") == tmp_path / "new.txt"
    (tmp_path / "old.txt").write_text("x")
    assert check_output_path(tmp_path / "old.txt") == tmp_path / "old.txt"


@pytest.mark.parametrize("writer", ["write_text", "write_bytes", "write_audio", "atomic_output", "open_stream", "open_stream_append"])
def test_every_writer_refuses_what_is_not_a_regular_file(tmp_path, writer):
    for _, p, msg in not_regular(tmp_path):
        with pytest.raises(OutputPathError, match=f"{msg}, not a regular file"):
            if writer == "write_text":
                write_text(p, "new\n")
            elif writer == "write_bytes":
                write_bytes(p, b"new\n")
            elif writer == "write_audio":
                write_audio(p, np.zeros(10, np.float32), 8000)
            elif writer == "atomic_output":
                with atomic_output(p, "wb") as f:
                    f.write(b"new\n")
            else:
                open_stream(p, append=writer.endswith("append")).close()
    unchanged(tmp_path)
    assert isinstance(OutputPathError("x"), ConfigError)  # the CLI prints it as one line, exit 2


def test_atomic_write_replaces_a_regular_file_and_keeps_its_mode(tmp_path):
    p = tmp_path / "sub" / "out.txt"
    write_text(p, "old\n")  # parents created
    os.chmod(p, 0o640)
    write_text(p, "new\n")
    assert p.read_text() == "new\n" and stat.S_IMODE(os.stat(p).st_mode) == 0o640
    assert os.listdir(p.parent) == ["out.txt"]


def test_a_failure_mid_write_leaves_the_old_file(tmp_path):
    p = tmp_path / "out.bin"
    p.write_bytes(b"old content")
    with pytest.raises(RuntimeError, match="disk on fire"):
        with atomic_output(p, "wb") as f:
            f.write(b"half of the new")
            raise RuntimeError("disk on fire")
    assert p.read_bytes() == b"old content"
    assert os.listdir(tmp_path) == ["out.bin"]  # the temporary file is gone


def test_a_path_replaced_by_a_symlink_during_the_write_is_refused(tmp_path):
    p = tmp_path / "out.txt"
    target = tmp_path / "target.txt"
    target.write_text("target\n")
    with pytest.raises(OutputPathError, match="is a symlink"):
        with atomic_output(p) as f:
            f.write("new\n")
            p.symlink_to(target)  # something else appears at the path before the rename
    assert p.is_symlink() and target.read_text() == "target\n"
    assert sorted(os.listdir(tmp_path)) == ["out.txt", "target.txt"]


def test_write_audio_by_suffix(tmp_path):
    x = (0.1 * np.sin(np.arange(800) / 5)).astype(np.float32)
    for name in ("a.wav", "a.flac"):
        write_audio(tmp_path / name, x, 8000, subtype="PCM_16")
        y, rate = sf.read(tmp_path / name, dtype="float32")
        assert rate == 8000 and np.abs(y - x).max() < 1e-4


def test_open_stream_appends_or_truncates_regular_files(tmp_path):
    p = tmp_path / "ev" / "log.jsonl"
    for line in ("a", "b"):
        with open_stream(p, append=True) as f:
            f.write(line + "\n")
    assert p.read_text() == "a\nb\n"
    with open_stream(p) as f:
        f.write("c\n")
    assert p.read_text() == "c\n"
    fd = open_stream_fd(p, append=True, read=True)
    try:
        assert os.read(fd, 10) == b"c\n"
    finally:
        os.close(fd)


def test_open_soundfile_writes_and_leaks_no_descriptor_on_errors(tmp_path):
    p = tmp_path / "rec.wav"
    p.write_bytes(b"old recording, longer than the new one" * 100)
    with open_soundfile(p, samplerate=8000, channels=1, subtype="PCM_16", format="WAV") as f:
        f.write(np.full(80, 0.25, np.float32))
    y, rate = sf.read(p, dtype="float32")
    assert rate == 8000 and y.shape == (80,) and np.allclose(y, 0.25, atol=1e-4)
    fds = len(os.listdir("/proc/self/fd"))
    with pytest.raises(ValueError):  # refused by soundfile before libsndfile gets the descriptor
        open_soundfile(p, samplerate=8000, channels=1, subtype="VORBIS", format="WAV")
    with pytest.raises(RuntimeError):  # refused by libsndfile, which closes the descriptor itself
        open_soundfile(p, samplerate=8000, channels=0, format="WAV")
    assert len(os.listdir("/proc/self/fd")) == fds


# -------------------------------------------------------------------------------- streaming sinks
@pytest.mark.timeout(60)  # opening a FIFO for writing would block (no reader)
def test_wav_sink_refuses_a_fifo_and_a_symlink(tmp_path):
    from streamkit.core.graph import Graph
    from streamkit.core.runtime import Runner
    from streamkit.io.collect import VectorSource
    from streamkit.io.wav_sink import WavSink

    not_regular(tmp_path)
    for path in (tmp_path / "fifo", tmp_path / "link", tmp_path / "rec.wav"):
        if path.name == "rec.wav":  # a free recording path whose sidecar path is a symlink
            (tmp_path / "rec.wav.json").symlink_to(tmp_path / "target.txt")
        g = Graph("rec")
        g.add(VectorSource(samples=np.zeros((100, 1), np.float32), rate=8000), name="src")
        g.add(WavSink(path=str(path)), name="wav")
        g.connect("src", "wav")
        with pytest.raises(OutputPathError, match="is a (FIFO|symlink)"):
            Runner(g, stats_interval_s=0).run()
    assert not (tmp_path / "rec.wav").exists()
    (tmp_path / "rec.wav.json").unlink()
    unchanged(tmp_path)


@pytest.mark.timeout(60)
def test_jsonl_event_sink_refuses_a_fifo_and_a_symlink(tmp_path):
    from streamkit.io.jsonl_events import JsonlEventSink

    not_regular(tmp_path)
    for name in ("fifo", "link"):
        for append in (True, False):
            with pytest.raises(OutputPathError, match="is a (FIFO|symlink)"):
                JsonlEventSink(path=str(tmp_path / name), append=append).open("g")
    unchanged(tmp_path)


# -------------------------------------------------------------------------------- the CLI
def run_cli(*args, timeout=120):
    return subprocess.run([sys.executable, "-m", "streamkit", *args], capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def wav(tmp_path_factory):
    p = tmp_path_factory.mktemp("audio") / "one.wav"
    rng = np.random.default_rng(0)
    sf.write(p, (0.05 * rng.standard_normal(16000)).astype(np.float32), 16000)
    return p


def test_sed_out_refuses_a_symlink_a_fifo_and_a_directory(tmp_path, wav):
    for _, p, msg in not_regular(tmp_path):
        r = run_cli("sed", str(wav), "--out", str(p), "-q")
        assert r.returncode == 2, (p, r.stderr)
        assert r.stderr == f"streamkit: error: {p}: {msg}, not a regular file; refusing to write output there (nothing was changed)\n"
    unchanged(tmp_path)


def test_sed_out_replaces_a_regular_file(tmp_path, wav):
    out = tmp_path / "det.tsv"
    out.write_text("old\n")
    r = run_cli("sed", str(wav), "--out", str(out), "-q", timeout=300)
    assert r.returncode == 0, r.stderr
    assert out.read_text().splitlines()[0] == "filename\tonset\toffset\tevent_label"
    assert os.listdir(tmp_path) == ["det.tsv"]


def test_bench_json_refuses_a_symlink(tmp_path):
    g = tmp_path / "g.yaml"
    g.write_text("name: t\nblocks:\n  src: {type: io.tone, rate: 8000, duration_s: 0.1}\n  lvl: {type: dsp.level}\nchain: [src, lvl]\n")
    (tmp_path / "target.txt").write_text("target content\n")
    (tmp_path / "b.json").symlink_to(tmp_path / "target.txt")
    r = run_cli("bench", str(g), "--repeat", "1", "--json", str(tmp_path / "b.json"))
    assert r.returncode == 2 and "b.json: is a symlink" in r.stderr and r.stderr.count("\n") == 1
    assert (tmp_path / "b.json").is_symlink() and (tmp_path / "target.txt").read_text() == "target content\n"
