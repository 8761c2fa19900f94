"""Lexicon-constrained RNN-T decoding: the trie, its masks, the constrained beam search against
exhaustive enumeration, word lists, and the streaming block's lexicon option."""

from __future__ import annotations

import math

import pytest
import torch

from streamkit.core.errors import ConfigError
from streamkit.data.asr_corpus import Vocab
from streamkit.models.rnnt_lexicon import Lexicon, model_lexicons, read_word_file, union_lexicon, word_lists
from streamkit.models.rnnt_search import BeamSearch, MultiDecoder
from tests.models.test_rnnt_search import encode, exhaustive, tiny_model

torch.set_num_threads(1)

# language 1 of tiny_model has 4 symbols: blank, two word starts (1, 2) and one continuation (3)
WORDS = [(1,), (1, 3), (2, 3, 3)]
STARTS = {1, 2}


def parse(y: tuple[int, ...]) -> tuple[bool, bool, int]:
    """Reference (no trie): (y is a prefix of a word sequence of WORDS, y ends between words, number of words)."""
    if not y:
        return True, True, 0
    if y[0] not in STARTS:
        return False, False, 0
    cuts = [i for i, v in enumerate(y) if v in STARTS] + [len(y)]
    pieces = [y[a:b] for a, b in zip(cuts, cuts[1:])]
    if any(p not in WORDS for p in pieces[:-1]):
        return False, False, len(pieces)
    last = pieces[-1]
    return any(w[: len(last)] == last for w in WORDS), last in WORDS, len(pieces)


def test_trie_structure_steps_and_masks():
    lx = Lexicon.from_sequences(WORDS + [(1, 3)], 4)  # a duplicate is stored once
    assert lx.n_words == 3 and lx.n_nodes == 1 + 5  # root, 1, 1-3, 2, 2-3, 2-3-3
    assert sorted(lx.allowed(0).tolist()) == [1, 2]
    n1 = lx.step(0, 1)
    assert lx.complete(n1) and sorted(lx.allowed(n1).tolist()) == [1, 2, 3]  # word end: continue or start a word
    n13 = lx.step(n1, 3)
    assert lx.complete(n13) and sorted(lx.allowed(n13).tolist()) == [1, 2]
    n2 = lx.step(0, 2)
    assert not lx.complete(n2) and lx.allowed(n2).tolist() == [3]
    assert lx.step(n2, 1) == -1 and lx.step(0, 3) == -1  # no word start inside a word, no word begins with 3
    assert lx.step(n13, 2) == n2  # the next word
    m = lx.mask([0, n2, n1])
    assert m.shape == (3, 4) and bool((m[:, 0] == 0).all())  # blank always allowed
    assert m[0].tolist() == [0, 0, 0, -math.inf] and m[1].tolist() == [0, -math.inf, -math.inf, 0]
    pen = Lexicon.from_sequences(WORDS, 4, word_penalty=1.5).mask([0, n2, n1])
    assert pen[0].tolist() == [0, -1.5, -1.5, -math.inf] and pen[2].tolist() == [0, -1.5, -1.5, 0]
    assert pen[1].tolist() == [0, -math.inf, -math.inf, 0]  # inside a word: no penalty


@pytest.mark.parametrize(("seqs", "n", "msg"), [
    ([], 4, "at least one word"), ([(0, 1)], 4, r"\[1, 4\)"), ([(1, 4)], 4, r"\[1, 4\)"), ([(1, 2), (2,)], 4, "both start a word"),
])  # fmt: skip
def test_trie_errors(seqs, n, msg):
    with pytest.raises(ValueError, match=msg):
        Lexicon.from_sequences(seqs, n)
    with pytest.raises(ValueError, match="finite"):
        Lexicon.from_sequences([(1,)], 4, word_penalty=math.inf)


@pytest.mark.parametrize(("T", "S", "seed", "penalty"), [(3, 2, 0, 0.0), (4, 2, 1, 0.0), (2, 3, 2, 0.7)])
def test_constrained_beam_equals_exhaustive(T, S, seed, penalty):
    """A beam wide enough keeps exactly the lexicon-valid sequences, with the unconstrained exact
    scores (the mask does not renormalise) less the word penalty per word."""
    model = tiny_model("lid", seed=seed)
    enc = encode(model, T, seed, 1)
    ref = {y: s for y, s in exhaustive(model, enc, 1, S).items() if parse(y)[0]}
    lx = Lexicon.from_sequences(WORDS, 4, word_penalty=penalty)
    bs = BeamSearch(model, 1, beam=len(ref) + 1, max_symbols_per_frame=S, lexicon=lx)
    for t in range(T):
        bs.advance(enc[t])
    got = {h.tokens: h for h in bs.hyps}
    assert set(got) == set(ref)
    for y, s in ref.items():
        assert got[y].score == pytest.approx(s - penalty * parse(y)[2], abs=1e-9), y
        assert lx.complete(got[y].node) == parse(y)[1], y
    complete = [y for y in ref if parse(y)[1]]
    assert bs.best.tokens == max(complete, key=lambda y: got[y].score)  # the best hypothesis ending between words


def test_small_beam_keeps_only_valid_prefixes_and_greedy_obeys_the_lexicon():
    model = tiny_model("lid", seed=0, blank_bias=-2.0)  # talkative: many symbols per frame
    enc = encode(model, 12, 0, 1)
    lx = Lexicon.from_sequences(WORDS, 4)
    for beam in (1, 2):
        bs = BeamSearch(model, 1, beam=beam, max_symbols_per_frame=3, lexicon=lx)
        for t in range(enc.shape[0]):
            bs.advance(enc[t])
            assert all(parse(h.tokens)[0] for h in bs.hyps)
        assert bs.best.tokens  # the talkative model says something within the lexicon
    free = BeamSearch(model, 1, beam=2, max_symbols_per_frame=3)
    for t in range(enc.shape[0]):
        free.advance(enc[t])
    assert not parse(free.best.tokens)[0]  # unconstrained, it leaves the lexicon (the test is not vacuous)


def test_lexicon_width_must_match_the_joint():
    model = tiny_model("lid")
    with pytest.raises(ValueError, match="lexicon has 4 symbols"):
        BeamSearch(model, 0, lexicon=Lexicon.from_sequences(WORDS, 4))  # language 0 has 3


def test_words_spelled_with_a_vocabulary_and_model_lexicons():
    en = Vocab("en", ("<blank>", "a", "b", "B_a", "B_b"))
    hi = Vocab("hi", ("<blank>", "क", "B_क"))
    lx = Lexicon.from_words(["ab", "Ba", "b", "ac", "two words", ""], en)
    assert lx.n_words == 3 and lx.skipped == 3  # "Ba" lower-cased (en), "c" unknown, a space, empty
    assert lx.step(lx.step(0, 3), 2) > 0 and lx.complete(lx.step(0, 4))
    # union ids (vanilla/onehot): language l's symbol 1 is offsets[l]
    un = union_lexicon({0: ["ab"], 1: ["कक"]}, {0: en, 1: hi}, offsets=(1, 5), n_symbols=7)
    assert un.n_words == 2 and sorted(un.allowed(0).tolist()) == [3, 6]
    syms = [list(en.symbols), list(hi.symbols)]
    for variant, width in (("lid", (5, 3)), ("multisoftmax", (5, 3)), ("onehot", (7, 7))):
        m = tiny_model(variant, vocab=(5, 3))
        lex = model_lexicons(m.cfg, syms, {"en": ["ab", "b"], "hi": ["कक"]}, word_penalty=0.5)
        assert {k: v.n_symbols for k, v in lex.items()} == {0: width[0], 1: width[1]}
        assert all(v.word_penalty == 0.5 for v in lex.values())
        MultiDecoder(m, beam=2, lexicons=lex).reset()  # widths accepted by every search
    van = model_lexicons(tiny_model("vanilla", vocab=(5, 3)).cfg, syms, {"en": ["ab"], "hi": ["कक"]})
    assert list(van) == [None] and van[None].n_symbols == 7 and van[None].n_words == 2
    assert model_lexicons(tiny_model("lid", vocab=(5, 3)).cfg, syms, {"hi": ["कक"]}).keys() == {1}  # en unconstrained
    with pytest.raises(ValueError, match="word lists for"):
        model_lexicons(tiny_model("lid", vocab=(5, 3)).cfg, syms, {"ta": ["x"]})


def test_word_lists(tmp_path):
    (tmp_path / "en.words.txt").write_text("# comment\nab\n\n b \n", encoding="utf-8")
    assert read_word_file(tmp_path / "en.words.txt") == ["ab", "b"]
    assert word_lists(tmp_path, ["en", "hi"]) == {"en": ["ab", "b"]}  # hi: no file, unconstrained
    assert word_lists({"en": tmp_path / "en.words.txt"}, ["en"]) == {"en": ["ab", "b"]}
    (tmp_path / "hi.words.txt").write_text("# nothing\n", encoding="utf-8")
    with pytest.raises(ValueError, match="no words"):
        word_lists(tmp_path, ["en", "hi"])
    with pytest.raises(ValueError, match="cannot read"):
        read_word_file(tmp_path / "gu.words.txt")
    with pytest.raises(ValueError, match="no <lang>.words.txt"):
        word_lists(tmp_path, ["ta"])
    with pytest.raises(ValueError, match="'system', a directory"):
        word_lists(tmp_path / "nowhere", ["en"])
    with pytest.raises(ValueError, match=r"word lists for \['ta'\]"):
        word_lists({"ta": tmp_path / "en.words.txt"}, ["en"])
    sysw = word_lists("system", ["hi"])  # Debian's hunspell-hi, installed by the set-up commands
    assert len(sysw["hi"]) > 10000


def test_block_lexicon_option_errors(tmp_path):
    from streamkit.models.rnnt_stream import RnntAsr

    with pytest.raises(ConfigError, match="lexicon must be"):
        RnntAsr(model="x.pt", lexicon=3)
    with pytest.raises(ConfigError, match="word_penalty must be a number"):
        RnntAsr(model="x.pt", word_penalty=-1)
    with pytest.raises(ConfigError, match="word_penalty must be finite"):
        RnntAsr(model="x.pt", word_penalty=math.inf)


def test_block_decodes_within_the_word_lists_and_stays_chunking_invariant(tmp_path):
    from streamkit.core.tags import SPEECH, SpeechBoundary
    from streamkit.models.rnnt_stream import RnntAsr
    from streamkit.testing import assert_chunking_invariant, run_block
    from tests.models.test_rnnt_stream import make_model, signal

    path = make_model(tmp_path)
    lists = {"en": ["a", "ab", "abcb", "de", "d"], "hi": ["kl", "mn", "m"]}  # ta: unconstrained
    for lg, ws in lists.items():
        (tmp_path / f"{lg}.words.txt").write_text("\n".join(ws) + "\n", encoding="utf-8")
    x = signal(2.4)
    tags = [(400, SPEECH, SpeechBoundary(True, "t")), (9000, SPEECH, SpeechBoundary(False, "t")),
            (10000, SPEECH, SpeechBoundary(True, "t")), (18000, SPEECH, SpeechBoundary(False, "t"))]  # fmt: skip
    finals = {}
    for lg in ("en", "hi"):

        def factory(lg=lg):
            return RnntAsr(model=path, beam=3, languages=[lg], lexicon=tmp_path, word_penalty=0.2, partial_interval_s=0.09)

        run = assert_chunking_invariant(factory, x, rate=RATE, sizes=("all", 1, 37, 1000), tags=tags, check_tags=False)
        ev = [e for e in run.events if e.kind in ("asr.partial", "asr.final")]
        words = [w.text for e in ev for w in e.payload.words]
        assert words and set(words) <= set(lists[lg]), (lg, words)  # partials too: only complete words
        finals[lg] = [e.payload.text for e in ev if e.kind == "asr.final"]
        free = run_block(RnntAsr(model=path, beam=3, languages=[lg]), x, rate=RATE, tags=tags)
        free_words = {w.text for e in free.events if e.kind == "asr.final" for w in e.payload.words}
        assert not free_words <= set(lists[lg]), free_words  # unconstrained it leaves the list: the test is not vacuous
    assert all(finals.values())
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="no <lang>.words.txt"):
        run_block(RnntAsr(model=path, lexicon=tmp_path / "empty"), x, rate=RATE)  # a directory without word lists


RATE = 8000


def test_built_tries_are_cached_until_a_word_file_changes(tmp_path):
    import os

    from streamkit.models.rnnt_lexicon import cached_model_lexicons

    m = tiny_model("lid", vocab=(5, 3))
    syms = [["<blank>", "a", "b", "B_a", "B_b"], ["<blank>", "क", "B_क"]]
    (tmp_path / "en.words.txt").write_text("ab\n", encoding="utf-8")
    one = cached_model_lexicons(m.cfg, syms, tmp_path, word_penalty=1.0)
    assert cached_model_lexicons(m.cfg, syms, tmp_path, word_penalty=1.0) is one  # built once
    assert cached_model_lexicons(m.cfg, syms, tmp_path, word_penalty=2.0) is not one  # another penalty
    assert cached_model_lexicons(m.cfg, syms, {"en": tmp_path / "en.words.txt"}, word_penalty=1.0)[0].n_words == 1
    (tmp_path / "en.words.txt").write_text("ab\nb\nba\n", encoding="utf-8")
    st = (tmp_path / "en.words.txt").stat()
    os.utime(tmp_path / "en.words.txt", ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    two = cached_model_lexicons(m.cfg, syms, tmp_path, word_penalty=1.0)
    assert two is not one and two[0].n_words == 3 and one[0].n_words == 1  # the edited file is read again
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no <lang>.words.txt"):
        cached_model_lexicons(m.cfg, syms, tmp_path / "empty")


def test_confidence_is_among_the_complete_hypotheses():
    model = tiny_model("lid", seed=0, blank_bias=-2.0)
    enc = encode(model, 9, 0, 1)
    lx = Lexicon.from_sequences(WORDS, 4)
    md = MultiDecoder(model, beam=6, max_symbols_per_frame=2, languages=[1], lexicons={1: lx})
    md.reset()
    md.advance_frames(enc)
    r = md.result()
    s = md.searches[0]
    complete = [h for h in s.hyps if lx.complete(h.node)]
    assert 0 < len(complete) < len(s.hyps)  # both kinds in the beam: the test is not vacuous
    tot = math.log(sum(math.exp(h.score) for h in complete))
    assert r.tokens == complete[0].tokens and r.confidence == pytest.approx(math.exp(r.score - tot))
