"""Purge signing keys: configured ones for production, a local one so forgetting works on day one.

Configured keys (``forget.keys``: kid -> name of the environment variable holding its secret,
``forget.active_kid``) are for deployments where several processes must verify each other's
receipts, and required with a shared PostgreSQL ledger (:func:`require_shared_keys`). With none
configured, the embedded default makes a local key when the data directory is opened:
``forget.key`` in the data directory, readable by its owner only, named in each receipt by its
kid (``local-`` and eight hex digits). Old kids stay verifiable after rotation.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
from pathlib import Path

from ..config import Config
from ..errors import ConfigError

LOCAL_KEY_FILE = "forget.key"
LOCAL_PREFIX = "local-"

__all__ = ["LOCAL_KEY_FILE", "ensure_local_key", "require_shared_keys", "signing_key", "verification_secrets"]


def _env_secret(keys: dict[str, str], kid: str) -> bytes:
    env = keys[kid]
    value = os.environ.get(env)
    if not value:
        raise ConfigError(f"the purge key {kid!r} reads its secret from the environment variable {env}, "
                          "which is not set or is empty; set it (receipts are never signed with an empty key)",
                          key=f"forget.keys.{kid}")
    return value.encode("utf-8")


def ensure_local_key(data_dir: Path) -> tuple[str, bytes]:
    """The data directory's local key, made now (mode 0600) if it does not exist yet."""
    path = Path(data_dir) / LOCAL_KEY_FILE
    if not path.exists():
        doc = {"kid": LOCAL_PREFIX + secrets.token_hex(4),
               "secret": base64.urlsafe_b64encode(secrets.token_bytes(32)).decode("ascii")}
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # another process made it first: use theirs
            pass
        else:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(doc, fh)
    return _read_local(path)


def _read_local(path: Path) -> tuple[str, bytes]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        kid, secret = doc["kid"], base64.urlsafe_b64decode(doc["secret"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"the local purge key {path} cannot be read ({type(exc).__name__}); restore it from a "
                          "backup, or configure forget.keys") from None
    if not isinstance(kid, str) or not kid.startswith(LOCAL_PREFIX) or len(secret) < 16:
        raise ConfigError(f"the local purge key {path} is malformed; restore it from a backup, or configure "
                          "forget.keys")
    return kid, secret


def signing_key(config: Config, data_dir: Path | None) -> tuple[str, bytes]:
    """(kid, secret) of the active signing key, or a ConfigError that says what to set."""
    cfg = config.forget
    if not cfg.keys:
        if data_dir is None:
            raise ConfigError("no purge signing key: map a key id to an environment variable in forget.keys and "
                              "name it in forget.active_kid", key="forget.keys")
        return ensure_local_key(data_dir)
    kid = cfg.active_kid
    if kid is None and len(cfg.keys) == 1:
        kid = next(iter(cfg.keys))
    if kid is None or kid not in cfg.keys:
        raise ConfigError("no purge signing key: map a key id to an environment variable in forget.keys and "
                          "name it in forget.active_kid", key="forget.active_kid")
    return kid, _env_secret(dict(cfg.keys), kid)


def require_shared_keys(config: Config) -> tuple[str, bytes]:
    """The active configured key, where several processes share one ledger (PostgreSQL).

    Every process must sign and verify receipts with the same keys, so a local per-directory
    key will not do: without ``forget.keys`` (and the active key's secret in the environment)
    such a process refuses to start, naming what to set.
    """
    if not config.forget.keys:
        raise ConfigError("a shared ledger (store.ledger.url) needs purge signing keys that every process shares: "
                          "map a key id to the environment variable holding its secret in forget.keys, name it in "
                          "forget.active_kid and set that variable for every process (the local per-directory key "
                          "is for the embedded default only)", key="forget.keys")
    return signing_key(config, None)


def verification_secrets(config: Config, kid: str, data_dir: Path | None = None) -> dict[str, bytes]:
    """The secret for one kid: a configured one, or the data directory's local key; {} if unknown."""
    keys = dict(config.forget.keys)
    if kid in keys:
        return {kid: _env_secret(keys, kid)}
    if data_dir is not None and kid.startswith(LOCAL_PREFIX):
        path = Path(data_dir) / LOCAL_KEY_FILE
        if path.exists():
            local_kid, secret = _read_local(path)
            if local_kid == kid:
                return {kid: secret}
    return {}
