"""Bad input, table-driven: each case is a family of user mistakes. Every one must end with a
non-zero exit, exactly one line on stderr naming the file or option, no traceback, and no output
file left behind."""

import gzip
import json
import os
from pathlib import Path

import pytest

from tests.conftest import run_cli

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """A folder with small good and bad inputs, and a cache with the demo index built once."""
    base = tmp_path_factory.mktemp("bad")
    env = {**os.environ, "IFQA_CACHE_DIR": str(base / "cache"), "OPENAI_API_KEY": "k"}
    good = [{"id": f"p{i}", "title": "T", "text": f"passage number {i} about rivers"} for i in range(5)]
    (base / "passages.jsonl").write_text("".join(json.dumps(p) + "\n" for p in good))
    (base / "other.jsonl").write_text("".join(json.dumps({**p, "text": p["text"] + " and lakes"}) + "\n" for p in good))
    (base / "same-size.jsonl").write_text((base / "passages.jsonl").read_text().replace("3 about rivers", "3 about rovers"))
    (base / "dup.jsonl").write_text("".join(json.dumps(p) + "\n" for p in good + good[:1]))
    (base / "empty-text.jsonl").write_text(json.dumps({"id": "a", "title": "T", "text": ""}) + "\n")
    (base / "bad.jsonl").write_text('{"qid": "1", "prediction": "x"}\n{not json\n')
    (base / "not-gzip.json.gz").write_text("[]")
    with gzip.open(base / "truncated.jsonl.gz", "wb") as handle:
        handle.write(b'{"qid": "1", "prediction": "x"}\n' * 2000)
    (base / "truncated.jsonl.gz").write_bytes((base / "truncated.jsonl.gz").read_bytes()[:60])
    (base / "string-answers.json").write_text(json.dumps([{"idx": 1, "question": "If?", "answers": "Paris"}]))
    (base / "questions.json").write_text(json.dumps([{"idx": 1, "question": "If rivers ran uphill, what then?", "answers": ["x"]}]))
    (base / "wrong-shape.yaml").write_text("name: x\nquestions: [1, 2]\n")
    (base / "wrong-readers.yaml").write_text("name: x\nquestions: {setting: demo}\nreaders: closed\n")
    (base / "wrong-k.yaml").write_text("name: x\nquestions: {setting: demo}\nk: twenty\n")
    (base / "wrong-stage.yaml").write_text("name: x\nquestions: {setting: demo}\nstages:\n  - {stage: retrieve, name: r}\n")
    assert run_cli("index", "bm25", "--corpus", base / "passages.jsonl", "--index", base / "idx", "--no-progress", env=env).returncode == 0
    assert run_cli("index", "bm25", "--corpus", base / "passages.jsonl", "--index", base / "broken", "--no-progress", env=env).returncode == 0
    (base / "broken" / "offsets.npy").unlink()
    run = base / "demo-run.jsonl"
    assert run_cli("retrieve", "--k", "3", "-o", run, "--no-progress", env=env).returncode == 0
    records = [json.loads(line) for line in run.read_text().splitlines()]
    records[0]["ctxs"][1]["text"] = ""
    (base / "notext-run.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (base / "notext-run.jsonl.manifest.json").write_text((base / "demo-run.jsonl.manifest.json").read_text())
    (base / "foreign-run.jsonl").write_text("".join(json.dumps({**r, "qid": "x" + r["qid"]}) + "\n" for r in records))
    (base / "nogold.json").write_text(json.dumps([{"idx": 1, "question": "If a, what b?", "answers": ["c"], "context": []}]))
    (base / "empty-model").mkdir()
    (base / "bare-encoder").mkdir()
    (base / "bare-encoder" / "config.json").write_text(json.dumps({"architectures": ["BertModel"], "model_type": "bert"}))
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
    return base, env


B = "{base}"
TRAIN = ["--index", "demo:bm25", "--setting", "demo", "--no-progress"]
CASES = [
    # (name, arguments, expected text in the one stderr line, output that must not exist)
    ("negative k", ["retrieve", "--k", "-3", "-o", f"{B}/o1.jsonl"], "--k", "o1.jsonl"),
    ("zero batch", ["retrieve", "--batch-size", "0", "-o", f"{B}/o2.jsonl"], "--batch-size", "o2.jsonl"),
    ("zero samples", ["read", "llm", "--model", "m", "--samples", "0", "-o", f"{B}/o3.jsonl"], "--samples must be at least 1", "o3.jsonl"),
    ("negative demos", ["read", "llm", "--model", "m", "--demos", "-1", "-o", f"{B}/o4.jsonl"], "--demos must be at least 0", "o4.jsonl"),
    ("zero chunk", ["index", "dense", "--corpus", f"{B}/passages.jsonl", "--index", f"{B}/d0", "--chunk-size", "0"], "--chunk-size", "d0"),
    ("zero workers", ["corpus", "build", f"{B}/passages.jsonl", "-o", f"{B}/o5.jsonl", "--workers", "0"], "--workers", "o5.jsonl"),
    ("zero steps", ["train", "--run", f"{B}/demo-run.jsonl", "-o", f"{B}/t0", "--steps", "0"], "--steps", "t0"),
    ("k1 out of range", ["index", "bm25", "--corpus", f"{B}/passages.jsonl", "--index", f"{B}/i1", "--k1", "-1"], "--k1", "i1"),
    ("b out of range", ["index", "bm25", "--corpus", f"{B}/passages.jsonl", "--index", f"{B}/i2", "--b", "2"], "--b must be between 0 and 1", "i2"),
    ("missing corpus", ["index", "bm25", "--corpus", f"{B}/nope.jsonl", "--index", f"{B}/i3"], "nope.jsonl: No such file", "i3"),
    ("missing build input", ["corpus", "build", f"{B}/nope.xml", "-o", f"{B}/o6.jsonl"], "nope.xml", "o6.jsonl"),
    ("duplicate passage ids", ["index", "bm25", "--corpus", f"{B}/dup.jsonl", "--index", f"{B}/i4", "--no-progress"], "occurs more than once", "i4"),
    ("passage without text", ["index", "bm25", "--corpus", f"{B}/empty-text.jsonl", "--index", f"{B}/i5", "--no-progress"], "'text' is empty", "i5"),
    ("existing index folder", ["index", "bm25", "--corpus", f"{B}/passages.jsonl", "--index", f"{B}/idx"], "already exists", None),
    ("another collection", ["retrieve", "--index", f"{B}/idx", "--corpus", f"{B}/other.jsonl", "-o", f"{B}/o7.jsonl"], "not the collection this index was built from", "o7.jsonl"),
    ("same size, other text", ["retrieve", "--index", f"{B}/idx", "--corpus", f"{B}/same-size.jsonl", "--verify-corpus", "-o", f"{B}/o20.jsonl"], "sha256 differs", "o20.jsonl"),
    ("damaged index", ["retrieve", "--index", f"{B}/broken", "-o", f"{B}/o8.jsonl"], "offsets.npy is missing", "o8.jsonl"),
    ("not an index", ["retrieve", "--index", f"{B}", "-o", f"{B}/o9.jsonl"], "not an ifqa index", "o9.jsonl"),
    ("unwritable output", ["retrieve", "-o", "/proc/ifqa-cannot-write/run.jsonl"], "/proc/ifqa-cannot-write", None),
    ("output is a folder", ["retrieve", "-o", f"{B}/idx"], "idx", None),
    ("invalid JSON", ["evaluate", "--predictions", f"{B}/bad.jsonl"], "bad.jsonl:2: invalid JSON", None),
    ("not gzip", ["evaluate", "--questions", f"{B}/not-gzip.json.gz", "--predictions", f"{B}/bad.jsonl"], "not-gzip.json.gz: named .gz but is not gzip-compressed", None),
    ("truncated gzip", ["evaluate", "--predictions", f"{B}/truncated.jsonl.gz"], "truncated.jsonl.gz: compressed data ends early", None),
    ("answers as a string", ["data", "stats", "--questions", f"{B}/string-answers.json"], "'answers' must be a non-empty list", None),
    ("run for other questions", ["evaluate", "--run", f"{B}/demo-run.jsonl", "--questions", f"{B}/questions.json"], "made for the question set 'demo:dev'", None),
    ("convert for other questions", ["convert", f"{B}/demo-run.jsonl", "--to", "trec", "--setting", "demo", "--split", "train", "-o", f"{B}/o10.trec"], "made for the question set 'demo:dev'", "o10.trec"),
    ("read with another run", ["read", "llm", "--model", "m", "--mode", "open", "--run", f"{B}/demo-run.jsonl", "--setting", "demo", "--split", "train", "--base-url", "http://127.0.0.1:9/v1", "-o", f"{B}/o11.jsonl"], "made for the question set 'demo:dev'", "o11.jsonl"),
    ("unnamed demonstration pool", ["read", "llm", "--model", "m", "--questions", f"{B}/questions.json", "--base-url", "http://127.0.0.1:9/v1", "-o", f"{B}/o12.jsonl"], "name the demonstration pool", "o12.jsonl"),
    ("refused endpoint", ["read", "llm", "--model", "m", "--demos", "0", "--base-url", "http://127.0.0.1:9/v1", "--no-cache", "--no-progress", "-o", f"{B}/o13.jsonl"], "cannot connect", "o13.jsonl"),
    ("no CUDA", ["read", "llm", "--backend", "hf", "--model", f"{B}/nomodel", "--device", "cuda", "-o", f"{B}/o14.jsonl"], "no CUDA device", "o14.jsonl"),
    ("YAML questions not a mapping", ["experiment", "run", f"{B}/wrong-shape.yaml"], "'questions' must be a mapping", None),
    ("YAML readers not a list", ["experiment", "run", f"{B}/wrong-readers.yaml"], "'readers' must be a list", None),
    ("YAML k not a number", ["experiment", "run", f"{B}/wrong-k.yaml"], "'k' must be an integer", None),
    ("YAML stage without indexes", ["experiment", "run", f"{B}/wrong-stage.yaml"], "needs 'indexes'", None),
    ("unknown query mode", ["retrieve", "--query-mode", "psychic", "-o", f"{B}/o15.jsonl"], "--query-mode", "o15.jsonl"),
    ("bad weights", ["retrieve", "--index", "demo:bm25", "--weights", "1,x", "-o", f"{B}/o16.jsonl"], "--weights", "o16.jsonl"),
    ("unknown demo index", ["retrieve", "--index", "demo:sparse", "-o", f"{B}/o17.jsonl"], "unknown demo index", "o17.jsonl"),
    ("zero k", ["retrieve", "--k", "0", "-o", f"{B}/o18.jsonl"], "--k", "o18.jsonl"),
    ("zero words", ["corpus", "build", f"{B}/passages.jsonl", "-o", f"{B}/o19.jsonl", "--words", "0"], "--words", "o19.jsonl"),
    # counterfactual retrieval: reranking, query modes, training
    ("rerank depth 0", ["rerank", f"{B}/demo-run.jsonl", "--model", f"{B}/empty-model", "--depth", "0", "-o", f"{B}/r1.jsonl"], "--depth", "r1.jsonl"),
    ("rerank with a folder that is not a model", ["rerank", f"{B}/demo-run.jsonl", "--model", f"{B}/empty-model", "-o", f"{B}/r2.jsonl"], "not a model folder", "r2.jsonl"),
    ("rerank a run without passage text", ["rerank", f"{B}/notext-run.jsonl", "--model", f"{B}/empty-model", "-o", f"{B}/r3.jsonl"], "notext-run.jsonl:1: passage", "r3.jsonl"),
    ("rerank onto its input", ["rerank", f"{B}/demo-run.jsonl", "--model", f"{B}/empty-model", "-o", f"{B}/demo-run.jsonl"], "--output must differ", None),
    ("rerank a missing run", ["rerank", f"{B}/nope-run.jsonl", "--model", f"{B}/empty-model", "-o", f"{B}/r4.jsonl"], "nope-run.jsonl", "r4.jsonl"),
    ("rerank with an encoder that has no scoring head", ["rerank", f"{B}/demo-run.jsonl", "--model", f"{B}/bare-encoder", "-o", f"{B}/r8.jsonl"], "without a trained scoring head", "r8.jsonl"),
    ("retrieve with rerank depth 0", ["retrieve", "--rerank", f"{B}/empty-model", "--rerank-depth", "0", "-o", f"{B}/r5.jsonl"], "--rerank-depth", "r5.jsonl"),
    ("retrieve with a reranker that is not a model", ["retrieve", "--rerank", f"{B}/empty-model", "-o", f"{B}/r6.jsonl"], "not a model folder", "r6.jsonl"),
    ("LLM query mode without a model", ["retrieve", "--query-mode", "hyde", "-o", f"{B}/r7.jsonl"], "needs a model: --rewrite-model", "r7.jsonl"),
    ("train on dev", ["train", "--reranker", *TRAIN, "--split", "dev", "-o", f"{B}/m1"], "refusing to train on the dev split", "m1"),
    ("train on test", ["train", "--control", "--index", "demo:bm25", "--setting", "supervised", "--split", "test", "-o", f"{B}/m2"], "refusing to train on the test split", "m2"),
    ("train without gold passages", ["train", "--reranker", "--index", "demo:bm25", "--questions", f"{B}/nogold.json", "-o", f"{B}/m3"], "have no gold passage", "m3/model"),
    ("train without an index", ["train", "--reranker", "--setting", "demo", "-o", f"{B}/m4"], "--index is needed", "m4/model"),
    ("train with a missing index", ["train", "--control", "--index", f"{B}/nope-index", "--setting", "demo", "-o", f"{B}/m5"], "nope-index", "m5/model"),
    ("train from a folder that is not a model", ["train", "--reranker", *TRAIN, "--model", f"{B}/empty-model", "-o", f"{B}/m6"], "not a model folder", "m6/model"),
    ("group of one", ["train", "--reranker", *TRAIN, "--group-size", "1", "-o", f"{B}/m7"], "--group-size", "m7"),
    ("learning rate not a number", ["train", "--reranker", *TRAIN, "--lr", "fast", "-o", f"{B}/m8"], "--lr", "m8"),
    ("negative learning rate", ["train", "--reranker", *TRAIN, "--lr", "-1e-4", "-o", f"{B}/m10"], "--lr must be at least 0.0", "m10"),
    ("attention dropout of 1", ["train", "--reranker", *TRAIN, "--attention-dropout", "1", "-o", f"{B}/m13"], "--attention-dropout must be at most 0.9", "m13"),
    ("unknown source of other gold passages", ["train", "--reranker", *TRAIN, "--other-gold-from", "nearest", "-o", f"{B}/m14"], "--other-gold-from", "m14"),
    ("zero temperature", ["train", "--retriever", *TRAIN, "--temperature", "0", "-o", f"{B}/m11"], "--temperature", "m11"),
    ("FiD gradient norm below zero", ["train", "fid", "--run", f"{B}/demo-run.jsonl", "--max-grad-norm", "-1", "-o", f"{B}/m12"], "--max-grad-norm", "m12"),
    ("one question per step", ["train", "--retriever", *TRAIN, "--questions-per-step", "1", "-o", f"{B}/m9"], "--questions-per-step", "m9"),
    ("compare with a missing run", ["evaluate", "--run", f"{B}/demo-run.jsonl", "--compare", f"{B}/nope.jsonl"], "nope.jsonl", None),
    ("compare runs of other questions", ["evaluate", "--run", f"{B}/demo-run.jsonl", "--compare", f"{B}/foreign-run.jsonl"], "share no question", None),
    ("YAML unknown stage type", ["experiment", "run", f"{B}/unknown-stage.yaml"], "unknown type 'dance'", None),
    ("YAML unknown stage key", ["experiment", "run", f"{B}/unknown-key.yaml"], "unknown key(s) colour", None),
    ("YAML compare_to a later stage", ["experiment", "run", f"{B}/compare-later.yaml"], "compare_to 'nope' is not an earlier retrieve stage", None),
    ("YAML two stages with one name", ["experiment", "run", f"{B}/same-name.yaml"], "two stages are named 'r'", None),
    ("YAML unknown collection preset", ["experiment", "run", f"{B}/bad-preset.yaml"], "unknown preset 'tiny-wiki'", None),
    ("YAML train stage without its index", ["experiment", "run", f"{B}/train-no-index.yaml"], "'index' must name an earlier index stage", None),
    ("YAML unknown index engine", ["experiment", "run", f"{B}/bad-engine.yaml"], "engine must be bm25 or dense", None),
]


@pytest.mark.parametrize("name, args, expected, output", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_and_leaves_nothing(work, name, args, expected, output):
    if name == "no CUDA":
        import torch

        if torch.cuda.is_available():
            pytest.skip("CUDA is available here")
    base, env = work
    result = run_cli(*[a.replace(B, str(base)) for a in args], cwd=base, env=env, timeout=120)
    lines = result.stderr.strip().splitlines()
    assert result.returncode != 0, result.stdout
    assert "Traceback" not in result.stderr
    assert len(lines) == 1, result.stderr
    assert expected.replace(B, str(base)) in lines[0], lines[0]
    if output:
        assert not (base / output).exists()
