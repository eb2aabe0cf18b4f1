"""A toy engine: what a new index engine needs (``load`` from its folder, ``search``)."""

from pathlib import Path

from ifqa.retrieval.index import passage_store


class ToyRetriever:
    """Scores a passage by the words it shares with the query."""

    def __init__(self, manifest, passages, name):
        self.manifest, self.passages, self.name = manifest, passages, name

    @classmethod
    def load(cls, folder, manifest, corpus=None, device=None):
        return cls(manifest, passage_store(Path(folder), manifest, corpus), f"toy:{Path(folder).name}")

    def search(self, queries, k, threads=1):
        results = []
        for query in queries:
            words = set(query.lower().strip("?").split())
            scores = [
                (i, float(len(words & set(self.passages[i]["text"].lower().strip(".").split()))))
                for i in range(len(self.passages))
            ]
            results.append(sorted(scores, key=lambda s: -s[1])[:k])
        return results
