"""The REST API: predictions from a model bundle, and inside `procsift run` the live daemon and its dashboard."""

from procsift.service.api.app import create_app
from procsift.service.api.settings import Settings

__all__ = ["create_app", "Settings"]
