"""One error hierarchy for Ombre Brain.

Every error a caller can see derives from :class:`OmbreError`, so the CLI and the HTTP
layer can turn any of them into a clear message (and a 4xx status) without tracebacks::

    OmbreError
    ├── ConfigError            a YAML file or override is wrong (names file, line and dotted key)
    ├── ValidationError        a bucket, edge, query or request body is malformed
    │   └── BudgetError        a facts read budget is outside its allowed range
    ├── NotFoundError          a bucket, edge, session, job or receipt does not exist
    ├── SpaceError             a space name is malformed or the space is unknown
    ├── AuthError              a bearer token is missing or wrong (401)
    │   └── ForbiddenError     the token is valid but not for this space (403)
    ├── ConflictError          a write collides with existing state (409)
    │   ├── SourceSuppressedError   the source identity was purged and may not return
    │   ├── ProvenanceError    a lower origin tried to overwrite a higher one
    │   ├── DuplicateError     an identical memory exists with other values in the fields given
    │   ├── StaleTargetError   a facts edit named a revision that is no longer current
    │   └── DataDirInUseError  another process holds the embedded data directory open for writing
    ├── EmbeddingError         the embedder cannot load, or a space was embedded with another model
    ├── StoreError             Chroma or the ledger failed underneath us
    └── UpstreamError          the proxied LLM answered with an error or not at all
"""

from __future__ import annotations


class OmbreError(Exception):
    """Base of every error Ombre Brain raises on purpose."""

    code = "error"
    status = 400

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code

    def to_dict(self) -> dict:
        return {"error": {"code": self.code, "message": self.message}}


class ConfigError(OmbreError):
    """Raised when a config file or override has an unknown key, a wrong type or a bad value."""

    code = "bad_config"

    def __init__(self, message: str, *, file: str | None = None, key: str | None = None,
                 line: int | None = None) -> None:
        where = []
        if file:
            where.append(str(file))
        if line:
            where.append(f"line {line}")
        if key:
            where.append(f"key '{key}'")
        prefix = f"{': '.join(where)}: " if where else ""
        super().__init__(prefix + message)
        self.file = file
        self.key = key
        self.line = line
        self.problem = message  # what is wrong, without where

    def to_dict(self) -> dict:
        d = super().to_dict()
        d["error"].update({k: v for k, v in (("key", self.key), ("line", self.line)) if v is not None},
                          problem=self.problem)
        return d


class ValidationError(OmbreError):
    """Raised when input data (a bucket, an edge, a request body) is malformed."""

    code = "invalid"

    def __init__(self, message: str, *, field: str | None = None, code: str | None = None) -> None:
        super().__init__(f"{field}: {message}" if field else message, code=code)
        self.field = field


class BudgetError(ValidationError):
    """Raised when a read budget is outside its documented range."""

    code = "bad_budget"


class NotFoundError(OmbreError):
    """Raised when something addressed by id does not exist in the space."""

    code = "not_found"
    status = 404


class SpaceError(OmbreError):
    """Raised when a space name is malformed or names no known space."""

    code = "bad_space"


class AuthError(OmbreError):
    """Raised when a request carries no valid bearer token."""

    code = "unauthorized"
    status = 401


class ForbiddenError(AuthError):
    """Raised when a valid token is not allowed for the requested space."""

    code = "forbidden"
    status = 403


class ConflictError(OmbreError):
    """Raised when a write collides with existing state."""

    code = "conflict"
    status = 409


class SourceSuppressedError(ConflictError):
    """Raised when material from a purged source identity is written again."""

    code = "source_suppressed"


class ProvenanceError(ConflictError):
    """Raised when a lower-ranked origin tries to overwrite a higher-ranked one."""

    code = "provenance_refused"


class DuplicateError(ConflictError):
    """Raised when a write repeats a stored memory's text but gives other values for some of its fields.

    Storing it would either drop those values (the duplicate keeps the stored ones) or change a memory
    another source wrote; the error names the stored id and the fields, and nothing is written.
    """

    code = "duplicate_differs"

    def __init__(self, message: str, *, existing_id: str, fields: list[str]) -> None:
        super().__init__(message)
        self.existing_id = existing_id
        self.fields = list(fields)

    def to_dict(self) -> dict:
        out = super().to_dict()
        out["error"] |= {"existing_id": self.existing_id, "fields": self.fields}
        return out


class StaleTargetError(ConflictError):
    """Raised when an edit targets a revision that is no longer the current one."""

    code = "stale_target"


class DataDirInUseError(ConflictError):
    """Raised when another process holds the embedded data directory open for writing (its lock names it)."""

    code = "data_dir_in_use"


class EmbeddingError(OmbreError):
    """Raised when no embedder can load offline, or a space was embedded with another model."""

    code = "embedding"
    status = 409


class StoreError(OmbreError):
    """Raised when Chroma or the SQLite ledger fails underneath a request."""

    code = "store"
    status = 503


class UpstreamError(OmbreError):
    """Raised when the proxied upstream LLM cannot be reached."""

    code = "upstream"
    status = 502
