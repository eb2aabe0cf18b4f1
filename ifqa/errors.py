"""One exception type for user mistakes, so the CLI can print one line instead of a traceback."""

from __future__ import annotations

from pathlib import Path


class IfqaError(Exception):
    """A problem with the user's input or set-up, described in one line.

    ``where`` names the file (and line or example) so the message points at the problem. The text
    is redacted here, once, so no caller (CLI, API, server) can show a secret it quotes.
    """

    def __init__(self, message: str, where: str | Path | None = None, line: int | None = None):
        location = ""
        if where is not None:
            location = f"{where}:{line}: " if line is not None else f"{where}: "
        from ifqa.redact import redact

        super().__init__(redact(location + message))


def first_line(text: str, limit: int = 200) -> str:
    """The first non-blank line of ``text`` (a library's multi-line exception message), cut to ``limit``."""
    return next((line.strip() for line in str(text).splitlines() if line.strip()), "")[:limit]
