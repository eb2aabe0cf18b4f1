"""The embedded demo set: a small passage collection and hand-written counterfactual questions.

See README.md in this folder. It is a demo that lets every command run offline, not a benchmark.
"""

from importlib import resources
from pathlib import Path

PASSAGES = "passages.jsonl.gz"


def passages_path() -> Path:
    """Filesystem path of the demo passages (the package is installed as files, not zipped)."""
    return Path(str(resources.files(__name__) / PASSAGES))
