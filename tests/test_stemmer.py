import pytest

from knowledge.store.stemmer import porter_stem

# Pairs from Porter's 1980 paper and the reference vocabulary.
PAIRS = """caresses caress ponies poni ties ti caress caress cats cat feed feed agreed agre plastered plaster
bled bled motoring motor sing sing conflated conflat troubled troubl sized size hopping hop tanned tan
falling fall hissing hiss fizzed fizz failing fail filing file happy happi sky sky relational relat
conditional condit rational ration valenci valenc digitizer digit conformabli conform radicalli radic
differentli differ vileli vile analogousli analog vietnamization vietnam predication predic operator oper
feudalism feudal decisiveness decis hopefulness hope callousness callous formaliti formal sensitiviti sensit
sensibiliti sensibl triplicate triplic formative form formalize formal electriciti electr electrical electr
hopeful hope goodness good revival reviv allowance allow inference infer airliner airlin gyroscopic gyroscop
adjustable adjust defensible defens irritant irrit replacement replac adjustment adjust dependent depend
adoption adopt homologou homolog communism commun activate activ angulariti angular homologous homolog
effective effect bowdlerize bowdler probate probat rate rate cease ceas controll control roll roll""".split()


@pytest.mark.parametrize(("word", "stem"), list(zip(PAIRS[::2], PAIRS[1::2], strict=True)))
def test_porter_reference_pairs(word, stem):
    assert porter_stem(word) == stem


@pytest.mark.parametrize(("a", "b"), [("running", "run"), ("engines", "engine"), ("connection", "connected")])
def test_inflections_meet(a, b):
    assert porter_stem(a) == porter_stem(b)


@pytest.mark.parametrize("word", ["", "a", "is", "café", "3d", "黑豹", "x-ray"])
def test_short_and_non_ascii_words_are_left_alone(word):
    assert porter_stem(word) == word


@pytest.mark.parametrize("n", [40, 60, 1_100, 100_000])
def test_long_runs_of_y_neither_recurse_nor_crawl(n):
    """No RecursionError at 100,000; its seconds are measured by bench/hostile_inputs.py."""
    stem = porter_stem("y" * n + "ed")
    assert stem.startswith("y" * (min(n, 40) - 1))
