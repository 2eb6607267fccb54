"""The owner's folders from the phone, through the Bot API stand-in on real folders watched by the real
daemon: /folders counts each source's files in the reader's language, Open on a note of an Obsidian
vault gives its obsidian:// link and on a file of a plain folder its path, each then the file itself;
/help tells of /folders, in:NAME and #tag."""

from __future__ import annotations

import html
from pathlib import Path

import pytest

from knowledge.sources.registry import Source, config_file, write_sources
from knowledge.words.catalog import Words
from tests.bot_env import OWNER, running_bot, valid_html, wait_indexed
from tests.sources_vault import snapshot
from tests.test_bot_converse import turn
from tests.test_bot_find import last_with, tap
from tests.test_bot_languages import english_runs

VAULT = {
    "Projects/NAS upgrade.md": "---\ntitle: NAS upgrade\n---\n\n# NAS upgrade\n\n"
    "The new NAS takes four drives of twelve terabytes.\n",
    "Daily/2026-12-01.md": "# Monday\n\nThe plumber comes on Thursday at nine.\n",
    ".obsidian/app.json": "{}",
}
PAPERS = {"lease/rent.txt": "The flat's deposit is two months of rent, paid back within thirty days.\n"}


def write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return root


def with_folders(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A home whose kb.toml names an Obsidian vault ("My Vault", with .obsidian/) and a plain folder."""
    home = tmp_path / "kb"
    home.mkdir()
    vault = write(tmp_path / "My Vault", VAULT)
    papers = write(tmp_path / "papers", PAPERS)
    write_sources(config_file(home), [Source("vault", vault), Source("papers", papers)])
    return home, vault, papers


@pytest.mark.parametrize("language", ["en", "zh-Hant", "th"])
async def test_folders_lists_each_source_with_its_counts_in_the_readers_language(
    tmp_path, varn_site, language
):
    home, vault, papers = with_folders(tmp_path)
    async with running_bot(home, varn_site) as (env, _):
        env.telegram.set_language(OWNER, {"en": "en", "zh-Hant": "zh-hant", "th": "th"}[language])
        await wait_indexed(env, 3)
        words = Words(language)
        shown = await turn(env, "/folders", lambda t: "vault" in t and "papers" in t)
    text = shown.params["text"]
    assert valid_html(shown)
    indexed, skipped, failed = (words.tr(s) for s in ("indexed", "skipped", "failed"))
    vault_line, papers_line = (b.split("\n") for b in text.split("\n\n")[1:3])
    assert vault_line[0] == f"<b>vault</b> · <code>{html.escape(str(vault), quote=False)}</code>"
    assert f"2 {indexed}" in vault_line[1] and f"1 {skipped}" in vault_line[1]  # .obsidian/ left out
    assert papers_line[0] == f"<b>papers</b> · <code>{papers}</code>"
    assert f"1 {indexed}" in papers_line[1] and f"0 {failed}" in papers_line[1]
    assert (
        words.tr("kb sources {name} on your computer lists each file left out, and why.", name="vault")
        in text
    )
    assert text.startswith(f"<b>{words.tr('Folders kept in sync')}</b>")
    if language != "en":
        assert english_runs(text) == [] and "Folders" not in text


async def test_no_folders_yet_says_how_to_add_one_and_help_tells_of_folders_and_scopes(tmp_path, varn_site):
    async with running_bot(tmp_path / "kb", varn_site) as (env, _):
        none = await turn(env, "/folders", lambda t: "No folders yet" in t)
        assert "kb sources add PATH --name NAME" in none.params["text"]
        helped = await turn(env, "/help", lambda t: "/find" in t)
        env.telegram.set_language(OWNER, "zh-hant")
        chinese = await turn(env, "/help", lambda t: "/find" in t and "在" in t)
    for text in (helped.params["text"], chinese.params["text"]):
        assert "/folders" in text and "in:NAME" in text and "#tag" in text and "in:vault #rent" in text
    assert "searches one folder only" in helped.params["text"]
    assert "searches one folder only" not in chinese.params["text"]


async def test_open_gives_a_vault_note_its_obsidian_link_and_a_folder_file_its_path(tmp_path, varn_site):
    home, vault, papers = with_folders(tmp_path)
    before = {**snapshot(vault), **snapshot(papers)}
    async with running_bot(home, varn_site) as (env, _):
        await wait_indexed(env, 3)
        listing = await turn(env, "/find terabytes", lambda t: "1 document" in t)
        since = len(env.telegram.calls())
        await tap(env, env.telegram.message(OWNER, listing.result["message_id"]), "Open 1")
        sent = await env.telegram.wait_for(lambda c: c.method == "sendDocument" and c.index >= since, 10)
        link = "obsidian://open?vault=My%20Vault&file=Projects%2FNAS%20upgrade.md"
        said = last_with(env, "Open it in Obsidian")
        assert said.text == f"Open it in Obsidian: {link}"
        assert sent.ok and sent.params["_files"]["document"] == "NAS upgrade.md"
        assert (
            env.telegram.file(sent.result["document"]["file_id"]).data
            == (vault / "Projects/NAS upgrade.md").read_bytes()
        )
        passage = last_with(env, "four drives of twelve terabytes")
        assert (
            "vault:Projects/NAS upgrade.md:5-7" in passage.text
        )  # the lines of the owner's file (front matter 1-3)

        listing = await turn(env, "/find deposit", lambda t: "1 document" in t)
        since = len(env.telegram.calls())
        await tap(env, env.telegram.message(OWNER, listing.result["message_id"]), "Open 1")
        sent = await env.telegram.wait_for(lambda c: c.method == "sendDocument" and c.index >= since, 10)
        assert last_with(env, "The file on your computer").text == (
            f"The file on your computer: {papers / 'lease' / 'rent.txt'}"
        )
        assert env.telegram.file(sent.result["document"]["file_id"]).data == PAPERS["lease/rent.txt"].encode()

    assert {**snapshot(vault), **snapshot(papers)} == before  # kb wrote, moved and touched nothing there
