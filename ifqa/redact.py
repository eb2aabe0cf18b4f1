"""Secrets out of every message: what the CLI prints and logs passes through ``redact`` once, so a
key in a URL (``http://user:KEY@host``, ``?api-key=KEY``), a server's error text that quotes it, or
a key given on the command line or in the environment never reaches a terminal or a log."""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

URL = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s'\"<>]*[^\s'\"<>:,.;)]")  # sentence punctuation stays outside
KEY_VALUE = re.compile(
    r"(?i)\b((?:api[-_]?key|access[-_]?token|token|secret|password|passwd|sig|signature|"
    r"authorization)\s*[=:]\s*)(?:Bearer\s+)?[^\s&'\",;):]+"
)
BEARER = re.compile(r"(?i)\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]{6,}")
TOKEN_SHAPED = re.compile(r"\b(sk|pk|rk|hf|ghp|gho|xox[abp])[-_][A-Za-z0-9_-]{8,}\b")
SECRET_ENV = ("OPENAI_API_KEY", "IFQA_API_KEY", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "ANTHROPIC_API_KEY")
URL_ENV = ("IFQA_BASE_URL", "IFQA_WIQA_URL", "IFQA_CAUSALQA_URL", "OPENAI_BASE_URL")
_secrets: set[str] = set()


def add_secret(value: str | None) -> None:
    """A value to blank wherever it appears (a key given with --api-key, say); short ones are ignored
    so that words are not blanked."""
    if value and len(value) >= 6:
        _secrets.add(value)


def add_url_secrets(url: str | None) -> None:
    """Register what a URL may carry as credentials (its user, password, query values and fragment),
    so that a server's message quoting one of them is blanked too, wherever it appears."""
    if not url or "://" not in url:
        return
    try:
        parts = urlsplit(url)
        username, password = parts.username, parts.password
    except ValueError:
        return
    for value in (username, password, parts.fragment, *(v for _, v in parse_qsl(parts.query, keep_blank_values=True))):
        add_secret(unquote(value) if value else None)


def redact_url(url: str | None) -> str | None:
    """The URL without secrets: user and password, every query value and the fragment become ``***``."""
    if not url:
        return url
    try:
        parts = urlsplit(url)
    except ValueError:
        return "***"
    netloc = parts.netloc
    if "@" in netloc:
        netloc = "***@" + netloc.rsplit("@", 1)[1]
    query = urlencode([(k, "***") for k, _ in parse_qsl(parts.query, keep_blank_values=True)], safe="*")
    return urlunsplit((parts.scheme, netloc, parts.path, query, "***" if parts.fragment else ""))


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with URLs' secrets, ``key=value`` secrets, bearer and API-key-shaped tokens, and every
    known secret value (the environment's keys, ``add_secret``'s, ``secrets``) replaced by ``***``."""
    values = set(_secrets) | {v for v in secrets if v and len(v) >= 6}
    values |= {os.environ[name] for name in SECRET_ENV if len(os.environ.get(name, "")) >= 6}
    # the shapes first (a known key inside a longer token would leave the token's tail), then known values
    text = URL.sub(lambda match: redact_url(match.group(0)) or "", text)
    text = KEY_VALUE.sub(lambda match: match.group(1) + "***", text)
    text = BEARER.sub(lambda match: match.group(1) + " ***", text)
    text = TOKEN_SHAPED.sub(lambda match: match.group(1) + "-***", text)
    for value in sorted(values, key=len, reverse=True):
        text = text.replace(value, "***")
    return text


class RedactingFilter(logging.Filter):
    """Applied to the CLI's log handler: every record's final message is redacted."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        clean = redact(message)
        if clean != message:
            record.msg, record.args = clean, ()
        return True
