"""The API's settings: one pydantic-settings class, read from PROCSIFT_* environment variables."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["Settings"]


class Settings(BaseSettings):
    """Where to listen, which model to serve, and the request limits."""

    model_config = SettingsConfigDict(env_prefix="PROCSIFT_", extra="ignore")

    host: str = "127.0.0.1"
    port: int = Field(8765, ge=1, le=65535)
    model: str | None = None               # bundle folder; None: the bundled default
    token_file: str | None = None          # None: $PROCSIFT_STATE_DIR/api-token (or /var/lib/procsift)
    state_dir: str = "/var/lib/procsift"
    max_body_bytes: int = Field(8 * 1024 * 1024, ge=1024)
    max_batch_rows: int = Field(10_000, ge=1)
    command_timeout_s: float = Field(30.0, gt=0)
    allowed_hosts: str = ""                # more names the API answers to, comma-separated (Host check)

    def extra_hosts(self) -> list[str]:
        """The names in allowed_hosts, besides the listening address and localhost."""
        return [h.strip() for h in self.allowed_hosts.split(",") if h.strip()]

    def token_path(self) -> str:
        """The bearer-token file this server reads (and creates on first start)."""
        return self.token_file or f"{self.state_dir.rstrip('/')}/api-token"
