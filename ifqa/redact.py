"""Secrets out of every message: what the CLI prints and logs, the API's errors and the server's
error bodies pass through ``redact`` once, so a key in a URL (``http://user:KEY@host``,
``?api-key=KEY``), a server's error text that quotes it (whole, cut, or URL-encoded), or a key given
on the command line or in the environment never reaches a terminal, a log or a client."""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Iterable
from urllib.parse import parse_qsl, quote, quote_plus, unquote, urlencode, urlsplit, urlunsplit

URL = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s'\"<>]*[^\s'\"<>:,.;)]")  # sentence punctuation stays outside
KEY_NAMES = r"api[-_]?key|access[-_]?token|token|secret|password|passwd|sig|signature|authorization"
KEY_VALUE = re.compile(rf"(?i)\b((?:{KEY_NAMES})\s*[=:]\s*)(?:Bearer\s+)?[^\s&'\",;):]+")
BEARER = re.compile(r"(?i)\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=\ue000-]{6,}")
TOKEN_SHAPED = re.compile(r"\b(sk|pk|rk|hf|ghp|gho|xox[abp])[-_][A-Za-z0-9_\ue000-]{8,}")
#: An environment variable whose name says it holds a credential (OPENAI_API_KEY, HF_TOKEN, MY_SECRET,
#: DB_PASSWORD, ...): its value is a secret, whatever the variable is called.
SECRET_ENV_NAME = re.compile(r"(?i)(^|_)(API_?KEY|KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?)$")
URL_ENV = ("IFQA_BASE_URL", "IFQA_WIQA_URL", "IFQA_CAUSALQA_URL", "OPENAI_BASE_URL")
#: A quoted-back run this long of a known secret is redacted (a server that echoes the key cut short).
RUN = 8
#: Values that only may be secrets (a URL's query values): shorter ones are words and numbers.
MAYBE_SECRET_MIN = 6
MARKERS = ("***", "###", "~~~", "^^^")
SENTINEL = "\ue000"  # a private-use character: where a known secret was, until the shapes have run
_secrets: set[str] = set()


def add_secret(value: str | None) -> None:
    """A value to blank wherever it appears (a key given with --api-key, say), whatever its length."""
    if value:
        _secrets.add(value)


def add_url_secrets(url: str | None) -> None:
    """Register what a URL may carry as credentials: its password and the values of key-like query
    parameters are secrets of any length; its user, fragment and other query values when long
    enough to be one, so that a server's message quoting one of them is blanked too."""
    if not url or "://" not in url:
        return
    try:
        parts = urlsplit(url)
        username, password = parts.username, parts.password
    except ValueError:
        return
    add_secret(unquote(password) if password else None)
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if len(value) >= MAYBE_SECRET_MIN or re.fullmatch(rf"(?i){KEY_NAMES}|key|code|auth", name):
            add_secret(value)
    for value in (username, parts.fragment):
        if value and len(unquote(value)) >= MAYBE_SECRET_MIN:
            add_secret(unquote(value))


def redact_url(url: str | None, marker: str = "***") -> str | None:
    """The URL without secrets: user and password, every query value and the fragment become ``***``."""
    if not url:
        return url
    try:
        parts = urlsplit(url)
    except ValueError:
        return marker
    netloc = parts.netloc
    if "@" in netloc:
        netloc = marker + "@" + netloc.rsplit("@", 1)[1]
    query = urlencode([(k, marker) for k, _ in parse_qsl(parts.query, keep_blank_values=True)], safe=marker[0])
    return urlunsplit((parts.scheme, netloc, parts.path, query, marker if parts.fragment else ""))


def _spellings(secret: str) -> set[str]:
    """How a message may carry the secret: as given, URL-encoded, or escaped inside a JSON string."""
    return {secret, quote(secret, safe=""), quote_plus(secret), json.dumps(secret)[1:-1]}


def _covered(text: str, secrets: set[str], from_endpoint: bool) -> list[bool]:
    """Which characters of ``text`` belong to a secret: every run of ``RUN`` or more characters of a
    long one (the whole secret is the longest such run), every occurrence of a shorter one (one
    shorter than ``MAYBE_SECRET_MIN`` only in an endpoint's message, where it is a quoted key rather
    than a word of ours)."""
    covered = [False] * len(text)
    for secret in secrets:
        if len(secret) < MAYBE_SECRET_MIN and not from_endpoint:
            continue
        for spelling in _spellings(secret):
            width = min(len(spelling), RUN)
            for piece in {spelling[i : i + width] for i in range(len(spelling) - width + 1)}:
                start = text.find(piece)
                while start >= 0:
                    covered[start : start + width] = [True] * width
                    start = text.find(piece, start + 1)
    return covered


def _marker(secrets: set[str]) -> str:
    """``***``, or another marker where a short secret holds ``*`` (the marker must not spell one)."""
    used = {char for secret in secrets if len(secret) < RUN for char in secret}
    return next((m for m in MARKERS if m[0] not in used), MARKERS[0])


def redact(text: str, secrets: Iterable[str] = (), *, from_endpoint: bool = False) -> str:
    """``text`` with every known secret (the environment's credentials, ``add_secret``'s,
    ``secrets``), as given, URL-encoded or JSON-escaped, whole or any run of 8 or more of its
    characters, and URLs' secrets, ``key=value`` secrets, bearer and API-key-shaped tokens replaced
    by a marker. ``from_endpoint``: the text is a server's (it may quote a short key back)."""
    values = set(_secrets) | {v for v in secrets if v}  # and the environment's credentials:
    values |= {v for name, v in os.environ.items() if v and SECRET_ENV_NAME.search(name)}
    marker = _marker(values)
    # known values first, while a cut or encoded key is whole, as a placeholder the shapes below
    # read as part of a token (a key inside ``sk-...`` takes the token's tail with it)
    text = _hide(text, values, from_endpoint)
    text = URL.sub(lambda match: redact_url(match.group(0), marker) or "", text)
    text = KEY_VALUE.sub(lambda match: match.group(1) + marker, text)
    text = BEARER.sub(lambda match: match.group(1) + " " + marker, text)
    text = TOKEN_SHAPED.sub(lambda match: match.group(1) + "-" + marker, text)
    # and again: a URL rebuilt above may spell a short secret (``=``, ``&``) or the placeholder encoded
    text = _hide(text.replace(quote(SENTINEL), SENTINEL), values, from_endpoint)
    return re.sub(f"{SENTINEL}+", lambda _: marker, text)


def _hide(text: str, secrets: set[str], from_endpoint: bool) -> str:
    """``text`` with each character of a secret replaced by ``SENTINEL``."""
    covered = _covered(text, secrets, from_endpoint)
    return "".join(SENTINEL if hidden else char for char, hidden in zip(text, covered)) if any(covered) else text


class RedactingFilter(logging.Filter):
    """Applied to the CLI's log handler: every record's final message is redacted."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        clean = redact(message)
        if clean != message:
            record.msg, record.args = clean, ()
        return True
