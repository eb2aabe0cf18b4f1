"""Whether the Hub can be reached, asked once before a hub id is loaded. Offline, the hub client retries
each file five times with back-off (26-77 s) and logs a WARNING line per try before the error; asked
first (a DNS lookup and a TCP connect, a few seconds at most), ifqa turns the client offline at once, so
that a model in the cache loads from it and one that is not fails in one line naming the reason."""

from __future__ import annotations

import functools
import logging
import os

log = logging.getLogger(__name__)
_PROXIES = ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy", "HTTP_PROXY", "http_proxy")


@functools.cache
def unreachable(timeout: float = 3.0) -> str | None:
    """Why the Hub's endpoint (``HF_ENDPOINT``) cannot be reached, or None when it can, when the client
    is offline already, or behind a proxy (which only the client can try)."""
    import socket
    import urllib.parse

    if is_offline() or any(os.environ.get(name) for name in _PROXIES):
        return None
    endpoint = urllib.parse.urlsplit(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    host = endpoint.hostname or "huggingface.co"
    port = endpoint.port or (80 if endpoint.scheme == "http" else 443)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return None
    except OSError as exc:
        return f"{host}: {exc.strerror or type(exc).__name__}"


def is_offline() -> bool:
    """Whether the hub client is told to stay offline (``HF_HUB_OFFLINE``, ``TRANSFORMERS_OFFLINE``,
    ``HF_DATASETS_OFFLINE``), read when asked."""
    names = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE")
    return any(os.environ.get(name, "").upper() in ("1", "ON", "YES", "TRUE") for name in names)


def offline_if_unreachable() -> str | None:
    """Before a hub id is loaded: where the Hub cannot be reached, the client (and libraries reading its
    setting when they load) goes offline for this process; returns the reason, to name in an error."""
    reason = unreachable()
    if reason is not None and not is_offline():
        log.debug("the Hub cannot be reached (%s): loading from the local cache only", reason)
        os.environ["HF_HUB_OFFLINE"] = "1"
        import huggingface_hub.constants

        huggingface_hub.constants.HF_HUB_OFFLINE = True
    return reason
