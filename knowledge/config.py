"""Settings: every one has a default, an environment variable and an optional file entry.

Precedence, highest first: the command line (``--home``), the environment, a ``.env`` file
in KB_HOME, a ``kb.toml`` file in KB_HOME (or the file named by ``KB_CONFIG``), the default.
A bad value stops kb at start-up with the variable's name, the value and what is expected.

``kb config`` prints every setting with its value and where the value came from.
"""

from __future__ import annotations

import os
import re
import sys
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path

from knowledge.errors import ConfigError


def _number(cast: Callable[[str], float], lo: float, hi: float, what: str) -> Callable[[str], float]:
    def parse(raw: str) -> float:
        try:
            value = cast(raw.strip())
        except ValueError:
            value = None
        if value is None or not lo <= value <= hi:
            raise ValueError(f"expected {what} between {lo} and {hi}")
        return value

    return parse


def _int(lo: int, hi: int) -> Callable[[str], float]:
    return _number(int, lo, hi, "a whole number")


def _float(lo: float, hi: float) -> Callable[[str], float]:
    return _number(float, lo, hi, "a number")


def _base_url(raw: str) -> str:
    return _url(raw).rstrip("/")


def _url(raw: str) -> str:
    raw = raw.strip()
    if not raw.startswith(("http://", "https://")):
        raise ValueError("expected an http:// or https:// URL")
    return raw


def _language(raw: str) -> str:
    """A language kb speaks (en, zh-Hant, zh-Hans, th, in any case), or empty: the reader's own."""
    value = raw.strip()
    known = {"": "", "en": "en", "zh-hant": "zh-Hant", "zh-hans": "zh-Hans", "th": "th"}
    if value.lower() not in known:
        raise ValueError("expected one of: en, zh-Hant, zh-Hans, th (or empty: the chat's or the locale's)")
    return known[value.lower()]


DEFAULT_LLM_MODEL = "default_model"  # mlx_lm.server's name for the model it was started with


def _llm_model(raw: str) -> str:
    """A model name the server serves; empty: DEFAULT_LLM_MODEL."""
    return raw.strip() or DEFAULT_LLM_MODEL


def _choice(*options: str) -> Callable[[str], str]:
    def parse(raw: str) -> str:
        value = raw.strip().lower()
        if value not in options:
            raise ValueError(f"expected one of: {', '.join(options)}")
        return value

    return parse


def _text(raw: str) -> str:
    return raw.strip()


_DIGEST = re.compile(
    r"off|daily@([01]\d|2[0-3]):[0-5]\d|weekly@(mon|tue|wed|thu|fri|sat|sun)-([01]\d|2[0-3]):[0-5]\d"
)


def _digest(raw: str) -> str:
    """off, daily@HH:MM or weekly@DAY-HH:MM (local time; DAY mon … sun)."""
    value = raw.strip().lower()
    if not _DIGEST.fullmatch(value):
        raise ValueError(
            "expected off, daily@HH:MM (e.g. daily@08:00) or weekly@DAY-HH:MM (e.g. weekly@mon-08:00)"
        )
    return value


def _optional_url(raw: str) -> str:
    return _base_url(raw) if raw.strip() else ""


def _prefix(raw: str) -> str:
    return raw.replace("\\n", "\n")


def _ports(raw: str) -> tuple[int, ...]:
    parts = [p.strip() for p in raw.split(",") if p.strip()]
    if not parts or not all(p.isdigit() and 0 < int(p) < 65536 for p in parts):
        raise ValueError("expected port numbers separated by commas, e.g. 80,443")
    return tuple(int(p) for p in parts)


def _user_ids(raw: str) -> tuple[int, ...]:
    parts = [p.strip() for p in raw.split(",") if p.strip()]
    if not all(p.isdigit() for p in parts):
        raise ValueError("expected numeric user ids separated by commas, e.g. 123456789,987654321")
    return tuple(int(p) for p in parts)


@dataclass(frozen=True)
class Setting:
    """One setting: its variable, default (as text), parser and a line of help."""

    env: str
    default: str
    parse: Callable[[str], object]
    help: str

    @property
    def field(self) -> str:
        return self.env.removeprefix("KB_").lower()


SETTINGS: tuple[Setting, ...] = (
    Setting("KB_MODEL", "mlx-community/Qwen3-4B-Instruct-2507-4bit", _text,
            "model id served by mlx_lm.server (also where the tokenizer is looked up)"),
    Setting("KB_TOKENIZER", "", _text,
            "tokenizer.json file, model folder or cached model id; empty: KB_MODEL"),
    Setting("KB_LLM_URL", "http://127.0.0.1:8081/v1", _base_url, "OpenAI-compatible base URL of the model server"),
    Setting("KB_LLM_MODEL", DEFAULT_LLM_MODEL, _llm_model,
            "model name sent with each request: default_model is the one mlx_lm.server was started with "
            "(llama-server takes any name); Ollama and vLLM need a name they serve, e.g. qwen3:4b"),
    Setting("KB_CHUNK_MAX_TOKENS", "160", _int(16, 8192), "largest chunk, in tokens"),
    Setting("KB_CHUNK_OVERLAP_TOKENS", "48", _int(0, 1024), "tokens a chunk repeats from the previous one"),
    Setting("KB_MAX_SOURCE_MB", "20", _float(0.001, 1024), "largest source file accepted, in MiB"),
    Setting("KB_PDF_MAX_PAGES", "2000", _int(1, 100000), "PDFs with more pages are refused"),
    Setting("KB_CONVERT_TIMEOUT_S", "30", _float(0.1, 3600), "a conversion taking longer is stopped and refused"),
    Setting("KB_CONVERT_MEMORY_MB", "2048", _int(64, 1048576), "address-space limit of the conversion worker"),
    Setting("KB_OCR", "auto", _choice("auto", "vision", "rapidocr", "off"),
            "text from images and scanned pages: auto (Apple Vision on macOS, else RapidOCR), vision, rapidocr, off"),
    Setting("KB_OCR_LANGS", "zh-Hant,zh-Hans,en", _text,
            "languages OCR reads, comma-separated (zh-Hant, zh-Hans, en; th with Apple Vision only)"),
    Setting("KB_OCR_DPI", "150", _int(72, 600), "resolution scanned PDF pages are rendered at for OCR"),
    Setting("KB_OCR_PAGE_TIMEOUT_S", "20", _float(1, 3600), "conversion time allowed per page read by OCR"),
    Setting("KB_OCR_BUDGET_S", "3600", _float(1, 7 * 86400),
            "OCR time one file may have in all; the scanned pages past it are listed as not read"),
    Setting("KB_OCR_TURN_S", "120", _float(0.1, 86400),
            "OCR time a long scan has before the files waiting behind it get their turn"),
    Setting("KB_WHISPER_MODEL", "mlx-community/whisper-large-v3-turbo", _text,
            "speech-to-text model for voice questions (mlx-whisper; local folder or hub id)"),
    Setting("KB_VOICE_MAX_S", "300", _float(1, 7200), "longest voice note or audio file transcribed, in seconds"),
    Setting("KB_TRANSCRIBE_TIMEOUT_S", "120", _float(1, 3600), "a transcription taking longer is stopped"),
    Setting("KB_SEARCH_K", "5", _int(1, 100), "passages kb search returns by default"),
    Setting("KB_LOCK_WAIT_S", "30", _float(0, 86400), "how long kb ingest waits for the writer lock"),
    Setting("KB_SETTLE_S", "1", _float(0.05, 600), "an inbox file is taken once unchanged this long"),
    Setting("KB_RESCAN_S", "300", _float(1, 86400), "the daemon rescans the inbox and raw/ this often"),
    Setting("KB_RETRY_ATTEMPTS", "5", _int(0, 100), "retries of a locked file, full disk or busy database"),
    Setting("KB_ORPHAN_SIDECAR_S", "3600", _float(1, 10**7), "a sidecar without its file goes to failed/ after"),
    Setting("KB_EVIDENCE_TOKENS", "640", _int(32, 1_000_000), "evidence sent to the model, in tokens"),
    Setting("KB_CONTEXT_TOKENS", "8192", _int(256, 10_000_000), "the model's context window"),
    # English answers run to 330 tokens at p99 (MTRAG, INSCIT); Thai takes 2.5 times the tokens
    Setting("KB_MAX_OUTPUT_TOKENS", "1024", _int(16, 1_000_000), "longest answer; kept free in the context"),
    Setting("KB_HISTORY_TOKENS", "768", _int(0, 1_000_000),
            "the conversation so far in the answer prompt, in tokens (its fixed share of the context; 0: none)"),
    Setting("KB_CONVERSATION_IDLE_S", "1800", _float(1, 10**8),
            "a conversation ends after this much silence; the next message starts afresh"),
    Setting("KB_REWRITE_TIMEOUT_S", "6", _float(0.5, 120),
            "longest wait for the model to make a follow-up a standalone question"),
    Setting("KB_MIN_RELEVANCE", "0.5", _float(0, 1), "relevance the best passage needs for the documents to answer"),
    Setting("KB_LLM_TIMEOUT_S", "120", _float(1, 3600), "longest wait for one model answer"),
    Setting("KB_LLM_STREAM_TIMEOUT_S", "600", _float(1, 86400),
            "longest a streamed answer may take from start to end, keep-alive comments included"),
    Setting("KB_LLM_CONNECT_TIMEOUT_S", "5", _float(0.1, 600), "longest wait to connect to the model server"),
    Setting("KB_LLM_CONCURRENCY", "1", _int(1, 64), "model requests in flight at once from one process"),
    Setting("KB_EMBED", "auto", _choice("auto", "local", "url", "off"),
            "vectors for search by meaning: local model, an embeddings server, auto (url if set, else local), off"),
    Setting("KB_EMBED_URL", "", _optional_url, "OpenAI-compatible embeddings server base URL (KB_EMBED=url)"),
    Setting("KB_EMBED_MODEL", "multilingual-e5-small", _text, "model name sent to the embeddings server"),
    Setting("KB_EMBED_QUERY_PREFIX", "", _prefix, "text put before a question sent to the embeddings server"),
    Setting("KB_EMBED_PASSAGE_PREFIX", "", _prefix, "text put before a passage sent to the embeddings server"),
    Setting("KB_EMBED_TIMEOUT_S", "60", _float(1, 3600), "longest wait for one batch of embeddings"),
    Setting("KB_EMBED_BATCH", "16", _int(1, 1024), "passages embedded per batch"),
    Setting("KB_EMBED_THREADS", "0", _int(0, 256), "threads of the local embedder (0: all cores)"),
    Setting("KB_TRANSLATE", "auto", _choice("auto", "off"),
            "also search with the question in the index's other languages, translated by the model: auto, off"),
    Setting("KB_TRANSLATE_TIMEOUT_S", "8", _float(0.5, 120), "longest wait for the model's translation"),
    Setting("KB_WEB_SEARCH", "on", _choice("on", "ask", "off"),
            "search the web when the documents do not answer: on (at once), ask (only /search, kb websearch), off"),
    Setting("KB_DDG_URL", "https://lite.duckduckgo.com/lite/", _url, "DuckDuckGo Lite endpoint"),
    Setting("KB_BRAVE_API_KEY", "", _text, "Brave Search API key (optional second provider)"),
    Setting("KB_BRAVE_URL", "https://api.search.brave.com/res/v1/web/search", _url, "Brave Search API endpoint"),
    Setting("KB_FETCH_MAX_MB", "20", _float(0.01, 1024), "largest web page or PDF an import downloads, in MiB"),
    Setting("KB_FETCH_PORTS", "80,443", _ports, "ports a web import may connect to"),
    Setting("KB_IMPORT_WAIT_S", "60", _float(0, 3600), "how long an import waits for the daemon to index the page"),
    Setting("KB_TELEGRAM_TOKEN", "", _text, "Telegram bot token; when set, kb run starts the bot"),
    Setting("KB_TELEGRAM_API_URL", "https://api.telegram.org/bot", _url, "Bot API base URL (PTB base_url)"),
    Setting("KB_TELEGRAM_ALLOWED_USERS", "", _user_ids, "comma-separated numeric Telegram user ids"),
    Setting("KB_TELEGRAM_UPDATE_EVERY_S", "1", _float(0.01, 60),
            "a streamed answer on screen is updated at most this often per chat (edits: 1.2 times as long)"),
    Setting("KB_MCP_TOKEN", "", _text,
            "bearer token kb mcp --http requires (Authorization: Bearer TOKEN); empty: none (kb doctor warns)"),
    Setting("KB_MCP_PORT", "8765", _int(1, 65535), "loopback port of kb mcp --http"),
    Setting("KB_SUMMARIES", "on", _choice("on", "off"),
            "the daemon summarises each document with the model (its opening sentences while the model is down)"),
    Setting("KB_DIGEST", "off", _digest,
            "send the digest to the allowed users: off, daily@08:00 or weekly@mon-08:00 (this machine's local time)"),
    Setting("KB_LANGUAGE", "", _language,
            "the language kb writes in: en, zh-Hant, zh-Hans, th; empty: each Telegram user's, the terminal's locale"),
    Setting("KB_LOG_LEVEL", "info", _choice("debug", "info", "warning", "error"), "console log level"),
)  # fmt: skip


def bounded_overlap(max_tokens: int, overlap_tokens: int) -> int:
    """The tokens a chunk repeats from the one before (KB_CHUNK_OVERLAP_TOKENS): as asked, at most half
    the largest chunk (knowledge.ingest.chunking cuts by it)."""
    return max(0, min(overlap_tokens, max_tokens // 2))


@dataclass(frozen=True)
class Settings:
    """Resolved settings; paths under ``home`` follow the data layout in the README."""

    home: Path
    model: str
    tokenizer: str
    llm_url: str
    llm_model: str
    chunk_max_tokens: int
    chunk_overlap_tokens: int
    max_source_mb: float
    pdf_max_pages: int
    convert_timeout_s: float
    convert_memory_mb: int
    ocr: str
    ocr_langs: str
    ocr_dpi: int
    ocr_page_timeout_s: float
    ocr_budget_s: float
    ocr_turn_s: float
    whisper_model: str
    voice_max_s: float
    transcribe_timeout_s: float
    search_k: int
    lock_wait_s: float
    settle_s: float
    rescan_s: float
    retry_attempts: int
    orphan_sidecar_s: float
    evidence_tokens: int
    context_tokens: int
    max_output_tokens: int
    history_tokens: int
    conversation_idle_s: float
    rewrite_timeout_s: float
    min_relevance: float
    llm_timeout_s: float
    llm_stream_timeout_s: float
    llm_connect_timeout_s: float
    llm_concurrency: int
    embed: str
    embed_url: str
    embed_model: str
    embed_query_prefix: str
    embed_passage_prefix: str
    embed_timeout_s: float
    embed_batch: int
    embed_threads: int
    translate: str
    translate_timeout_s: float
    web_search: str
    ddg_url: str
    brave_api_key: str
    brave_url: str
    fetch_max_mb: float
    fetch_ports: tuple[int, ...]
    import_wait_s: float
    telegram_token: str
    telegram_api_url: str
    telegram_allowed_users: tuple[int, ...]
    telegram_update_every_s: float
    mcp_token: str
    mcp_port: int
    log_level: str
    summaries: str
    digest: str
    language: str
    sources: Mapping[str, str]
    locale: str = ""  # the terminal's (LC_ALL, LC_MESSAGES, LANG): its language when KB_LANGUAGE is empty
    platform: str = ""  # the operating system kb runs on (sys.platform's value): what its messages call it

    @property
    def inbox(self) -> Path:
        return self.home / "knowledge" / "inbox"

    @property
    def processed(self) -> Path:
        return self.inbox / "processed"

    @property
    def failed(self) -> Path:
        return self.inbox / "failed"

    @property
    def raw(self) -> Path:
        return self.home / "knowledge" / "raw"

    @property
    def trash(self) -> Path:
        """Removed documents, one folder each (raw file, original, manifest.json), kept 30 days."""
        return self.home / "knowledge" / "trash"

    @property
    def requests(self) -> Path:
        """Changes asked of the running daemon (``ID.json``) and its answers (``ID.result.json``)."""
        return self.home / "knowledge" / "requests"

    @property
    def chunking(self) -> str:
        """How passages are cut, as the index records it (meta ``chunking``): largest / overlap, in
        tokens ("160/48"; the overlap as the chunker bounds it, at most half the largest). An index cut
        otherwise is re-cut by ``kb reindex``."""
        return f"{self.chunk_max_tokens}/{bounded_overlap(self.chunk_max_tokens, self.chunk_overlap_tokens)}"

    @property
    def index_path(self) -> Path:
        return self.home / "knowledge" / "index" / "kb.sqlite3"

    @property
    def staging(self) -> Path:
        """Where files are written before being renamed into raw/ (same file system, not watched)."""
        return self.home / "knowledge" / "index" / "staging"

    @property
    def lock_path(self) -> Path:
        """Beside index/, never in it: deleting a damaged index must not free the lock of a running writer."""
        return self.home / "knowledge" / "writer.lock"

    @property
    def runs(self) -> Path:
        return self.home / "runs"

    @property
    def log_path(self) -> Path:
        return self.runs / "logs" / "kb.jsonl"

    @property
    def tokenizer_dir(self) -> Path:
        """Where kb keeps the tokenizers it fetched itself (one folder per model)."""
        return self.runs / "tokenizers"

    @property
    def ocr_pages_dir(self) -> Path:
        """Where the pages of long scans read so far are kept between turns and restarts."""
        return self.runs / "ocr-pages"

    @property
    def model_dir(self) -> Path:
        """Where kb keeps the speech models it downloaded itself (one folder per model)."""
        return self.runs / "models"

    @property
    def conversations_path(self) -> Path:
        """What the bot and the terminal remember of their conversations (never the index)."""
        return self.runs / "conversations.sqlite3"

    @property
    def tokenizer_spec(self) -> str:
        """What to load the tokenizer from: KB_TOKENIZER, else the model id."""
        return self.tokenizer or self.model

    @property
    def max_source_bytes(self) -> int:
        return int(self.max_source_mb * 1024 * 1024)


def read_dotenv(path: Path, *, lenient: bool = False) -> dict[str, str]:
    """KEY=VALUE lines of a .env file (comments, blank lines, `export` and quotes allowed); a line
    that is none of these is a ConfigError, or skipped when ``lenient`` (with a key that is no
    variable name)."""
    out: dict[str, str] = {}
    if not path.is_file():
        return out
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.removeprefix("export ").partition("=")
        if lenient and not (sep and _ENV_NAME.fullmatch(key.strip())):
            continue
        if not sep:
            raise ConfigError(f"{path}:{n}: expected KEY=VALUE, got {line!r}")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        out[key.strip()] = value
    return out


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def read_toml(path: Path) -> dict[str, str]:
    """Settings from a TOML file: top-level keys named like the variables, with or without KB_ (the
    ``[[sources]]`` tables are kb's folder sources, read by knowledge.sources.registry)."""
    if not path.is_file():
        return {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
    out: dict[str, str] = {}
    for key, value in data.items():
        if key == "sources" and isinstance(value, list):
            continue
        name = key.upper() if key.upper().startswith("KB_") else "KB_" + key.upper()
        out[name] = str(value).lower() if isinstance(value, bool) else str(value)
    return out


def load_settings(
    env: Mapping[str, str] | None = None, *, home: str | Path | None = None, platform: str = sys.platform
) -> Settings:
    """Resolve every setting; raises ConfigError naming the variable on a bad value (``platform``: the
    operating system kb runs on, this one by default)."""
    env = dict(os.environ) if env is None else dict(env)
    home_path = Path(home or env.get("KB_HOME") or os.getcwd()).expanduser().resolve()
    config_file = Path(env["KB_CONFIG"]).expanduser() if env.get("KB_CONFIG") else home_path / "kb.toml"
    layers = [
        ("environment", env),
        (str(home_path / ".env"), read_dotenv(home_path / ".env")),
        (str(config_file), read_toml(config_file)),
    ]
    known = {s.env for s in SETTINGS} | {"KB_HOME", "KB_CONFIG"}
    for origin, layer in layers[1:]:
        unknown = sorted(k for k in layer if k.startswith("KB_") and k not in known)
        if unknown:
            raise ConfigError(f"{origin}: unknown setting {', '.join(unknown)} (see: kb config)")
    values: dict[str, object] = {}
    sources: dict[str, str] = {
        "KB_HOME": "--home" if home else ("environment" if env.get("KB_HOME") else "cwd")
    }
    for setting in SETTINGS:
        raw, origin = setting.default, "default"
        for name, layer in layers:
            if setting.env in layer:
                raw, origin = layer[setting.env], name
                break
        try:
            values[setting.field] = setting.parse(raw)
        except ValueError as exc:
            where = "" if origin in ("environment", "default") else f" (from {origin})"
            raise ConfigError(f"{setting.env}={raw!r}{where}: {exc}") from None
        sources[setting.env] = origin
    if values["max_output_tokens"] >= values["context_tokens"]:  # type: ignore[operator]
        raise ConfigError(
            f"KB_MAX_OUTPUT_TOKENS={values['max_output_tokens']} must be smaller than"
            f" KB_CONTEXT_TOKENS={values['context_tokens']}"
        )
    if values["chunk_overlap_tokens"] >= values["chunk_max_tokens"]:  # type: ignore[operator]
        raise ConfigError(
            f"KB_CHUNK_OVERLAP_TOKENS={values['chunk_overlap_tokens']} must be smaller than"
            f" KB_CHUNK_MAX_TOKENS={values['chunk_max_tokens']}"
        )
    locale = next((env[k] for k in ("LC_ALL", "LC_MESSAGES", "LANG") if env.get(k)), "")
    return Settings(home=home_path, sources=sources, locale=locale, platform=platform, **values)  # type: ignore[arg-type]


def describe(settings: Settings) -> list[tuple[str, str, str, str]]:
    """(variable, value, origin, help) for every setting, for ``kb config``."""
    rows = [("KB_HOME", str(settings.home), settings.sources["KB_HOME"], "where knowledge/ and runs/ live")]
    by_field = {f.name: getattr(settings, f.name) for f in fields(settings)}
    for s in SETTINGS:
        value = by_field[s.field]
        shown = "(set, hidden)" if s.env.endswith(("_TOKEN", "_KEY")) and value else str(value)
        rows.append((s.env, shown, settings.sources[s.env], s.help))
    return rows
