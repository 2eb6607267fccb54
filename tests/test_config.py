from pathlib import Path

import pytest

from knowledge.config import describe, load_settings
from knowledge.errors import ConfigError


def test_defaults(tmp_path):
    s = load_settings({}, home=tmp_path)
    assert s.chunk_max_tokens == 160 and s.chunk_overlap_tokens == 48 and s.chunking == "160/48"
    assert s.llm_url == "http://127.0.0.1:8081/v1"
    assert s.index_path == tmp_path / "knowledge" / "index" / "kb.sqlite3"
    assert s.inbox == tmp_path / "knowledge" / "inbox" and s.failed == s.inbox / "failed"
    assert s.log_path == tmp_path / "runs" / "logs" / "kb.jsonl"
    assert s.tokenizer_spec == s.model


def test_home_from_environment_and_command_line(tmp_path):
    assert load_settings({"KB_HOME": str(tmp_path)}).home == tmp_path
    other = tmp_path / "other"
    assert load_settings({"KB_HOME": str(tmp_path)}, home=other).home == other


def test_precedence_environment_over_dotenv_over_toml(tmp_path):
    (tmp_path / "kb.toml").write_text(
        'chunk_max_tokens = 300\nKB_SEARCH_K = 7\nKB_LLM_URL = "http://a:1/v1"\n'
    )
    (tmp_path / ".env").write_text("# local\nexport KB_CHUNK_MAX_TOKENS=200\nKB_LLM_URL='http://b:2/v1'\n")
    s = load_settings({"KB_LLM_URL": "http://c:3/v1/"}, home=tmp_path)
    assert s.chunk_max_tokens == 200
    assert s.search_k == 7
    assert s.llm_url == "http://c:3/v1"
    assert s.sources["KB_SEARCH_K"] == str(tmp_path / "kb.toml")
    assert s.sources["KB_LLM_URL"] == "environment"
    assert ("KB_CHUNK_MAX_TOKENS", "200", str(tmp_path / ".env")) in [r[:3] for r in describe(s)]


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"KB_CHUNK_MAX_TOKENS": "abc"}, "KB_CHUNK_MAX_TOKENS='abc'"),
        ({"KB_CHUNK_MAX_TOKENS": "0"}, "KB_CHUNK_MAX_TOKENS='0'"),
        ({"KB_LLM_URL": "localhost:8081"}, "KB_LLM_URL"),
        ({"KB_LOG_LEVEL": "loud"}, "KB_LOG_LEVEL"),
        ({"KB_CONVERT_TIMEOUT_S": "-1"}, "KB_CONVERT_TIMEOUT_S"),
        (
            {"KB_CHUNK_OVERLAP_TOKENS": "200"},
            "KB_CHUNK_OVERLAP_TOKENS=200 must be smaller than KB_CHUNK_MAX_TOKENS",
        ),
    ],
)
def test_bad_values_name_the_variable(tmp_path, env, named):
    with pytest.raises(ConfigError, match=named.replace("(", r"\(").replace("+", r"\+")):
        load_settings(env, home=tmp_path)


def test_bad_value_in_a_file_names_the_file(tmp_path):
    (tmp_path / ".env").write_text("KB_SEARCH_K=many\n")
    with pytest.raises(ConfigError, match=r"KB_SEARCH_K='many' \(from .*\.env\)"):
        load_settings({}, home=tmp_path)


def test_unknown_setting_in_a_file_is_reported(tmp_path):
    (tmp_path / "kb.toml").write_text("chunk_max_tokenz = 3\n")
    with pytest.raises(ConfigError, match="unknown setting KB_CHUNK_MAX_TOKENZ"):
        load_settings({}, home=tmp_path)


def test_malformed_files(tmp_path):
    (tmp_path / "kb.toml").write_text("= nope")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_settings({}, home=tmp_path)
    (tmp_path / "kb.toml").unlink()
    (tmp_path / ".env").write_text("JUSTAWORD\n")
    with pytest.raises(ConfigError, match=r"\.env:1: expected KEY=VALUE"):
        load_settings({}, home=tmp_path)


def test_config_file_named_by_kb_config(tmp_path):
    cfg = tmp_path / "elsewhere.toml"
    cfg.write_text("search_k = 9\n")
    assert load_settings({"KB_CONFIG": str(cfg)}, home=tmp_path / "h").search_k == 9


def test_home_default_is_the_current_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert load_settings({}).home == Path(tmp_path).resolve()


def test_an_env_file_is_read_strictly_by_kb_and_leniently_for_the_service_manager(tmp_path):
    from knowledge.config import read_dotenv

    env = tmp_path / "env"
    env.write_text("# kb\nexport KB_MODEL='acme/model'\nKB_LOG_LEVEL=debug\nnot a setting\nMY-KEY=1\n")
    assert read_dotenv(env, lenient=True) == {"KB_MODEL": "acme/model", "KB_LOG_LEVEL": "debug"}
    with pytest.raises(ConfigError, match=r"env:4: expected KEY=VALUE"):
        read_dotenv(env)
