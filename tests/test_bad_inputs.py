"""Bad input, table-driven: each case is a family of user mistakes. Every one must end with a
non-zero exit, exactly one line on stderr naming the file or option, no traceback, and no output
file left behind."""

import gzip
import json
import os
import shutil
from pathlib import Path

import pytest

from tests.conftest import run_cli

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def work(tmp_path_factory, tiny_model):
    """A folder with small good and bad inputs, and a cache with the demo index built once."""
    base = tmp_path_factory.mktemp("bad")
    env = {**os.environ, "IFQA_CACHE_DIR": str(base / "cache"), "OPENAI_API_KEY": "k"}
    good = [{"id": f"p{i}", "title": "T", "text": f"passage number {i} about rivers"} for i in range(5)]
    (base / "passages.jsonl").write_text("".join(json.dumps(p) + "\n" for p in good))
    (base / "other.jsonl").write_text("".join(json.dumps({**p, "text": p["text"] + " and lakes"}) + "\n" for p in good))
    (base / "same-size.jsonl").write_text(
        (base / "passages.jsonl").read_text().replace("3 about rivers", "3 about rovers")
    )
    (base / "dup.jsonl").write_text("".join(json.dumps(p) + "\n" for p in good + good[:1]))
    (base / "empty-text.jsonl").write_text(json.dumps({"id": "a", "title": "T", "text": ""}) + "\n")
    (base / "bad.jsonl").write_text('{"qid": "1", "prediction": "x"}\n{not json\n')
    (base / "not-gzip.json.gz").write_text("[]")
    with gzip.open(base / "truncated.jsonl.gz", "wb") as handle:
        handle.write(b'{"qid": "1", "prediction": "x"}\n' * 2000)
    (base / "truncated.jsonl.gz").write_bytes((base / "truncated.jsonl.gz").read_bytes()[:60])
    (base / "string-answers.json").write_text(json.dumps([{"idx": 1, "question": "If?", "answers": "Paris"}]))
    (base / "questions.json").write_text(
        json.dumps([{"idx": 1, "question": "If rivers ran uphill, what then?", "answers": ["x"]}])
    )
    (base / "wrong-shape.yaml").write_text("name: x\nquestions: [1, 2]\n")
    (base / "wrong-readers.yaml").write_text("name: x\nquestions: {setting: demo}\nreaders: closed\n")
    (base / "wrong-k.yaml").write_text("name: x\nquestions: {setting: demo}\nk: twenty\n")
    (base / "wrong-stage.yaml").write_text(
        "name: x\nquestions: {setting: demo}\nstages:\n  - {stage: retrieve, name: r}\n"
    )
    assert (
        run_cli(
            "index", "bm25", "--corpus", base / "passages.jsonl", "-o", base / "idx", "--no-progress", env=env
        ).returncode
        == 0
    )
    assert (
        run_cli(
            "index", "bm25", "--corpus", base / "passages.jsonl", "-o", base / "broken", "--no-progress", env=env
        ).returncode
        == 0
    )
    (base / "broken" / "offsets.npy").unlink()
    run = base / "demo-run.jsonl"
    assert run_cli("retrieve", "--k", "3", "-o", run, "--no-progress", env=env).returncode == 0
    train_run = base / "demo-train-run.jsonl"  # what a reader trains on (a dev run is refused before its model)
    assert (
        run_cli("retrieve", "--split", "train", "--k", "3", "-o", train_run, "--no-progress", env=env).returncode == 0
    )
    records = [json.loads(line) for line in run.read_text().splitlines()]
    records[0]["ctxs"][1]["text"] = ""
    (base / "notext-run.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (base / "notext-run.jsonl.manifest.json").write_text((base / "demo-run.jsonl.manifest.json").read_text())
    (base / "foreign-run.jsonl").write_text("".join(json.dumps({**r, "qid": "x" + r["qid"]}) + "\n" for r in records))
    (base / "nogold.json").write_text(
        json.dumps([{"idx": 1, "question": "If a, what b?", "answers": ["c"], "context": []}])
    )
    (base / "empty-model").mkdir()
    (base / "bare-encoder").mkdir()
    (base / "bare-encoder" / "config.json").write_text(
        json.dumps({"architectures": ["BertModel"], "model_type": "bert"})
    )
    yaml_cases = {
        "unknown-stage": "stages:\n  - {stage: dance, name: d}\n",
        "unknown-key": "stages:\n  - {stage: retrieve, name: r, indexes: [demo:bm25], colour: red}\n",
        "compare-later": "stages:\n  - {stage: retrieve, name: r, indexes: [demo:bm25], compare_to: nope}\n",
        "same-name": "stages:\n  - {stage: retrieve, name: r, indexes: [demo:bm25]}\n  - {stage: retrieve, name: r, indexes: [demo:bm25]}\n",
        "bad-preset": "stages:\n  - {stage: collection, name: c, preset: tiny-wiki, wiki_dir: .}\n",
        "train-no-index": "stages:\n  - {stage: train, name: t, kind: reranker, index: nope}\n",
        "bad-engine": "stages:\n  - {stage: collection, name: c, inputs: [passages.jsonl]}\n  - {stage: index, name: i, collection: c, engine: magic}\n",
    }
    for name, stages in yaml_cases.items():
        (base / f"{name}.yaml").write_text("name: x\nquestions: {setting: demo}\n" + stages)
    damaged_indexes(base)
    more_inputs(base)
    third_round(base, env, tiny_model)
    return base, env


def as_older(folder: Path) -> Path:
    """A BM25 index as built before the sorted vocabulary: bm25s's JSON is what its searches read."""
    from ifqa.retrieval.vocabulary import IDS, OFFSETS, TERMS

    for name in (TERMS, OFFSETS, IDS):
        (folder / name).unlink()
    return folder


def damaged_indexes(base: Path) -> None:
    """Copies of a good BM25 index, each damaged in one way a crash, a disk or a hand edit can."""
    import shutil

    import numpy as np

    good = base / "idx"
    manifest = json.loads((good / "manifest.json").read_text())

    def copy(name: str) -> Path:
        shutil.copytree(good, base / name)
        return base / name

    for array in ("offsets.npy", "data.csc.index.npy", "indptr.csc.index.npy"):
        folder = copy(f"trunc-{array.split('.')[0]}")
        (folder / array).write_bytes((folder / array).read_bytes()[:90])
    (as_older(copy("trunc-vocab")) / "vocab.index.json").write_text('{"rivers": 0, "pass')
    terms = copy("trunc-terms") / "vocab.terms.bin"
    terms.write_bytes(terms.read_bytes()[:-3])
    np.save(copy("short-ids") / "vocab.ids.npy", np.arange(2, dtype=np.int32))
    (copy("manifest-list") / "manifest.json").write_text("[1, 2]")
    (copy("manifest-null-corpus") / "manifest.json").write_text(json.dumps({**manifest, "corpus": None}))
    (copy("manifest-string-params") / "manifest.json").write_text(json.dumps({**manifest, "params": "k1=0.9"}))
    (copy("manifest-zero") / "manifest.json").write_text(json.dumps({**manifest, "passages": 0}))
    (copy("manifest-more") / "manifest.json").write_text(json.dumps({**manifest, "passages": 7}))
    (copy("manifest-no-engine") / "manifest.json").write_text(
        json.dumps({k: v for k, v in manifest.items() if k != "engine"})
    )


def more_inputs(base: Path) -> None:
    (base / "no-passages.jsonl").write_text("\n\n")
    (base / "object-ids.jsonl").write_text(json.dumps({"id": {"a": 1}, "title": "T", "text": "words"}) + "\n")
    (base / "list-title.jsonl").write_text(json.dumps({"id": "a", "title": ["T"], "text": "words"}) + "\n")
    (base / "no-questions.json").write_text("[]")
    (base / "no-questions.jsonl").write_text("\n")
    (base / "cache-folder").mkdir()
    (base / "not-sqlite.db").write_text("this is not a database" * 100)
    (base / "escape.yaml").write_text(
        "name: x\nquestions: {setting: demo}\nstages:\n  - {stage: retrieve, name: ../../outside, indexes: [demo:bm25]}\n"
    )
    (base / "slash.yaml").write_text(
        "name: x\nquestions: {setting: demo}\nstages:\n  - {stage: retrieve, name: a/b, indexes: [demo:bm25]}\n"
    )
    bomb = "name: x\nquestions: {setting: demo}\na: &a [x, x, x, x, x, x, x, x, x, x]\n"
    for level in "bcdefg":
        previous = chr(ord(level) - 1)
        bomb += f"{level}: &{level} [*{previous}, *{previous}, *{previous}, *{previous}, *{previous}, *{previous}, *{previous}, *{previous}, *{previous}, *{previous}]\n"
    (base / "bomb.yaml").write_text(bomb)
    (base / "huge.yaml").write_text("name: x\nquestions: {setting: demo}\n# " + "x" * (1 << 20) + "\n")


def third_round(base: Path, env: dict, tiny_model: Path) -> None:
    """Inputs of the third trust round: wrong formats, damaged dense indexes, bad run files, configs."""
    import numpy as np

    (base / "tab-title.tsv").write_text("id\ttext\ttitle\n1\tsome passage text\tA\tB\n")
    (base / "predictions-not-passages.jsonl").write_text('{"qid": "1", "prediction": "x"}\n' * 3)
    (base / "redirects.xml").write_text(
        "<mediawiki><siteinfo><sitename>W</sitename></siteinfo><page><title>A</title><ns>0</ns><id>1</id>"
        '<redirect title="B"/><revision><text>#REDIRECT [[B]]</text></revision></page></mediawiki>\n'
    )
    (base / "surrogate-passages.jsonl").write_text('{"id": "a", "title": "T\\udc00", "text": "words here"}\n')
    (base / "surrogate-questions.json").write_text(
        '[{"idx": 1, "question": "If rivers \\ud800 ran uphill?", "answers": ["x"]}]'
    )
    good = base / "idx"
    for name, damage in {
        "vocab-list": lambda f: (as_older(f) / "vocab.index.json").write_text("[1, 2]"),
        "deep-manifest": lambda f: (f / "manifest.json").write_text("[" * 100000 + "]" * 100000),
        "float-offsets": lambda f: np.save(f / "offsets.npy", np.zeros(5)),
    }.items():
        shutil.copytree(good, base / name)
        damage(base / name)
    assert (
        run_cli(
            "index",
            "dense",
            "--corpus",
            base / "passages.jsonl",
            "-o",
            base / "dense",
            "--no-progress",
            "--device",
            "cpu",
            env=env,
        ).returncode
        == 0
    )
    import faiss

    shutil.copytree(base / "dense", base / "dense-other-dims")
    faiss.write_index(faiss.IndexFlatIP(8), str(base / "dense-other-dims" / "index.faiss"))
    shutil.copytree(base / "dense", base / "dense-bad-length")
    manifest = json.loads((base / "dense" / "manifest.json").read_text())
    manifest["params"]["max_length"] = -1
    (base / "dense-bad-length" / "manifest.json").write_text(json.dumps(manifest))
    records = [json.loads(line) for line in (base / "demo-run.jsonl").read_text().splitlines()]
    for name, change in {
        "object-qid": lambda r: r.update(qid={"a": 1}),
        "nan-score": lambda r: r["ctxs"][0].update(score=float("nan")),
        "word-score": lambda r: r["ctxs"][0].update(score="high"),
        "spaced-id": lambda r: r["ctxs"][1].update(id="p 7"),
    }.items():
        changed = [json.loads(json.dumps(r)) for r in records]
        change(changed[0])
        (base / f"{name}-run.jsonl").write_text("".join(json.dumps(r) + "\n" for r in changed))
    (base / "empty-run.jsonl").write_text("")
    (base / "foreign-good-run.jsonl").write_text(
        "".join(json.dumps({**r, "qid": "x" + r["qid"]}) + "\n" for r in records)
    )
    (base / "empty-predictions.jsonl").write_text("\n")
    (base / "foreign-predictions.jsonl").write_text('{"qid": "zz1", "prediction": "x"}\n')
    (base / "list-manifest-run.jsonl").write_text((base / "demo-run.jsonl").read_text())
    (base / "list-manifest-run.jsonl.manifest.json").write_text("[1, 2]")
    (base / "other-schema.db").write_bytes(b"")
    import sqlite3

    with sqlite3.connect(base / "other-schema.db") as db:
        db.execute("CREATE TABLE responses (a INTEGER)")
    (base / "pickled").mkdir()
    (base / "pickled" / "config.json").write_text(json.dumps({"architectures": ["BertModel"], "model_type": "bert"}))
    import pickle

    class Payload:
        def __reduce__(self):
            return (os.system, (f"touch {base / 'PICKLE-RAN'}",))

    (base / "pickled" / "pytorch_model.bin").write_bytes(pickle.dumps(Payload()))
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    AutoModelForSequenceClassification.from_pretrained(str(tiny_model), num_labels=1).save_pretrained(base / "tiny")
    AutoTokenizer.from_pretrained(str(tiny_model)).save_pretrained(base / "tiny")  # a tiny reranker
    configs = {
        "escaping-name": "name: ../../escaped\nquestions: {setting: demo}\n",
        "word-k": "stages:\n  - {stage: retrieve, name: r, indexes: [demo:bm25], k: five}\n",
        "bool-k": "k: true\nstages:\n  - {stage: retrieve, name: r, indexes: [demo:bm25]}\n",
        "string-k": "k: '5'\nstages:\n  - {stage: retrieve, name: r, indexes: [demo:bm25]}\n",
        "nan-weights": "stages:\n  - {stage: retrieve, name: r, indexes: [demo:bm25, demo:bm25], weights: [.nan, 1]}\n",
        "wrong-kind-index": "stages:\n  - {stage: retrieve, name: r, indexes: [demo:bm25]}\n  - {stage: index, name: i, collection: r}\n",
        "wrong-kind-train": "stages:\n  - {stage: collection, name: c, inputs: [passages.jsonl]}\n  - {stage: train, name: t, kind: reranker, index: c}\n",
        "wrong-kind-reader": "stages:\n  - {stage: evaluate, name: e, run: demo-run.jsonl}\n  - {stage: read, name: rd, reader: majority, retriever: e}\n",
        "own-retriever": "stages:\n  - {stage: read, name: rd, reader: majority, retriever: rd}\n",
        "index-number": "stages:\n  - {stage: retrieve, name: r, indexes: [5]}\n",
        "bad-fusion": "stages:\n  - {stage: retrieve, name: r, indexes: [demo:bm25]}\n  - {stage: retrieve, name: s, indexes: [demo:bm25, demo:bm25], fusion: magic}\n",
        "nan-lr": "stages:\n  - {stage: collection, name: c, inputs: [passages.jsonl]}\n  - {stage: index, name: i, collection: c}\n"
        "  - {stage: train, name: t, kind: reranker, index: i, recipe: {lr: .nan}}\n",
        "inputs-string": "stages:\n  - {stage: collection, name: c, inputs: passages.jsonl}\n",
        "negative-length": "stages:\n  - {stage: collection, name: c, inputs: [passages.jsonl]}\n  - {stage: index, name: i, collection: c, engine: dense, max_length: -3}\n",
        "unknown-setting": "train: {setting: nonsense}\n",
        "list-switch": "stages:\n  - {stage: retrieve, name: r, indexes: [demo:bm25], enabled: [1]}\n",
    }
    for name, body in configs.items():
        text = body if body.startswith("name:") else "name: x\nquestions: {setting: demo}\n" + body
        (base / f"{name}.yaml").write_text(text)
    (base / "deep.yaml").write_text("name: x\nquestions: {setting: demo}\nz: " + "[" * 50000 + "]" * 50000 + "\n")
    (base / "latin1.yaml").write_bytes(b"name: caf\xe9\nquestions: {setting: demo}\n")


B = "{base}"
TRAIN = ["--index", "demo:bm25", "--setting", "demo", "--no-progress"]
CASES = [
    # (name, arguments, expected text in the one stderr line, output that must not exist)
    ("negative k", ["retrieve", "--k", "-3", "-o", f"{B}/o1.jsonl"], "--k", "o1.jsonl"),
    ("zero batch", ["retrieve", "--batch-size", "0", "-o", f"{B}/o2.jsonl"], "--batch-size", "o2.jsonl"),
    (
        "zero samples",
        ["read", "llm", "--model", "m", "--samples", "0", "-o", f"{B}/o3.jsonl"],
        "--samples must be at least 1",
        "o3.jsonl",
    ),
    (
        "thinking budget above the token limit",
        ["read", "llm", "--model", "m", "--thinking-budget", "900", "--max-tokens", "500", "-o", f"{B}/o3b.jsonl"],
        "--thinking-budget 900 leaves no tokens for the answer within --max-tokens 500",
        "o3b.jsonl",
    ),
    (
        "thinking budget for a model told not to think",
        ["read", "llm", "--model", "m", "--thinking-budget", "9", "--thinking", "off", "-o", f"{B}/o3c.jsonl"],
        "--thinking-budget is for a model that thinks",
        "o3c.jsonl",
    ),
    (
        "negative demos",
        ["read", "llm", "--model", "m", "--demos", "-1", "-o", f"{B}/o4.jsonl"],
        "--demos must be at least 0",
        "o4.jsonl",
    ),
    (
        "zero chunk",
        ["index", "dense", "--corpus", f"{B}/passages.jsonl", "-o", f"{B}/d0", "--chunk-size", "0"],
        "--chunk-size",
        "d0",
    ),
    (
        "zero workers",
        ["corpus", "build", f"{B}/passages.jsonl", "-o", f"{B}/o5.jsonl", "--workers", "0"],
        "--workers",
        "o5.jsonl",
    ),
    ("zero steps", ["train", "--run", f"{B}/demo-run.jsonl", "-o", f"{B}/t0", "--steps", "0"], "--steps", "t0"),
    (
        "k1 out of range",
        ["index", "bm25", "--corpus", f"{B}/passages.jsonl", "-o", f"{B}/i1", "--k1", "-1"],
        "--k1",
        "i1",
    ),
    (
        "b out of range",
        ["index", "bm25", "--corpus", f"{B}/passages.jsonl", "-o", f"{B}/i2", "--b", "2"],
        "--b must be at most 1, got 2.0",
        "i2",
    ),
    (
        "missing corpus",
        ["index", "bm25", "--corpus", f"{B}/nope.jsonl", "-o", f"{B}/i3"],
        "nope.jsonl: No such file",
        "i3",
    ),
    ("missing build input", ["corpus", "build", f"{B}/nope.xml", "-o", f"{B}/o6.jsonl"], "nope.xml", "o6.jsonl"),
    (
        "duplicate passage ids",
        ["index", "bm25", "--corpus", f"{B}/dup.jsonl", "-o", f"{B}/i4", "--no-progress"],
        "occurs more than once",
        "i4",
    ),
    (
        "passage without text",
        ["index", "bm25", "--corpus", f"{B}/empty-text.jsonl", "-o", f"{B}/i5", "--no-progress"],
        "'text' is empty",
        "i5",
    ),
    (
        "existing index folder of other settings",
        ["index", "bm25", "--corpus", f"{B}/passages.jsonl", "-o", f"{B}/idx", "--k1", "2.0"],
        "already exists, built from other inputs or settings",
        None,
    ),
    (
        "another collection",
        ["retrieve", "--index", f"{B}/idx", "--corpus", f"{B}/other.jsonl", "-o", f"{B}/o7.jsonl"],
        "not the collection this index was built from",
        "o7.jsonl",
    ),
    (
        "same size, other text",
        [
            "retrieve",
            "--index",
            f"{B}/idx",
            "--corpus",
            f"{B}/same-size.jsonl",
            "--verify-corpus",
            "-o",
            f"{B}/o20.jsonl",
        ],
        "fingerprints",  # a collection of 5 passages is fingerprinted whole: caught before the full sha256
        "o20.jsonl",
    ),
    (
        "damaged index",
        ["retrieve", "--index", f"{B}/broken", "-o", f"{B}/o8.jsonl"],
        "offsets.npy is missing",
        "o8.jsonl",
    ),
    (
        "not an index",
        ["retrieve", "--index", f"{B}/cache-folder", "-o", f"{B}/o9.jsonl"],
        "not an ifqa index",
        "o9.jsonl",
    ),
    ("unwritable output", ["retrieve", "-o", "/proc/ifqa-cannot-write/run.jsonl"], "/proc/ifqa-cannot-write", None),
    ("output is a folder", ["retrieve", "-o", f"{B}/idx"], "idx", None),
    ("invalid JSON", ["evaluate", "--predictions", f"{B}/bad.jsonl"], "bad.jsonl:2: invalid JSON", None),
    (
        "not gzip",
        ["evaluate", "--questions", f"{B}/not-gzip.json.gz", "--predictions", f"{B}/bad.jsonl"],
        "not-gzip.json.gz: named .gz but is not gzip-compressed",
        None,
    ),
    (
        "truncated gzip",
        ["evaluate", "--predictions", f"{B}/truncated.jsonl.gz"],
        "truncated.jsonl.gz: compressed data ends early",
        None,
    ),
    (
        "answers as a string",
        ["data", "stats", "--questions", f"{B}/string-answers.json"],
        "'answers' must be a non-empty list",
        None,
    ),
    (
        "run for other questions",
        ["evaluate", "--run", f"{B}/demo-run.jsonl", "--questions", f"{B}/questions.json"],
        "made for the question set 'demo:dev'",
        None,
    ),
    (
        "convert for other questions",
        [
            "convert",
            "--run",
            f"{B}/demo-run.jsonl",
            "--to",
            "trec",
            "--setting",
            "demo",
            "--split",
            "train",
            "-o",
            f"{B}/o10.trec",
        ],
        "made for the question set 'demo:dev'",
        "o10.trec",
    ),
    (
        "read with another run",
        [
            "read",
            "llm",
            "--model",
            "m",
            "--mode",
            "open",
            "--run",
            f"{B}/demo-run.jsonl",
            "--setting",
            "demo",
            "--split",
            "train",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "-o",
            f"{B}/o11.jsonl",
        ],
        "made for the question set 'demo:dev'",
        "o11.jsonl",
    ),
    (
        "unnamed demonstration pool",
        [
            "read",
            "llm",
            "--model",
            "m",
            "--questions",
            f"{B}/questions.json",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "-o",
            f"{B}/o12.jsonl",
        ],
        "name the demonstration pool",
        "o12.jsonl",
    ),
    (
        "refused endpoint",
        [
            "read",
            "llm",
            "--model",
            "m",
            "--demos",
            "0",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--no-cache",
            "--no-progress",
            "-o",
            f"{B}/o13.jsonl",
        ],
        "cannot connect",
        "o13.jsonl",
    ),
    (
        "no CUDA",
        ["read", "llm", "--backend", "hf", "--model", f"{B}/nomodel", "--device", "cuda", "-o", f"{B}/o14.jsonl"],
        "no CUDA device",
        "o14.jsonl",
    ),
    (
        "YAML questions not a mapping",
        ["experiment", "run", f"{B}/wrong-shape.yaml"],
        "'questions' must be a mapping",
        None,
    ),
    ("YAML readers not a list", ["experiment", "run", f"{B}/wrong-readers.yaml"], "'readers' must be a list", None),
    ("YAML k not a number", ["experiment", "run", f"{B}/wrong-k.yaml"], "'k' must be an integer", None),
    ("YAML stage without indexes", ["experiment", "run", f"{B}/wrong-stage.yaml"], "needs 'indexes'", None),
    (
        "unknown query mode",
        ["retrieve", "--query-mode", "psychic", "-o", f"{B}/o15.jsonl"],
        "--query-mode",
        "o15.jsonl",
    ),
    (
        "bad weights",
        ["retrieve", "--index", "demo:bm25", "--weights", "1,x", "-o", f"{B}/o16.jsonl"],
        "--weights",
        "o16.jsonl",
    ),
    (
        "unknown demo index",
        ["retrieve", "--index", "demo:sparse", "-o", f"{B}/o17.jsonl"],
        "unknown demo index",
        "o17.jsonl",
    ),
    ("zero k", ["retrieve", "--k", "0", "-o", f"{B}/o18.jsonl"], "--k", "o18.jsonl"),
    (
        "zero words",
        ["corpus", "build", f"{B}/passages.jsonl", "-o", f"{B}/o19.jsonl", "--words", "0"],
        "--words",
        "o19.jsonl",
    ),
    # counterfactual retrieval: reranking, query modes, training
    (
        "rerank depth 0",
        [
            "rerank",
            "--run",
            f"{B}/demo-run.jsonl",
            "--model",
            f"{B}/empty-model",
            "--depth",
            "0",
            "-o",
            f"{B}/r1.jsonl",
        ],
        "--depth",
        "r1.jsonl",
    ),
    (
        "rerank with a folder that is not a model",
        ["rerank", "--run", f"{B}/demo-run.jsonl", "--model", f"{B}/empty-model", "-o", f"{B}/r2.jsonl"],
        "not a model folder",
        "r2.jsonl",
    ),
    (
        "rerank a run without passage text",
        ["rerank", "--run", f"{B}/notext-run.jsonl", "--model", f"{B}/empty-model", "-o", f"{B}/r3.jsonl"],
        "notext-run.jsonl:1: passage",
        "r3.jsonl",
    ),
    (
        "rerank onto its input",
        ["rerank", "--run", f"{B}/demo-run.jsonl", "--model", f"{B}/empty-model", "-o", f"{B}/demo-run.jsonl"],
        "--output is the input --run",
        None,
    ),
    (
        "rerank a missing run",
        ["rerank", "--run", f"{B}/nope-run.jsonl", "--model", f"{B}/empty-model", "-o", f"{B}/r4.jsonl"],
        "nope-run.jsonl",
        "r4.jsonl",
    ),
    (
        "rerank with an encoder that has no scoring head",
        ["rerank", "--run", f"{B}/demo-run.jsonl", "--model", f"{B}/bare-encoder", "-o", f"{B}/r8.jsonl"],
        "without a trained scoring head",
        "r8.jsonl",
    ),
    (
        "retrieve with rerank depth 0",
        ["retrieve", "--rerank", f"{B}/empty-model", "--rerank-depth", "0", "-o", f"{B}/r5.jsonl"],
        "--rerank-depth",
        "r5.jsonl",
    ),
    (
        "retrieve with a reranker that is not a model",
        ["retrieve", "--rerank", f"{B}/empty-model", "-o", f"{B}/r6.jsonl"],
        "not a model folder",
        "r6.jsonl",
    ),
    (
        "LLM query mode without a model",
        ["retrieve", "--query-mode", "hyde", "-o", f"{B}/r7.jsonl"],
        "needs a model: --rewrite-model",
        "r7.jsonl",
    ),
    (  # the rewriting model's refusals name its own flags (--rewrite-...), never the reader's
        "a rewriting option its backend does not read",
        ["retrieve", "--query-mode", "rewrite", "--rewrite-model", "demo:smollm2", "--rewrite-dtype", "float32"]
        + ["-o", f"{B}/r8.jsonl"],
        "--rewrite-dtype float32: the llamacpp backend does not read it (it reads --rewrite-completions",
        "r8.jsonl",
    ),
    (
        "a rewriting thinking budget with its thinking off",
        ["retrieve", "--query-mode", "rewrite", "--rewrite-model", "demo:smollm2", "--rewrite-thinking", "off"]
        + ["--rewrite-thinking-budget", "5", "-o", f"{B}/r9.jsonl"],
        "--rewrite-thinking-budget is for a model that thinks; drop it or pass --rewrite-thinking on",
        "r9.jsonl",
    ),
    (
        "train on dev",
        ["train", "--reranker", *TRAIN, "--split", "dev", "-o", f"{B}/m1"],
        "refusing to train on the dev split",
        "m1",
    ),
    (
        "train on test",
        ["train", "--control", "--index", "demo:bm25", "--setting", "supervised", "--split", "test", "-o", f"{B}/m2"],
        "refusing to train on the test split",
        "m2",
    ),
    (
        "train without gold passages",
        ["train", "--reranker", "--index", "demo:bm25", "--questions", f"{B}/nogold.json", "-o", f"{B}/m3"],
        "have no gold passage",
        "m3/model",
    ),
    (
        "train without an index",
        ["train", "--reranker", "--setting", "demo", "-o", f"{B}/m4"],
        "--index is needed",
        "m4/model",
    ),
    (
        "train with a missing index",
        ["train", "--control", "--index", f"{B}/nope-index", "--setting", "demo", "-o", f"{B}/m5"],
        "nope-index",
        "m5/model",
    ),
    (
        "train from a folder that is not a model",
        ["train", "--reranker", *TRAIN, "--model", f"{B}/empty-model", "-o", f"{B}/m6"],
        "not a model folder",
        "m6/model",
    ),
    ("group of one", ["train", "--reranker", *TRAIN, "--group-size", "1", "-o", f"{B}/m7"], "--group-size", "m7"),
    ("learning rate not a number", ["train", "--reranker", *TRAIN, "--lr", "fast", "-o", f"{B}/m8"], "--lr", "m8"),
    (
        "negative learning rate",
        ["train", "--reranker", *TRAIN, "--lr", "-1e-4", "-o", f"{B}/m10"],
        "--lr must be at least 0.0",
        "m10",
    ),
    (
        "attention dropout of 1",
        ["train", "--reranker", *TRAIN, "--attention-dropout", "1", "-o", f"{B}/m13"],
        "--attention-dropout must be at most 0.9",
        "m13",
    ),
    (
        "unknown source of other gold passages",
        ["train", "--reranker", *TRAIN, "--other-gold-from", "nearest", "-o", f"{B}/m14"],
        "--other-gold-from",
        "m14",
    ),
    (
        "zero temperature",
        ["train", "--retriever", *TRAIN, "--temperature", "0", "-o", f"{B}/m11"],
        "--temperature",
        "m11",
    ),
    (
        "FiD gradient norm below zero",
        ["train", "fid", "--run", f"{B}/demo-train-run.jsonl", "--max-grad-norm", "-1", "-o", f"{B}/m12"],
        "--max-grad-norm",
        "m12",
    ),
    (
        "one question per step",
        ["train", "--retriever", *TRAIN, "--questions-per-step", "1", "-o", f"{B}/m9"],
        "--questions-per-step",
        "m9",
    ),
    (
        "compare with a missing run",
        ["evaluate", "--run", f"{B}/demo-run.jsonl", "--compare", f"{B}/nope.jsonl"],
        "nope.jsonl",
        None,
    ),
    (
        "compare runs of other questions",
        ["evaluate", "--run", f"{B}/demo-run.jsonl", "--compare", f"{B}/foreign-run.jsonl"],
        "share no question",
        None,
    ),
    ("YAML unknown stage type", ["experiment", "run", f"{B}/unknown-stage.yaml"], "unknown type 'dance'", None),
    ("YAML unknown stage key", ["experiment", "run", f"{B}/unknown-key.yaml"], "unknown key(s) colour", None),
    (
        "YAML compare_to a later stage",
        ["experiment", "run", f"{B}/compare-later.yaml"],
        "'compare_to' must name an earlier retrieve stage, got 'nope'",
        None,
    ),
    ("YAML two stages with one name", ["experiment", "run", f"{B}/same-name.yaml"], "two stages are named 'r'", None),
    (
        "YAML unknown collection preset",
        ["experiment", "run", f"{B}/bad-preset.yaml"],
        "unknown preset 'tiny-wiki'",
        None,
    ),
    (
        "YAML train stage without its index",
        ["experiment", "run", f"{B}/train-no-index.yaml"],
        "'index' must name an earlier index stage",
        None,
    ),
    (
        "YAML unknown index engine",
        ["experiment", "run", f"{B}/bad-engine.yaml"],
        "engine must be one of bm25, dense",
        None,
    ),
    # family: damaged index folders (every file an index opens is checked; one line naming it)
    (
        "truncated offsets",
        ["retrieve", "--index", f"{B}/trunc-offsets", "-o", f"{B}/x1.jsonl"],
        "trunc-offsets",
        "x1.jsonl",
    ),
    (
        "truncated BM25 scores",
        ["retrieve", "--index", f"{B}/trunc-data", "-o", f"{B}/x2.jsonl"],
        "trunc-data: damaged index",
        "x2.jsonl",
    ),
    (
        "truncated BM25 pointers",
        ["retrieve", "--index", f"{B}/trunc-indptr", "-o", f"{B}/x3.jsonl"],
        "trunc-indptr: damaged index",
        "x3.jsonl",
    ),
    (
        "truncated vocabulary",
        ["retrieve", "--index", f"{B}/trunc-vocab", "-o", f"{B}/x4.jsonl"],
        "trunc-vocab: damaged index",
        "x4.jsonl",
    ),
    (
        "a sorted vocabulary cut short",
        ["retrieve", "--index", f"{B}/trunc-terms", "-o", f"{B}/x4b.jsonl"],
        "trunc-terms: damaged index",
        "x4b.jsonl",
    ),
    (
        "a sorted vocabulary's ids of another length",
        ["retrieve", "--index", f"{B}/short-ids", "-o", f"{B}/x4c.jsonl"],
        "short-ids: damaged index",
        "x4c.jsonl",
    ),
    (
        "manifest that is a list",
        ["retrieve", "--index", f"{B}/manifest-list", "-o", f"{B}/x5.jsonl"],
        "damaged manifest: a JSON object is needed, not a list",
        "x5.jsonl",
    ),
    (
        "manifest with a null corpus",
        ["retrieve", "--index", f"{B}/manifest-null-corpus", "-o", f"{B}/x6.jsonl"],
        "manifest names no collection; pass --corpus",
        "x6.jsonl",
    ),
    (
        "--corpus naming no file",
        ["retrieve", "--index", f"{B}/idx", "--corpus", f"{B}/missing.jsonl.gz", "-o", f"{B}/x6b.jsonl"],
        "missing.jsonl.gz: no such file (given as --corpus",
        "x6b.jsonl",
    ),
    (
        "manifest with string parameters",
        ["retrieve", "--index", f"{B}/manifest-string-params", "-o", f"{B}/x7.jsonl"],
        "'params' must be an object",
        "x7.jsonl",
    ),
    (
        "manifest of 0 passages",
        ["retrieve", "--index", f"{B}/manifest-zero", "-o", f"{B}/x8.jsonl"],
        "'passages' must be a positive integer",
        "x8.jsonl",
    ),
    (
        "manifest counting other passages",
        ["retrieve", "--index", f"{B}/manifest-more", "-o", f"{B}/x9.jsonl"],
        "holds 5 offsets, the manifest 7 passages",
        "x9.jsonl",
    ),
    (
        "manifest without an engine",
        ["retrieve", "--index", f"{B}/manifest-no-engine", "-o", f"{B}/x10.jsonl"],
        "'engine' must be a string",
        "x10.jsonl",
    ),
    (
        "damaged index reranked into",
        ["train", "--control", "--index", f"{B}/manifest-list", "--setting", "demo", "-o", f"{B}/x11"],
        "damaged manifest",
        "x11/model",
    ),
    # family: inputs that must never be accepted
    (
        "collection of 0 passages (bm25)",
        ["index", "bm25", "--corpus", f"{B}/no-passages.jsonl", "-o", f"{B}/y1", "--no-progress"],
        "holds no passages",
        "y1",
    ),
    (
        "collection of 0 passages (dense)",
        ["index", "dense", "--corpus", f"{B}/no-passages.jsonl", "-o", f"{B}/y2", "--no-progress"],
        "holds no passages",
        "y2",
    ),
    (
        "passage ids that are objects",
        ["index", "bm25", "--corpus", f"{B}/object-ids.jsonl", "-o", f"{B}/y3", "--no-progress"],
        "'id' must be a non-empty string or an integer",
        "y3",
    ),
    (
        "passage titles that are lists",
        ["index", "bm25", "--corpus", f"{B}/list-title.jsonl", "-o", f"{B}/y4", "--no-progress"],
        "'title' must be a string",
        "y4",
    ),
    (
        "weights that are not numbers",
        ["retrieve", "--index", "demo:bm25", "--index", "demo:bm25", "--weights", "nan,1", "-o", f"{B}/y5.jsonl"],
        "weights (--weights) must be finite",
        "y5.jsonl",
    ),
    (
        "infinite weights",
        ["retrieve", "--index", "demo:bm25", "--index", "demo:bm25", "--weights", "inf,1", "-o", f"{B}/y6.jsonl"],
        "weights (--weights) must be finite",
        "y6.jsonl",
    ),
    (
        "negative weights",
        ["retrieve", "--index", "demo:bm25", "--index", "demo:bm25", "--weights", "-1,1", "-o", f"{B}/y7.jsonl"],
        "not negative",
        "y7.jsonl",
    ),
    ("empty query", ["retrieve", "--query", ""], "--query is empty", None),
    ("blank query", ["retrieve", "--query", "   "], "--query is empty", None),
    (
        "query encoder on a BM25 index",
        ["retrieve", "--query-encoder", f"{B}/empty-model", "-o", f"{B}/y8.jsonl"],
        "encodes questions for a dense index",
        "y8.jsonl",
    ),
    (
        "empty question list",
        ["retrieve", "--questions", f"{B}/no-questions.json", "-o", f"{B}/y9.jsonl"],
        "no-questions.json: holds no questions",
        "y9.jsonl",
    ),
    (
        "empty question lines",
        ["retrieve", "--questions", f"{B}/no-questions.jsonl", "-o", f"{B}/y10.jsonl"],
        "holds no questions",
        "y10.jsonl",
    ),
    (
        "convert onto its input",
        ["convert", "--run", f"{B}/demo-run.jsonl", "--to", "run", "-o", f"{B}/demo-run.jsonl"],
        "--output is the input --run",
        None,
    ),
    (
        "learning rate nan",
        ["train", "--reranker", *TRAIN, "--lr", "nan", "-o", f"{B}/y11"],
        "--lr must be a finite number",
        "y11",
    ),
    (
        "learning rate inf",
        ["train", "fid", "--run", f"{B}/demo-train-run.jsonl", "--lr", "inf", "-o", f"{B}/y12"],
        "--lr must be a finite number",
        "y12",
    ),
    (
        "temperature nan",
        ["read", "llm", "--model", "m", "--temperature", "nan", "-o", f"{B}/y13.jsonl"],
        "--temperature must be a finite number",
        "y13.jsonl",
    ),
    (
        "cache that is a folder",
        [
            "read",
            "llm",
            "--model",
            "m",
            "--demos",
            "0",
            "--cache",
            f"{B}/cache-folder",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "-o",
            f"{B}/y14.jsonl",
        ],
        "is a folder; --cache names",
        "y14.jsonl",
    ),
    (
        "cache that is not SQLite",
        [
            "read",
            "llm",
            "--model",
            "m",
            "--demos",
            "0",
            "--cache",
            f"{B}/not-sqlite.db",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "-o",
            f"{B}/y15.jsonl",
        ],
        "not a response cache",
        "y15.jsonl",
    ),
    # family: experiment configs validated whole before any stage runs
    ("stage name climbing out", ["experiment", "run", f"{B}/escape.yaml"], "stage name '../../outside'", None),
    ("stage name with a slash", ["experiment", "run", f"{B}/slash.yaml"], "stage name 'a/b'", None),
    ("YAML alias bomb", ["experiment", "run", f"{B}/bomb.yaml"], "expands to more than 100,000 values", None),
    ("YAML config over 1 MB", ["experiment", "run", f"{B}/huge.yaml"], "at most 1,048,576", None),
    # family: refused starts leave nothing
    (
        "dense index with a missing encoder",
        ["index", "dense", "--corpus", f"{B}/passages.jsonl", "-o", f"{B}/z1", "--encoder", f"{B}/no-such-encoder"],
        "no such model folder",
        "z1",
    ),
    (
        "dense index with a folder that is no model",
        ["index", "dense", "--corpus", f"{B}/passages.jsonl", "-o", f"{B}/z2", "--encoder", f"{B}/empty-model"],
        "not a model folder",
        "z2",
    ),
    (
        "FiD from a missing model",
        ["train", "fid", "--run", f"{B}/demo-train-run.jsonl", "--model", f"{B}/no-such-t5", "-o", f"{B}/z3"],
        "no such model folder",
        "z3",
    ),
    (
        "dense index on a GPU that is not there",
        ["index", "dense", "--corpus", f"{B}/passages.jsonl", "-o", f"{B}/z4", "--device", "cuda"],
        "no CUDA device",
        "z4",
    ),
    (
        "fp16 on a CPU",
        [
            "index",
            "dense",
            "--corpus",
            f"{B}/passages.jsonl",
            "-o",
            f"{B}/z5",
            "--precision",
            "fp16",
            "--device",
            "cpu",
        ],
        "--precision fp16 needs a CUDA device",
        "z5",
    ),
    (
        "int8 without an exported backend",
        [
            "rerank",
            "--run",
            f"{B}/demo-run.jsonl",
            "--model",
            f"{B}/empty-model",
            "--quantize",
            "int8",
            "-o",
            f"{B}/z6.jsonl",
        ],
        "--quantize int8 needs --runtime onnx or openvino",
        "z6.jsonl",
    ),
    (
        "an exported backend on a GPU",
        [
            "retrieve",
            "--rerank",
            f"{B}/empty-model",
            "--rerank-runtime",
            "openvino",
            "--device",
            "cuda",
            "-o",
            f"{B}/z7.jsonl",
        ],
        "runs on the CPU"
        if __import__("torch").cuda.is_available()
        else "no CUDA device is available",  # first checked
        "z7.jsonl",
    ),
    # family: credentials never printed
    (
        "key in a download URL's user part",
        [
            "-q",
            "data",
            "download",
            "--setting",
            "supervised",
            "--split",
            "dev",
            "--data-dir",
            f"{B}/dl1",
            "--base-url",
            "http://user:SECRETKEY123@127.0.0.1:9/x",
        ],
        "***@127.0.0.1:9",
        None,
    ),
    (
        "key in a download URL's query",
        [
            "-q",
            "data",
            "download",
            "--setting",
            "supervised",
            "--split",
            "dev",
            "--data-dir",
            f"{B}/dl2",
            "--base-url",
            "http://127.0.0.1:9/x?api-key=SECRETKEY123",
        ],
        "x/full_split/dev.json?api-key=***: download failed",
        None,
    ),
    (
        "key in an LLM endpoint's user part",
        [
            "read",
            "llm",
            "--model",
            "m",
            "--demos",
            "0",
            "--no-cache",
            "--base-url",
            "http://u:SECRETKEY123@127.0.0.1:9/v1",
            "--no-progress",
            "-o",
            f"{B}/c1.jsonl",
        ],
        "***@127.0.0.1:9",
        "c1.jsonl",
    ),
    (
        "key in an LLM endpoint's query",
        [
            "read",
            "llm",
            "--model",
            "m",
            "--demos",
            "0",
            "--no-cache",
            "--base-url",
            "http://127.0.0.1:9/v1?api-key=SECRETKEY123",
            "--no-progress",
            "-o",
            f"{B}/c2.jsonl",
        ],
        "cannot connect",
        "c2.jsonl",
    ),
    (
        "key in a download URL's fragment",
        [
            "-q",
            "data",
            "download",
            "--setting",
            "supervised",
            "--split",
            "dev",
            "--data-dir",
            f"{B}/dl3",
            "--base-url",
            "http://127.0.0.1:9/x#SECRETKEY123",
        ],
        "dev.json#***: download failed",
        "dl3/full_split",
    ),
    (
        "key in a rewrite endpoint",
        [
            "retrieve",
            "--query-mode",
            "rewrite",
            "--rewrite-model",
            "m",
            "--rewrite-base-url",
            "http://u:SECRETKEY123@127.0.0.1:9/v1",
            "--no-progress",
            "-o",
            f"{B}/c3.jsonl",
        ],
        "***@127.0.0.1:9",
        "c3.jsonl",
    ),
    (
        "a failed first download of a release",
        [
            "-q",
            "data",
            "download",
            "--setting",
            "wiqa",
            "--data-dir",
            f"{B}/dl4",
            "--url",
            "http://127.0.0.1:9/wiqa.zip",
        ],
        "download failed",
        "dl4/wiqa",
    ),
    # third round: passage files taken as they are, never silently emptied
    (
        "a TSV title holding a tab",
        ["corpus", "build", f"{B}/tab-title.tsv", "-o", f"{B}/w1.jsonl", "--no-progress"],
        "tab-title.tsv:2: not a passage record",
        "w1.jsonl",
    ),
    (
        "predictions given as passages",
        [
            "corpus",
            "build",
            f"{B}/predictions-not-passages.jsonl",
            "--format",
            "passages-jsonl",
            "-o",
            f"{B}/w2.jsonl",
            "--no-progress",
        ],
        "predictions-not-passages.jsonl:1: not a passage record",
        "w2.jsonl",
    ),
    (
        "a run given as articles",
        [
            "corpus",
            "build",
            f"{B}/demo-run.jsonl",
            "--format",
            "wikiextractor-json",
            "-o",
            f"{B}/w3.jsonl",
            "--no-progress",
        ],
        "no passages: 24 record(s), none kept",
        "w3.jsonl",
    ),
    (
        "a dump of redirects only",
        ["corpus", "build", f"{B}/redirects.xml", "-o", f"{B}/w4.jsonl", "--no-progress"],
        "no passages: 1 record(s), none kept (1 redirect)",
        "w4.jsonl",
    ),
    (
        "passages with a lone surrogate",
        ["index", "bm25", "--corpus", f"{B}/surrogate-passages.jsonl", "-o", f"{B}/w5", "--no-progress"],
        "unpaired surrogate",
        "w5",
    ),
    (
        "questions with a lone surrogate",
        ["retrieve", "--questions", f"{B}/surrogate-questions.json", "-o", f"{B}/w6.jsonl"],
        "example 0: holds an unpaired surrogate",
        "w6.jsonl",
    ),
    # third round: damaged indexes
    (
        "a vocabulary that is a list",
        ["retrieve", "--index", f"{B}/vocab-list", "-o", f"{B}/v1.jsonl"],
        "vocab-list: damaged index",
        "v1.jsonl",
    ),
    (
        "a manifest nested too deeply",
        ["retrieve", "--index", f"{B}/deep-manifest", "-o", f"{B}/v2.jsonl"],
        "unreadable manifest",
        "v2.jsonl",
    ),
    (
        "offsets that are floats",
        ["retrieve", "--index", f"{B}/float-offsets", "-o", f"{B}/v3.jsonl"],
        "must hold increasing integer byte offsets",
        "v3.jsonl",
    ),
    (
        "a FAISS file of other vectors",
        ["retrieve", "--index", f"{B}/dense-other-dims", "-o", f"{B}/v4.jsonl"],
        "index.faiss holds 0 vectors of 8 dimensions",
        "v4.jsonl",
    ),
    (
        "a dense manifest with a negative length",
        ["retrieve", "--index", f"{B}/dense-bad-length", "-o", f"{B}/v5.jsonl"],
        "manifest.json: max_length must be at least 1, got -1",
        "v5.jsonl",
    ),
    # third round: run and prediction files
    (
        "a run whose qid is an object",
        ["convert", "--run", f"{B}/object-qid-run.jsonl", "--to", "trec", "-o", f"{B}/u1.trec"],
        "object-qid-run.jsonl:1: 'qid' must be",
        "u1.trec",
    ),
    (
        "a passage id holding a space, to TREC",
        ["convert", "--run", f"{B}/spaced-id-run.jsonl", "--to", "trec", "-o", f"{B}/u9.trec"],
        "passage id 'p 7' is empty or holds whitespace, which TREC files cannot carry",
        "u9.trec",
    ),
    (
        "a run with a NaN score",
        ["convert", "--run", f"{B}/nan-score-run.jsonl", "--to", "trec", "-o", f"{B}/u2.trec"],
        "'score' must be a finite number",
        "u2.trec",
    ),
    (
        "a run with a word for a score",
        ["evaluate", "--run", f"{B}/word-score-run.jsonl"],
        "ctx 1: 'score' must be a finite number, found 'high'",
        None,
    ),
    ("an empty run", ["evaluate", "--run", f"{B}/empty-run.jsonl"], "empty-run.jsonl: holds no run records", None),
    (
        "an empty run reranked",
        ["rerank", "--run", f"{B}/empty-run.jsonl", "--model", f"{B}/tiny", "-o", f"{B}/u3.jsonl"],
        "holds no run records",
        "u3.jsonl",
    ),
    ("empty predictions", ["evaluate", "--predictions", f"{B}/empty-predictions.jsonl"], "holds no predictions", None),
    (
        "predictions of other questions",
        ["evaluate", "--predictions", f"{B}/foreign-predictions.jsonl"],
        "answer none of the 24 questions of demo:dev",
        None,
    ),
    (
        "a run manifest that is a list",
        ["evaluate", "--run", f"{B}/list-manifest-run.jsonl"],
        "damaged manifest: a JSON object is needed",
        None,
    ),
    (
        "convert onto the input's manifest",
        ["convert", "--run", f"{B}/demo-run.jsonl", "--to", "trec", "-o", f"{B}/demo-run.jsonl.manifest.json"],
        "--output is the manifest of the input --run",
        None,
    ),
    (
        "weights with one index",
        ["retrieve", "--index", "demo:bm25", "--weights", "1", "-o", f"{B}/u4.jsonl"],
        "weights (--weights) fuse several indexes",
        "u4.jsonl",
    ),
    (
        "a cache of another program",
        [
            "read",
            "llm",
            "--model",
            "m",
            "--demos",
            "0",
            "--cache",
            f"{B}/other-schema.db",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "-o",
            f"{B}/u5.jsonl",
        ],
        "not a response cache (its 'responses' table has columns a",
        "u5.jsonl",
    ),
    # third round: experiment configs validated whole before any stage runs
    (
        "an experiment name climbing out",
        ["experiment", "run", f"{B}/escaping-name.yaml"],
        "experiment name '../../escaped'",
        "results",
    ),
    (
        "a stage k that is a word",
        ["experiment", "run", f"{B}/word-k.yaml"],
        "retrieve stage 'r': k must be an integer, got 'five'",
        "results",
    ),
    ("k that is a boolean", ["experiment", "run", f"{B}/bool-k.yaml"], "'k' must be an integer, got True", "results"),
    ("k that is a string", ["experiment", "run", f"{B}/string-k.yaml"], "'k' must be an integer, got '5'", "results"),
    (
        "YAML weights that are NaN",
        ["experiment", "run", f"{B}/nan-weights.yaml"],
        "weights (--weights) must be finite",
        "results",
    ),
    (
        "an index stage on a retrieve stage",
        ["experiment", "run", f"{B}/wrong-kind-index.yaml"],
        "'collection' must name an earlier collection stage, got 'r' (a retrieve stage)",
        "results",
    ),
    (
        "a train stage on a collection",
        ["experiment", "run", f"{B}/wrong-kind-train.yaml"],
        "'index' must name an earlier index stage, got 'c' (a collection stage)",
        "results",
    ),
    (
        "a reader on an evaluate stage",
        ["experiment", "run", f"{B}/wrong-kind-reader.yaml"],
        "'retriever' must name an earlier retrieve stage, got 'e' (an evaluate stage)",
        "results",
    ),
    (
        "a reader on itself",
        ["experiment", "run", f"{B}/own-retriever.yaml"],
        "'retriever' must name an earlier retrieve stage, got 'rd'",
        "results",
    ),
    (
        "an index that is a number",
        ["experiment", "run", f"{B}/index-number.yaml"],
        "'indexes' must name an earlier index stage, got 5",
        "results",
    ),
    (
        "an unknown fusion after a good stage",
        ["experiment", "run", f"{B}/bad-fusion.yaml"],
        "retrieve stage 's': fusion must be one of rrf, linear, got 'magic'",
        "results",
    ),
    (
        "a NaN learning rate after two build stages",
        ["experiment", "run", f"{B}/nan-lr.yaml"],
        "lr must be a finite number",
        "results",
    ),
    (
        "inputs that are a string",
        ["experiment", "run", f"{B}/inputs-string.yaml"],
        "'inputs' must be a list of files",
        "results",
    ),
    (
        "a negative max length",
        ["experiment", "run", f"{B}/negative-length.yaml"],
        "index stage 'i': max_length must be at least 1, got -3",
        "results",
    ),
    (
        "an unknown training setting",
        ["experiment", "run", f"{B}/unknown-setting.yaml"],
        "'train': unknown setting 'nonsense'",
        "results",
    ),
    (
        "a switch that is a list",
        ["experiment", "run", f"{B}/list-switch.yaml"],
        "'enabled' must be true or false",
        "results",
    ),
    ("YAML nested too deeply", ["experiment", "run", f"{B}/deep.yaml"], "nested too deeply", "results"),
    ("YAML that is not UTF-8", ["experiment", "run", f"{B}/latin1.yaml"], "not UTF-8 text", "results"),
    # third round: refused starts leave nothing
    (
        "rerank of a question not in the set",
        [
            "rerank",
            "--run",
            f"{B}/foreign-good-run.jsonl",
            "--model",
            f"{B}/tiny",
            "--setting",
            "demo",
            "--split",
            "dev",
            "-o",
            f"{B}/s1.jsonl",
        ],
        "question 'x0' is not in demo:dev",
        "s1.jsonl.partial",
    ),
    (
        "a group with no room for its gold",
        ["train", "--reranker", *TRAIN, "--split", "train", "--group-size", "2", "--other-gold", "2", "-o", f"{B}/s2"],
        "--group-size 2 leaves no room",
        "s2",
    ),
    (
        "more questions per step than questions",
        ["train", "--retriever", *TRAIN, "--split", "train", "-o", f"{B}/s3"],
        "12 training questions make no step of --questions-per-step 32",
        "s3",
    ),
    (
        "training on a GPU that is not there",
        ["train", "--reranker", *TRAIN, "--split", "train", "--device", "cuda", "-o", f"{B}/s4"],
        "no CUDA device",
        "s4",
    ),
    (
        "FiD from a BERT folder",
        ["train", "fid", "--run", f"{B}/demo-train-run.jsonl", "--model", f"{B}/bare-encoder", "-o", f"{B}/s5"],
        "not a T5 model (its config.json says model_type 'bert')",
        "s5",
    ),
    (
        "an Apple GPU that is not there",
        ["index", "dense", "--corpus", f"{B}/passages.jsonl", "-o", f"{B}/s6", "--device", "mps"],
        "no Apple GPU (MPS)",
        "s6",
    ),
    (
        "a length past the encoder's positions",
        [
            "index",
            "dense",
            "--corpus",
            f"{B}/passages.jsonl",
            "-o",
            f"{B}/s7",
            "--device",
            "cpu",
            "--max-length",
            "2000",
            "--no-progress",
        ],
        "--max-length 2000 is more than",
        "s7",
    ),
    (
        "a model folder holding a pickle",
        [
            "index",
            "dense",
            "--corpus",
            f"{B}/passages.jsonl",
            "-o",
            f"{B}/s8",
            "--device",
            "cpu",
            "--encoder",
            f"{B}/pickled",
            "--no-progress",
        ],
        "pickle",
        "s8",
    ),
    ("a required choice left out", ["convert", "--run", f"{B}/demo-run.jsonl"], "'--to'. Choose from: run, trec", None),
    (
        "a rewriting model without a query mode that asks one",
        ["retrieve", "--index", "demo:bm25", "--rewrite-model", "demo:smollm2", "-o", f"{B}/r10.jsonl"],
        "rewrite_model (--rewrite-model) applies to a query mode that asks a model",
        "r10.jsonl",
    ),
    (
        "an iterative reader asked for a second model's queries",
        ["read", "iterative", "--model", "demo:smollm2", "--query-mode", "rewrite", "-o", f"{B}/it1.jsonl"],
        "--query-mode rewrite asks a second model to write the queries; here the model writes its own",
        "it1.jsonl",
    ),
    (
        "no CUDA for the rewriting model",
        ["retrieve", "--index", "demo:bm25", "--rewrite-device", "cuda:0", "-o", f"{B}/s10.jsonl"],
        "'cuda:0': no CUDA device is available here (use --rewrite-device cpu)",
        "s10.jsonl",
    ),
    (
        "retrieve on the demo dense index with no GPU",
        ["retrieve", "--index", "demo:dense", "--device", "cuda", "-o", f"{B}/s9.jsonl"],
        "no CUDA device",
        "s9.jsonl",
    ),
]


@pytest.fixture(scope="module")
def outcomes(work, request):
    """Every selected case run once, in this process (tests/in_process.py gives each call what a
    new process would have): each has its own output names and is refused before it writes
    anything, so the cases cannot see each other."""
    base, env = work
    selected = {
        item.callspec.params["name"]
        for item in request.session.items
        if item.originalname == "test_bad_input_is_one_line_and_leaves_nothing"
    }
    return {
        name: run_cli(*[a.replace(B, str(base)) for a in args], cwd=base, env=env)
        for name, args, _, _ in CASES
        if name in selected
    }


@pytest.mark.parametrize("name, args, expected, output", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_and_leaves_nothing(work, outcomes, name, args, expected, output):
    if name in ("no CUDA", "no CUDA for the rewriting model"):
        import torch

        if torch.cuda.is_available():
            pytest.skip("CUDA is available here")
    base, env = work
    result = outcomes[name]
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1, (result.returncode, result.stdout)  # the README's promise, usage errors too
    assert "Traceback" not in result.stderr
    assert len(lines) == 1, result.stderr
    assert "\t" not in lines[0]  # one line of words, not a library's indented list
    assert expected.replace(B, str(base)) in lines[0], lines[0]
    assert "SECRETKEY123" not in result.stderr + result.stdout
    if output:
        assert not (base / output).exists()
    assert not (base / "PICKLE-RAN").exists()  # a pickle in a model folder is never run
