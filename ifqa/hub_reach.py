"""Whether the Hub can be reached, asked once before a hub id is loaded. Offline, the hub client retries
each file five times with back-off (26-77 s) and logs a WARNING line per try before the error; an endpoint
(or a proxy) that accepts a connection and never answers holds its requests without end. So ifqa asks
first, with one request bounded in time (``REACH_TIMEOUT``) sent the way the client sends its own
(``HF_ENDPOINT``, through the environment's proxy), and turns the client offline at once when no answer
comes: a model in the cache loads from it, and one that is not fails in one line naming the reason (the
endpoint, or the proxy that refused)."""

from __future__ import annotations

import functools
import logging
import os

from ifqa.redact import redact_url

log = logging.getLogger(__name__)
#: seconds the reachability request may take in each of its steps (connect, send, first answer)
REACH_TIMEOUT = 5.0


@functools.cache
def unreachable(timeout: float | None = None) -> str | None:
    """Why the Hub's endpoint (``HF_ENDPOINT``) gives no answer within ``timeout`` seconds (by default
    ``REACH_TIMEOUT``; directly, or through the environment's proxy), or None when it answers or the client
    is offline already."""
    import socket
    import urllib.error
    import urllib.parse
    import urllib.request

    if is_offline():
        return None
    timeout = timeout or REACH_TIMEOUT
    endpoint = (os.environ.get("HF_ENDPOINT") or "https://huggingface.co").rstrip("/")
    parts = urllib.parse.urlsplit(endpoint)
    host = parts.hostname or "huggingface.co"
    proxy = None if urllib.request.proxy_bypass(host) else urllib.request.getproxies().get(parts.scheme)
    through = f" through the proxy {redact_url(proxy)}" if proxy else ""
    request = urllib.request.Request(f"{endpoint}/api/models?limit=1", method="HEAD")
    try:
        with urllib.request.urlopen(request, timeout=timeout):  # noqa: S310 - the user's own endpoint
            return None
    except urllib.error.HTTPError:  # an answer (any status): the endpoint is there
        return None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        if isinstance(reason, (socket.timeout, TimeoutError)):
            return f"{host}: no answer in {timeout:g} s{through}"
        detail = getattr(reason, "strerror", None) or str(reason) or type(reason).__name__
        if proxy and isinstance(reason, (ConnectionRefusedError, socket.gaierror)):
            return f"the proxy {redact_url(proxy)} ({detail})"
        return f"{host}: {detail}{through}"


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
