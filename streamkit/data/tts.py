"""espeak-ng wrapper: voices, random offline text and synthesis to float32 at 8 kHz.

espeak-ng is a system program (Debian/Ubuntu: ``apt-get install espeak-ng``); nothing here
downloads anything. A *voice* is an espeak-ng language voice plus an optional variant
(``"en-us+f2"``, ``"hi+m3"``); the corpus generator treats each such pair as one speaker.

Text comes from small built-in word pools (:data:`WORDS`, a few hundred common words for a
handful of languages): random word strings are enough for speech activity detection, which
only needs speech-like audio with natural word/sentence pauses, not meaningful sentences.

espeak-ng writes 22050 Hz 16-bit mono; :func:`synthesize` resamples with soxr to 8 kHz.
"""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import soxr

__all__ = [
    "ESPEAK_RATE",
    "EspeakMissingError",
    "LANGUAGES",
    "VARIANTS",
    "WORDS",
    "Voice",
    "espeak_version",
    "list_voices",
    "random_text",
    "require_espeak",
    "synthesize",
]

#: espeak-ng's output sample rate
ESPEAK_RATE = 22050

#: variants appended to a language voice ("" = the voice's default); each is a distinct speaker
VARIANTS: tuple[str, ...] = ("",) + tuple(f"m{i}" for i in range(1, 9)) + tuple(f"f{i}" for i in range(1, 6))

_EN = """
the of and to a in is it you that he was for on are with as his they be at one have this from or
had by hot word but what some we can out other were all there when up use your how said an each she
which do their time if will way about many then them write would like so these her long make thing
see him two has look more day could go come did number sound no most people my over know water than
call first who may down side been now find any new work part take get place made live where after
back little only round man year came show every good me give our under name very through just form
sentence great think say help low line differ turn cause much mean before move right boy old too same
tell does set three want air well also play small end put home read hand port large spell add even
land here must big high such follow act why ask men change went light kind off need house picture try
us again animal point mother world near build self earth father head stand own page should country found
answer school grow study still learn plant cover food sun four between state keep eye never last let
thought city tree cross farm hard start might story saw far sea draw left late run while press close
night real life few north open seem together next white children begin got walk example ease paper
group always music those both mark often letter until mile river car feet care second book carry took
science eat room friend began idea fish mountain stop once base hear horse cut sure watch color face
wood main enough plain girl usual young ready above ever red list though feel talk bird soon body dog
family direct pose leave song measure door product black short numeral class wind question happen
complete ship area half rock order fire south problem piece told knew pass since top whole king space
heard best hour better true during hundred five remember step early hold west ground interest reach
fast verb sing listen six table travel less morning ten simple several vowel toward war lay against
pattern slow center love person money serve appear road map rain rule govern pull cold notice voice
radio signal station frequency antenna contact report copy over roger weather band power
"""

_DE = """
der die und in den von zu das mit sich des auf für ist im dem nicht ein eine als auch es an werden aus
er hat dass sie nach wird bei einer um am sind noch wie einem über einen so zum war haben nur oder aber
vor zur bis mehr durch man sein wurde sei in prozent hatte kann gegen vom können schon wenn habe seine
mark ihre dann unter wir soll ich eines jahr zwei jahren diese dieser wieder keine seiner worden und will
zwischen immer millionen ersten was sagte gibt alle diesem seit muss wurden beim doch jetzt waren drei
jahre neue neuen damit bereits da ab ihr ihren sondern weil heute etwa ohne zeit gut tag funk sender
empfang wetter antenne rufzeichen frequenz morgen abend haus stadt land wasser leben welt arbeit kinder
frau mann hand auge freund schule wagen straße licht nacht sonne regen schnee berg fluss wald baum
"""

_ES = """
de la que el en y a los del se las por un para con no una su al lo como más pero sus le ya o este sí
porque esta entre cuando muy sin sobre también me hasta hay donde quien desde todo nos durante todos uno
les ni contra otros ese eso ante ellos e esto mí antes algunos qué unos yo otro otras otra él tanto esa
estos mucho quienes nada muchos cual poco ella estar estas algunas algo nosotros mi mis tú te ti tu tus
casa tiempo día año vida mundo hombre mujer ciudad país agua noche tierra radio señal estación frecuencia
antena contacto reporte buenos días tardes noches amigo gracias mañana hoy bien grande pequeño nuevo
"""

_FR = """
de la le et les des en un du une que est pour qui dans par plus pas au sur ne se ce il sont avec ou
son aux mais comme on tout nous sa leur deux fait ont été cette faire elle même ans bien aussi dont
peut entre ces encore sans sous après avoir autres très être avait fois autre vous je tous temps jour
année vie monde homme femme ville pays eau nuit terre maison enfant main oeil ami école voiture rue
lumière soleil pluie montagne rivière forêt arbre radio signal station fréquence antenne contact bonjour
merci demain aujourd'hui grand petit nouveau beau
"""

_IT = """
di che e la il un a per in una mi sono ho ma non le si lo ti ci con del è questo bene tu cosa se io
come da no mio al sei ha lei della qui più anche me hai ora solo tutto lui ne ti molto fatto ancora
casa tempo giorno anno vita mondo uomo donna città paese acqua notte terra radio segnale stazione
frequenza antenna contatto buongiorno grazie domani oggi grande piccolo nuovo bello amico scuola
"""

_PT = """
de a o que e do da em um para é com não uma os no se na por mais as dos como mas foi ao ele das tem à
seu sua ou ser quando muito há nos já está eu também só pelo pela até isso ela entre era depois sem
mesmo aos ter seus quem nas me esse eles estão você tinha foram essa num nem suas meu às minha têm
casa tempo dia ano vida mundo homem mulher cidade país água noite terra rádio sinal estação frequência
antena contato bom obrigado amanhã hoje grande pequeno novo bonito amigo escola
"""

_NL = """
de en van ik te dat die in een hij het niet zijn is was op aan met als voor had er maar om hem dan zou
of wat mijn men dit zo door over ze zich bij ook tot je mij uit der daar haar naar heb hoe heeft hebben
deze u want nog zal me zij nu ge geen omdat iets worden toch al waren veel meer doen toen moet ben zonder
huis tijd dag jaar leven wereld man vrouw stad land water nacht aarde radio signaal station frequentie
antenne contact goedemorgen dank morgen vandaag groot klein nieuw mooi vriend school
"""

_HI = """
और का की है में के को से एक यह था पर भी नहीं हैं कि वह तो लिए ने हो कर जो गया कुछ अपने इस साथ
बहुत लेकिन हम मैं आप तुम यहाँ वहाँ क्या कौन कब कैसे क्यों सब दिन रात साल समय घर पानी दुनिया
आदमी औरत बच्चा शहर देश गाँव सड़क रास्ता किताब स्कूल काम बात दोस्त माता पिता भाई बहन खाना
सुबह शाम आज कल अच्छा बड़ा छोटा नया पुराना सुंदर लाल हरा नीला पीला सफ़ेद काला सूरज चाँद
बारिश हवा पेड़ फूल नदी पहाड़ समुद्र रेडियो संकेत स्टेशन आवाज़ संदेश नमस्ते धन्यवाद मौसम
देखना सुनना बोलना चलना आना जाना खाना पीना सोना लिखना पढ़ना समझना जानना करना रहना देना लेना
"""

_TA = """
அது இது அவன் அவள் அவர் நான் நீ நாம் நாங்கள் நீங்கள் அவர்கள் ஒரு இரண்டு மூன்று நான்கு ஐந்து
வீடு நாள் இரவு காலை மாலை ஆண்டு நேரம் தண்ணீர் உலகம் மனிதன் பெண் குழந்தை நகரம் நாடு ஊர்
சாலை புத்தகம் பள்ளி வேலை பேச்சு நண்பன் அம்மா அப்பா அண்ணன் தங்கை சாப்பாடு இன்று நாளை
நல்ல பெரிய சிறிய புதிய பழைய அழகான சிவப்பு பச்சை நீலம் வெள்ளை கருப்பு சூரியன் நிலா மழை காற்று
மரம் பூ ஆறு மலை கடல் வானொலி ஒலி செய்தி வணக்கம் நன்றி வானிலை வா போ பார் கேள் சொல் எழுது படி
இருக்கிறது வருகிறது போகிறது செய்கிறது சொன்னார் பார்த்தேன் கேட்டான் வந்தாள் என்ன ஏன் எங்கே எப்போது
"""


def _pool(text: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(text.split()))


#: built-in word pools per text language
WORDS: dict[str, tuple[str, ...]] = {
    "en": _pool(_EN),
    "de": _pool(_DE),
    "es": _pool(_ES),
    "fr": _pool(_FR),
    "it": _pool(_IT),
    "pt": _pool(_PT),
    "nl": _pool(_NL),
    "hi": _pool(_HI),
    "ta": _pool(_TA),
}

#: espeak-ng language voices used by the corpus, with the word pool each one reads
LANGUAGES: dict[str, str] = {
    "en-us": "en",
    "en-gb": "en",
    "en-gb-scotland": "en",
    "en-gb-x-rp": "en",
    "en-gb-x-gbclan": "en",
    "en-gb-x-gbcwmd": "en",
    "en-029": "en",
    "en-us-nyc": "en",
    "de": "de",
    "es": "es",
    "es-419": "es",
    "fr-fr": "fr",
    "fr-be": "fr",
    "it": "it",
    "pt": "pt",
    "pt-br": "pt",
    "nl": "nl",
    "hi": "hi",
    "mr": "hi",  # Devanagari: the Hindi words read with Marathi rules
    "ne": "hi",  # Devanagari: Nepali rules
    "ta": "ta",
}


class EspeakMissingError(RuntimeError):
    """espeak-ng is not installed (or not on PATH)."""


_HINT = "espeak-ng is required for TTS (the HF corpus generator): install it with `apt-get install espeak-ng`"


@functools.lru_cache(maxsize=1)
def require_espeak() -> str:
    """Path of the espeak-ng executable; :class:`EspeakMissingError` with the apt-get hint if absent."""
    exe = shutil.which("espeak-ng")
    if exe is None:
        raise EspeakMissingError(_HINT)
    return exe


@functools.lru_cache(maxsize=1)
def espeak_version() -> str:
    """espeak-ng's version string (e.g. "1.51"); the audio depends on it."""
    out = subprocess.run([require_espeak(), "--version"], capture_output=True, text=True, check=True).stdout
    m = re.search(r"espeak ng text-to-speech:\s*(\S+)", out, re.I)
    return m.group(1) if m else out.strip()


@dataclass(frozen=True, order=True)
class Voice:
    """One speaker: an espeak-ng language voice plus a variant ("" = none)."""

    language: str
    variant: str = ""

    @property
    def name(self) -> str:
        """The ``-v`` argument, e.g. ``"en-us+f2"``."""
        return f"{self.language}+{self.variant}" if self.variant else self.language

    @property
    def text_language(self) -> str:
        """The word pool this voice reads (see :data:`LANGUAGES`); "en" if unknown."""
        return LANGUAGES.get(self.language, "en")

    @classmethod
    def parse(cls, name: str) -> Voice:
        lang, _, var = name.partition("+")
        return cls(lang, var)


@functools.lru_cache(maxsize=1)
def installed_languages() -> frozenset[str]:
    """Language voice names that ``espeak-ng --voices`` lists (second column)."""
    out = subprocess.run([require_espeak(), "--voices"], capture_output=True, text=True, check=True).stdout
    names = set()
    for line in out.splitlines()[1:]:
        cols = line.split()
        if len(cols) >= 2:
            names.add(cols[1])
    return frozenset(names)


def list_voices(languages: Sequence[str] | None = None, variants: Sequence[str] = VARIANTS) -> list[Voice]:
    """Every (language voice, variant) pair that espeak-ng has, sorted.

    ``languages`` defaults to :data:`LANGUAGES` (the voices with a word pool); names that
    ``espeak-ng --voices`` does not list are skipped.
    """
    have = installed_languages()
    langs = [lg for lg in (LANGUAGES if languages is None else languages) if lg in have]
    return sorted(Voice(lg, v) for lg in langs for v in variants)


def random_text(rng: np.random.Generator, language: str, n_words: int) -> str:
    """``n_words`` random words from the pool of ``language`` in sentences of 3-12 words.

    Sentences end with ".", with an occasional "," inside (espeak-ng pauses at both).
    """
    pool = WORDS.get(language, WORDS["en"])
    words = [pool[i] for i in rng.integers(0, len(pool), n_words)]
    out: list[str] = []
    i = 0
    while i < len(words):
        k = int(rng.integers(3, 13))
        sent = words[i : i + k]
        if len(sent) > 5 and rng.random() < 0.4:
            j = int(rng.integers(2, len(sent) - 2))
            sent[j] = sent[j] + ","
        out.append(" ".join(sent) + ".")
        i += k
    return " ".join(out)


def synthesize(text: str, voice: Voice | str, *, rate_wpm: int = 175, pitch: int = 50, out_rate: int = 8000) -> np.ndarray:
    """Speak ``text`` with espeak-ng; float32 mono at ``out_rate`` (soxr resampling), ±1 full scale.

    ``rate_wpm`` is espeak-ng's ``-s`` (80-450), ``pitch`` its ``-p`` (0-99).

    Raises:
        EspeakMissingError: espeak-ng is not installed (with the ``apt-get install espeak-ng`` hint).
        RuntimeError: espeak-ng failed (e.g. an unknown voice).
    """
    exe = require_espeak()
    name = voice.name if isinstance(voice, Voice) else str(voice)
    cmd = [exe, "-v", name, "-s", str(int(rate_wpm)), "-p", str(int(pitch)), "-b", "1", "--stdout", text]
    res = subprocess.run(cmd, capture_output=True, check=False)
    if res.returncode != 0 or len(res.stdout) < 44:
        raise RuntimeError(f"espeak-ng failed for voice {name!r} (rc {res.returncode}): {res.stderr.decode(errors='replace').strip()}")
    # the --stdout WAV header holds a placeholder length: take the samples after the "data" tag
    raw = res.stdout
    k = raw.find(b"data", 12)
    data = raw[k + 8 :] if k >= 0 else raw[44:]
    x = np.frombuffer(data[: len(data) // 2 * 2], dtype="<i2").astype(np.float32) / 32768.0
    if out_rate != ESPEAK_RATE and x.size:
        x = soxr.resample(x, ESPEAK_RATE, out_rate, quality="HQ").astype(np.float32)
    return np.ascontiguousarray(x, dtype=np.float32)
