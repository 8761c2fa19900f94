"""Real recordings from pinned Debian packages: which file is what, and how to read it.

Every audio file of the unpacked packages (:mod:`streamkit.data.real_packages`) is classified by
path rules (:data:`RULES`, first match wins, no match = skip) into

* ``speech``: clean speech recordings (read speech, prompts, game voices, spoken descriptions);
* ``nonspeech`` with a *kind* (music, sfx, animal, household, vehicle, ui, alarm, water, modem,
  carrier): the distractors of the scenes;
* ``skip``: ambiguous material kept out of both (singing, vocals, laughs, screams, coughs, grunts,
  crowd noise, "speech-like" synth voices, silences, radio speech, recordings we could not verify).

:data:`EVENT_RULES` name the isolated clips whose DCASE class is clear (``Dog``, ``Cat``,
``Running_water``...). :data:`OFFAIR` lists the codec2-examples off-air/modem recordings without
speech. The scenes and the corpus layout are in :mod:`streamkit.data.real_scenes`.

Decoding (:func:`load`): soundfile reads wav/ogg/oga/flac/mp3 (libsndfile ≥ 1.1); the ``.raw``
files are headerless signed 16-bit little-endian mono, 8 kHz in codec2-examples and 16 kHz in
pocketsphinx-testdata (:func:`raw_rate`). Everything is mixed down to mono and resampled to the
corpus rate with soxr.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from streamkit.data.qt_rcc import read_rcc

__all__ = [
    "AUDIO_SUFFIXES",
    "EVENT_CLASSES",
    "EVENT_RULES",
    "OFFAIR",
    "RULES",
    "Source",
    "classify",
    "event_class",
    "inventory",
    "load",
    "raw_rate",
    "unpack_rcc",
]

AUDIO_SUFFIXES = (".wav", ".ogg", ".oga", ".flac", ".mp3", ".raw")

EVENT_CLASSES = ("Alarm_bell_ringing", "Blender", "Cat", "Dishes", "Dog", "Electric_shaver_toothbrush", "Frying",
                 "Running_water", "Speech", "Vacuum_cleaner")  # fmt: skip

# (package, regex searched in the path relative to the package root, class, kind); first match wins.
# fmt: off
RULES: tuple[tuple[str, str, str, str], ...] = (
    # ---------------- evaluation packages
    ("pocketsphinx-testdata", r"/test/data/(librivox|cards)/[^/]+\.wav$", "speech", "read"),
    ("pocketsphinx-testdata", r"/test/data/(goforward|numbers|something)\.raw$", "speech", "read"),
    ("asterisk-core-sounds-en-wav", r"/silence/", "skip", "silence"),
    ("asterisk-core-sounds-en-wav", r"/(beep|beeperr|ascending-2tone|descending-2tone|confbridge-join|confbridge-leave)\.wav$", "nonspeech", "ui"),
    ("asterisk-core-sounds-en-wav", r"/tt-monkeys\.wav$", "skip", "vocalisation"),
    ("asterisk-core-sounds-en-wav", r"/sounds/en[^/]*/.*\.wav$", "speech", "prompt"),
    ("asterisk-moh-opsound-wav", r"/moh/[^/]+\.wav$", "nonspeech", "music"),
    ("codec2-examples", r"/codec2/raw/(hts1a|hts2a|mmt1|morig|forig|cross|big_dog|kristoff)\.raw$", "speech", "read"),
    ("codec2-examples", r"/codec2/(wav/wia_16kHz|raw/speech_orig_16k)\.wav$", "speech", "read"),
    ("codec2-examples", r"/codec2/(wav/vk2tpm_004\.wav|raw/test_datac1_006\.raw|octave/test_datac0\.raw)$", "nonspeech", "modem"),
    ("codec2-examples", r"/codec2/octave/test_qam16\.raw$", "nonspeech", "modem"),
    ("codec2-examples", r"/codec2/raw/sine1k_(2ms_delay_)?2Hz_spread\.raw$", "nonspeech", "carrier"),
    ("minetest-data", r"/player_damage\.ogg$|/devtest/", "skip", "vocalisation"),
    ("minetest-data", r"/env_sounds_water\.\d\.ogg$", "nonspeech", "water"),
    ("minetest-data", r"/sounds/[^/]+\.ogg$", "nonspeech", "sfx"),
    ("scratch", r"/Sounds/(Vocals|Music Loops/HumanBeatbox)", "skip", "vocals"),
    ("scratch", r"/Sounds/Human/(Footsteps-\d|FingerSnap)\.", "nonspeech", "sfx"),
    ("scratch", r"/Sounds/Human/", "skip", "vocalisation"),
    ("scratch", r"/Sounds/Animal/", "nonspeech", "animal"),
    ("scratch", r"/Sounds/Effects/Water", "nonspeech", "water"),
    ("scratch", r"/Sounds/Effects/", "nonspeech", "sfx"),
    ("scratch", r"/Sounds/Electronic/", "nonspeech", "ui"),
    ("scratch", r"/Sounds/(Instruments|Percussion|Music Loops)/", "nonspeech", "music"),
    ("sonic-pi-samples", r"/(ambi_choir|mehackit_robot\d|glitch_robot\d|bass_voxy[^/]*|misc_burp)\.flac$", "skip", "vocals"),
    ("sonic-pi-samples", r"/samples/[^/]+\.flac$", "nonspeech", "music"),
    ("sound-theme-freedesktop", r"/audio-channel-[^/]+\.oga$", "speech", "prompt"),
    ("sound-theme-freedesktop", r"/(alarm-clock-elapsed|phone-incoming-call|phone-outgoing-calling|phone-outgoing-busy)\.oga$", "nonspeech", "alarm"),
    ("sound-theme-freedesktop", r"/stereo/[^/]+\.oga$", "nonspeech", "ui"),
    ("tuxpaint-stamps-default", r"_desc(_[A-Za-z_]+)?\.(ogg|wav)$", "speech", "description"),
    ("tuxpaint-stamps-default", r"/stamps/symbols/(math|alphabets)/", "speech", "word"),
    ("tuxpaint-stamps-default", r"/stamps/(people|military|town/roadsigns|symbols)/|/(santahat|ghost|apollo_lander)\.ogg$|/hanukkah/",
     "skip", "vocalisation"),
    ("tuxpaint-stamps-default", r"/stamps/animals/", "nonspeech", "animal"),
    ("tuxpaint-stamps-default", r"/stamps/household/", "nonspeech", "household"),
    ("tuxpaint-stamps-default", r"/stamps/vehicles/", "nonspeech", "vehicle"),
    ("tuxpaint-stamps-default", r"/stamps/hobbies/music/", "nonspeech", "music"),
    ("tuxpaint-stamps-default", r"/stamps/[^_]+\.ogg$|/stamps/.*/[a-z0-9_-]+\.ogg$", "nonspeech", "sfx"),
    # ---------------- training packages
    ("fillets-ng-data", r"/fillets-ng/music/[^/]+\.ogg$|-music\.ogg$", "nonspeech", "music"),
    ("fillets-ng-data", r"/sound/elk/en/deu-", "speech", "voice"),
    ("fillets-ng-data", r"/bat-t-(budik|phone\d)\.ogg$", "nonspeech", "alarm"),
    ("fillets-ng-data", r"-x-(smich|ihaha|gr\d|stebet\d|zzz)\.ogg$", "skip", "vocalisation"),
    ("fillets-ng-data", r"/sound/share/|/sound/[^/]+/en/[^/]+-x-[^/]+\.ogg$|/sound/(linux|keys)/en/", "nonspeech", "sfx"),
    ("fillets-ng-data-cs", r"-(huhu|krik)\d*\.ogg$|/sp-shout_|-aaa\.ogg$", "skip", "vocalisation"),
    ("fillets-ng-data-cs", r"/sound/(share/)?[^/]+/cs/[^/]+\.ogg$", "speech", "voice"),
    ("hedgewars-data", r"/voices/(Singer|Robot)/", "skip", "vocals"),
    ("hedgewars-data", r"/voices/[^/]+/(Ooff|Ow|Laugh|Hmm|Jump|Firepunch|Poison|Nooo|Ouch|Uh-oh|Yawn|Snore|Flyaway)[^/]*\.ogg$", "skip", "vocalisation"),
    ("hedgewars-data", r"/voices/[^/]+/[^/]+\.ogg$", "speech", "voice"),
    ("hedgewars-data", r"/Sounds/(Yoohoo|Kiss|hell_|hogchant|Hellish|countdown|ride_of_the_valkyries|suddendeath|extratime|beewater|lowgravity)", "skip",
     "vocalisation"),
    ("hedgewars-data", r"/Sounds/Droplet", "nonspeech", "water"),
    ("hedgewars-data", r"/Sounds/[^/]+\.ogg$", "nonspeech", "sfx"),
    ("hedgewars-data", r"/Music/[^/]+\.ogg$", "nonspeech", "music"),
    ("frozen-bubble-data", r"/snd/(snore|applause|chatted)\.ogg$", "skip", "vocalisation"),
    ("frozen-bubble-data", r"/snd/[^/]*zik[^/]*\.ogg$", "nonspeech", "music"),
    ("frozen-bubble-data", r"/snd/[^/]+\.ogg$", "nonspeech", "sfx"),
    ("pingus-data", r"/sounds/(letsgo|ohno|goodidea)\.wav$", "speech", "voice"),
    ("pingus-data", r"/sounds/yipee\.wav$", "skip", "vocalisation"),
    ("pingus-data", r"/sounds/[^/]+\.wav$", "nonspeech", "sfx"),
    ("gcompris-qt-data", r"/explore_farm_animals/", "nonspeech", "animal"),
    ("gcompris-qt-data", r"/memory-sound/.*/LRBark_", "nonspeech", "animal"),
    ("gcompris-qt-data", r"/memory-sound/.*/(LRWeird|LRLaPause|LRApplauses)", "skip", "vocalisation"),
    ("gcompris-qt-data", r"/memory-sound/.*/guitar_|/instruments/|/melody/", "nonspeech", "music"),
    ("gcompris-qt-data", r"/memory-sound/|/watercycle/|/canal_lock/", "nonspeech", "sfx"),
    ("gcompris-qt-data", r"/core/resource/sounds/", "nonspeech", "ui"),
)

# (package, regex, DCASE class): isolated clips whose class is clear
EVENT_RULES: tuple[tuple[str, str, str], ...] = (
    ("tuxpaint-stamps-default", r"/animals/mammals/dogs/dog\.ogg$", "Dog"),
    ("tuxpaint-stamps-default", r"/household/vacuum_cleaner\.ogg$", "Vacuum_cleaner"),
    ("tuxpaint-stamps-default", r"/household/dishes/glass\.ogg$", "Dishes"),
    ("tuxpaint-stamps-default", r"/seasonal/halloween/blackcat\.ogg$", "Cat"),
    ("scratch", r"/Animal/Dog[12]\.wav$", "Dog"),
    ("scratch", r"/Animal/(Kitten|Meow)\.wav$|/Animal/Cat\.mp3$", "Cat"),
    ("scratch", r"/Effects/WaterRunning\.mp3$", "Running_water"),
    ("minetest-data", r"/env_sounds_water\.\d\.ogg$", "Running_water"),
    ("sound-theme-freedesktop", r"/(alarm-clock-elapsed|phone-incoming-call)\.oga$", "Alarm_bell_ringing"),
    ("pocketsphinx-testdata", r"/(librivox|cards)/[^/]+\.wav$|/(goforward|numbers|something)\.raw$", "Speech"),
    ("asterisk-core-sounds-en-wav", r"/en_US_f_Allison/[a-m][^/]*\.wav$", "Speech"),
    ("gcompris-qt-data", r"/explore_farm_animals/.*/dog\.ogg$|/memory-sound/.*/LRBark_\d", "Dog"),
    ("gcompris-qt-data", r"/explore_farm_animals/.*/cat\.ogg$", "Cat"),
    ("fillets-ng-data", r"/bat-t-(budik|phone\d)\.ogg$", "Alarm_bell_ringing"),
    ("hedgewars-data", r"/voices/(British|Default|Pirate)/[A-M][^/]*\.ogg$", "Speech"),
    ("fillets-ng-data-cs", r"/sound/[a-f][^/]*/cs/[^/]+\.ogg$", "Speech"),
)
# fmt: on

#: codec2-examples recordings without speech: path suffix -> kind (the off-air set, 8 kHz)
OFFAIR = {
    "codec2/wav/vk2tpm_004.wav": "ofdm_modem_offair",
    "codec2/raw/test_datac1_006.raw": "ofdm_data_modem",
    "codec2/octave/test_datac0.raw": "ofdm_data_modem",
    "codec2/octave/test_qam16.raw": "qam16_modem",
    "codec2/raw/sine1k_2Hz_spread.raw": "fading_carrier",
    "codec2/raw/sine1k_2ms_delay_2Hz_spread.raw": "fading_carrier_multipath",
}

# gcompris: the .rcc bundles whose sounds are unpacked (the others hold images, voices of the
# activities' instructions or music with singing)
RCC_BUNDLES = ("explore_farm_animals", "memory-sound", "core", "instruments", "melody", "watercycle", "canal_lock")

_COMPILED = [(pkg, re.compile(rx), cls, kind) for pkg, rx, cls, kind in RULES]
_EVENTS = [(pkg, re.compile(rx), cls) for pkg, rx, cls in EVENT_RULES]


@dataclass(frozen=True)
class Source:
    """One classified audio file of a package."""

    package: str
    path: str  # relative to the package root, "/"-separated
    cls: str  # speech | nonspeech | skip
    kind: str
    event: str | None  # DCASE class where the clip's class is clear


def classify(package: str, relpath: str) -> tuple[str, str]:
    """``(class, kind)`` of a file by the path rules; ``("skip", "unmatched")`` when none matches."""
    p = "/" + relpath.lstrip("/")
    for pkg, rx, cls, kind in _COMPILED:
        if pkg == package and rx.search(p):
            return cls, kind
    return "skip", "unmatched"


def event_class(package: str, relpath: str) -> str | None:
    """The DCASE class of an isolated clip whose class is clear, else None."""
    p = "/" + relpath.lstrip("/")
    for pkg, rx, cls in _EVENTS:
        if pkg == package and rx.search(p):
            return cls
    return None


def unpack_rcc(root: str | os.PathLike[str]) -> int:
    """Write the sounds of the GCompris bundles in :data:`RCC_BUNDLES` under ``root/rcc/<bundle>/``
    (once); returns the number of files."""
    root = Path(root)
    done = root / "rcc" / ".streamkit-done"
    if done.is_file():
        return int(done.read_text())
    n = 0
    for bundle in RCC_BUNDLES:
        for f in sorted(root.glob(f"usr/share/gcompris-qt/rcc/{bundle}.rcc")):
            for name, blob in sorted(read_rcc(f, want=(".ogg", ".wav")).items()):
                dest = root / "rcc" / bundle / name
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_bytes(blob)
                n += 1
    done.parent.mkdir(parents=True, exist_ok=True)
    done.write_text(f"{n}\n")
    return n


def inventory(package: str, root: str | os.PathLike[str]) -> list[Source]:
    """Every audio file under ``root`` (an unpacked package), classified, sorted by path."""
    root = Path(root)
    out = []
    for f in sorted(root.rglob("*")):
        if f.suffix.lower() not in AUDIO_SUFFIXES or not f.is_file():
            continue
        rel = f.relative_to(root).as_posix()
        cls, kind = classify(package, rel)
        ev = event_class(package, rel)
        if cls == "skip" or (ev == "Speech") != (cls == "speech"):  # a clip's class agrees with its file's
            ev = None
        out.append(Source(package, rel, cls, kind, ev))
    return out


def raw_rate(package: str) -> int:
    """Sample rate of the headerless s16le ``.raw`` files of a package."""
    return 16000 if package == "pocketsphinx-testdata" else 8000


@lru_cache(maxsize=96)
def _load_cached(path: str, raw_sr: int, rate: int | None) -> tuple[np.ndarray, int]:
    import soundfile as sf
    import soxr

    if path.lower().endswith(".raw"):
        x = np.fromfile(path, dtype="<i2").astype(np.float32) / np.float32(32768.0)
        sr = raw_sr
    else:
        y, sr = sf.read(path, dtype="float32", always_2d=True)
        x = y.mean(axis=1, dtype=np.float32)
    if rate is not None and sr != rate:
        x = soxr.resample(x, sr, rate, quality="HQ").astype(np.float32)
        sr = rate
    x.setflags(write=False)
    return x, int(sr)


def load(root: str | os.PathLike[str], src: Source, rate: int | None = 16000) -> tuple[np.ndarray, int]:
    """``(mono float32 samples, rate)`` of a source file, resampled to ``rate`` (None: native).
    The array is read-only (cached); copy it before changing it."""
    return _load_cached(str(Path(root) / src.path), raw_rate(src.package), rate)
