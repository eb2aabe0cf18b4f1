"""Retrieval: one module per backend behind one interface (``search`` over a passage store).

``index`` holds what every index folder shares (manifest, passage store, opening by engine),
``bm25`` the bm25s engine, ``lucene`` the pyserini engine, ``dense`` bi-encoders with FAISS,
``fusion`` hybrid ranking, ``run`` the retrieve-and-write pipeline, ``convert`` TREC/DPR formats.
"""
