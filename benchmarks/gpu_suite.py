"""Every GPU path of ifqa measured beside its reference, in one command, as one Markdown table.

    python benchmarks/gpu_suite.py [--out FILE] [--tokenizer DIR] [--skip-tests]
    python benchmarks/gpu_suite.py --smoke     # every measurement at toy sizes on the CPU (the tests run it)

Runs the GPU tests (``pytest -m gpu``), then measures, each beside its reference and in one process
where they share a GPU: FiD training examples/s (eager and compiled, batch 1/4/8, peak memory; and
`ifqa train fid` itself, data path included), FiD reading questions/s, `ifqa index dense`
passages/s beside sentence-transformers' ``encode`` as ifqa called it before (batch 64, fp32) and
the model alone (pre-tokenized length-sorted batches of 1,024, fp16), `ifqa rerank` pairs/s beside
``CrossEncoder.predict`` and the model alone, reranker training seconds, and `ifqa serve --rerank`
``/search`` p50. Models are random-weight models of the real shapes (t5-base, all-MiniLM-L6-v2)
built here; passages are the demo collection's, repeated to mini-wiki's 76,710: nothing is
downloaded (the GPU machine has no network). ``--tokenizer`` takes a BERT tokenizer folder (the
real MiniLM's, say); by default one is trained here on the demo passages. Without CUDA (and
without ``--smoke``) it says so in one line and exits 0.
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT, WORK, ifqa, markdown_table  # noqa: E402

sys.path.insert(0, str(ROOT))

MINILM = dict(hidden_size=384, num_hidden_layers=6, num_attention_heads=12, intermediate_size=1536, max_position_embeddings=512)
TINY_BERT = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, max_position_embeddings=512)
SIZES = {
    "full": dict(passages=76_710, questions=300, depth=100, reads=200, fid_batches=(1, 4, 8), fid_steps=20,
                 train_steps=100, serve_requests=50, bert=MINILM, t5="t5-base", bert_name="all-MiniLM-L6-v2 shape"),
    "smoke": dict(passages=300, questions=4, depth=10, reads=4, fid_batches=(1,), fid_steps=2, train_steps=2,
                  serve_requests=3, bert=TINY_BERT, t5="tiny T5", bert_name="tiny BERT"),
}


def demo_passages() -> list[dict]:
    from ifqa.datasets.demo import packaged_passages

    with gzip.open(packaged_passages(), "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def write_collection(path: Path, n: int) -> list[dict]:
    """``n`` passages: the demo collection's, repeated with new ids (same lengths as real ones)."""
    base = demo_passages()
    passages = [{**base[i % len(base)], "id": f"{i}"} for i in range(n)]
    path.write_text("".join(json.dumps(p, ensure_ascii=False) + "\n" for p in passages), encoding="utf-8")
    return passages


def train_tokenizer(folder: Path, texts: list[str]):
    """A lower-cased WordPiece tokenizer (BERT's kind) trained on ``texts``; [PAD] is 0 and [SEP] ends a
    sequence, so T5 models can use it too (pad 0, eos [SEP])."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.decoder = decoders.WordPiece()
    tokenizer.train_from_iterator(texts, trainers.WordPieceTrainer(vocab_size=30522, special_tokens=special))
    tokenizer.post_processor = processors.BertProcessing(("[SEP]", 3), ("[CLS]", 2))
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]",
                                   sep_token="[SEP]", mask_token="[MASK]", eos_token="[SEP]")
    fast.save_pretrained(folder)
    return fast


def build_models(work: Path, size: dict, tokenizer_dir: str | None, texts: list[str]) -> dict[str, Path]:
    """Random-weight bi-encoder, cross-encoder and FiD T5 folders of the real shapes."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification, BertModel, T5Config

    from ifqa.readers.fid.model import FiDT5

    try:
        from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer
    except ImportError:  # sentence-transformers before 6
        from sentence_transformers.models import Normalize, Pooling, Transformer
    from sentence_transformers import SentenceTransformer

    torch.manual_seed(0)
    folders = {name: work / name for name in ("tokenizer", "bert", "encoder", "reranker", "t5")}
    tokenizer = (AutoTokenizer.from_pretrained(tokenizer_dir) if tokenizer_dir
                 else train_tokenizer(folders["tokenizer"], texts))
    bert = BertConfig(vocab_size=max(len(tokenizer), 30522), **size["bert"])
    BertModel(bert).save_pretrained(folders["bert"])
    tokenizer.save_pretrained(folders["bert"])
    word = Transformer(str(folders["bert"]), max_seq_length=128)
    SentenceTransformer(modules=[word, Pooling(word.get_word_embedding_dimension(), "mean"), Normalize()]).save(
        str(folders["encoder"]))
    BertForSequenceClassification(BertConfig(**{**bert.to_dict(), "num_labels": 1})).save_pretrained(folders["reranker"])
    tokenizer.save_pretrained(folders["reranker"])
    shape = T5_BASE if size["t5"] == "t5-base" else T5_TINY
    FiDT5(T5Config(vocab_size=32128, eos_token_id=tokenizer.sep_token_id, **shape)).save_pretrained(folders["t5"])
    tokenizer.save_pretrained(folders["t5"])
    return folders


T5_BASE = dict(d_model=768, d_kv=64, d_ff=3072, num_layers=12, num_decoder_layers=12, num_heads=12, dropout_rate=0.1,
               decoder_start_token_id=0, pad_token_id=0)
T5_TINY = dict(d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2, num_heads=4, dropout_rate=0.1,
               decoder_start_token_id=0, pad_token_id=0)


def gpu_tests() -> dict:
    started = time.time()
    result = subprocess.run([sys.executable, "-m", "pytest", "-m", "gpu", "-q", "-p", "no:cacheprovider", "tests"],
                            cwd=ROOT, capture_output=True, text=True)
    summary = (result.stdout.strip().splitlines() or ["no output"])[-1]
    return {"path": "GPU tests (`pytest -m gpu`)", "ifqa": summary.strip("= "), "reference": "", "ratio": "",
            "ceiling": "", "seconds": round(time.time() - started, 1)}


def row(path: str, ours: float | None, reference: float | None, unit: str, ceiling: float | None = None,
        note: str = "") -> dict:
    text = lambda value: f"{value:,.1f} {unit}" if value is not None else ""  # noqa: E731
    ratio = f"{ours / reference:.2f}x" if ours and reference else ""
    return {"path": path, "ifqa": text(ours), "reference": text(reference), "ratio": ratio, "ceiling": text(ceiling),
            "seconds": note}


def fid_training(folders: dict, size: dict, device: str, work: Path) -> list[dict]:
    """The model alone (what `ifqa train fid` runs each step), eager and compiled, then the command's own loop."""
    from fid_throughput import measure

    rows = []
    for batch in size["fid_batches"]:
        eager = measure(False, batch, size["fid_steps"], 20, 250, device=device, folder=folders["t5"])
        compiled = measure(False, batch, size["fid_steps"], 20, 250, device=device, folder=folders["t5"], compiled=True)
        rows.append(row(f"FiD training, {size['t5']}, 20 x 250 tokens, batch {batch} (compiled vs eager; peak GiB "
                        f"{compiled['peak GiB']:.1f} vs {eager['peak GiB']:.1f})", compiled["examples/s"],
                        eager["examples/s"], "ex/s"))
    rows.append(fid_command(folders, size, device, work))
    return rows


def fid_run(path: Path, passages: list[dict], n: int) -> None:
    path.write_text("".join(json.dumps({"qid": str(i), "question": f"If question {i} were asked, what would follow?",
                                        "answers": [passages[i]["title"] or "unknown"],
                                        "ctxs": passages[i : i + 20]}) + "\n" for i in range(n)))


def fid_command(folders: dict, size: dict, device: str, work: Path) -> dict:
    """`ifqa train fid` (batch 8 on a GPU; compiled, fused AdamW, data path included), from a fresh
    folder: the steady rate over the last two thirds of its steps, timed as the loop takes each
    batch (the loop reads the loss once a step, so it cannot run ahead of the GPU)."""
    import torch

    from ifqa.readers.fid import FiDTrainConfig
    from ifqa.readers.fid.train import train
    from ifqa.retrieval import batching

    batch, steps = max(size["fid_batches"]), 3 * size["fid_steps"]
    run = work / "fid-train.jsonl"
    fid_run(run, demo_passages(), 400)
    stamps: list[float] = []
    feed = batching.feed  # the loop imports it when it starts: time each batch it takes

    def timed_feed(*args, **kwargs):
        for item in feed(*args, **kwargs):
            stamps.append(time.time())
            yield item

    torch._dynamo.reset()
    config = FiDTrainConfig(model=str(folders["t5"]), steps=steps, batch_size=batch, warmup_steps=1, save_every=0,
                            compile=device.startswith("cuda"))
    batching.feed = timed_feed
    started = time.time()
    try:
        train(run, None, work / "fid-train", config, device, progress=False)
    finally:
        batching.feed = feed
    first = steps // 3
    rate = batch * (len(stamps) - 1 - first) / max(1e-9, stamps[-1] - stamps[first])
    return row(f"`ifqa train fid` batch {batch} (steady rate over steps {first + 1}-{steps}; data path included)", rate,
               None, "ex/s", note=f"{time.time() - started:.0f} s for {steps} steps, compiling and saving included")


def fid_reading(folders: dict, size: dict, device: str, work: Path) -> dict:
    from transformers import AutoTokenizer

    from ifqa.readers.fid.data import FiDSettings
    from ifqa.readers.fid.model import load_model
    from ifqa.readers.fid.predict import predict

    run = work / "fid-read.jsonl"
    fid_run(run, demo_passages(), size["reads"])
    records = [json.loads(line) for line in run.read_text().splitlines()]
    model, tokenizer = load_model(folders["t5"], device), AutoTokenizer.from_pretrained(str(folders["t5"]))
    predict(model, tokenizer, records[:8], FiDSettings(), 8)  # warm-up
    started = time.time()
    predict(model, tokenizer, records, FiDSettings(), 8)
    return row("FiD reading, 20 passages, greedy, batch 8 (random weights: all 20 answer tokens)",
               len(records) / (time.time() - started), None, "q/s")


def synchronize(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def warmed_rate(device: str, count: int, warm_up, run) -> float:
    """Items/s of ``run()`` over ``count`` items, after ``warm_up()``, with the GPU's queue drained at
    both ends so that the clock holds the device's work, not its launch."""
    warm_up()
    synchronize(device)
    started = time.time()
    run()
    synchronize(device)
    return count / (time.time() - started)


def dense_encoding(folders: dict, size: dict, device: str, work: Path) -> dict:
    """ifqa's chunk encoder (what `ifqa index dense` runs) beside encode() as ifqa called it before and
    the model alone, each warmed and timed in this process; the command's wall time, start-up
    included, is noted beside them."""
    import torch
    from sentence_transformers import SentenceTransformer

    from ifqa.retrieval import dense

    corpus = work / "passages.jsonl"
    passages = write_collection(corpus, size["passages"])
    started = time.time()
    subprocess.run(ifqa("index", "dense", "--corpus", corpus, "-o", work / "dense-cmd", "--encoder", folders["encoder"],
                        "--shard", "0/1", "--no-progress", "--device", device), check=True, capture_output=True)
    command = time.time() - started
    # the command left the collection's offsets and its chunks: the same encoder rewrites the same files
    encoder = dense.ChunkEncoder(corpus, work / "dense-cmd", str(folders["encoder"]), None, device, 128, True, None,
                                 dense.CHUNK)
    chunks = list(range(-(-len(passages) // dense.CHUNK)))
    ours = warmed_rate(device, len(passages), lambda: encoder.encode(chunks[:1]), lambda: encoder.encode(chunks))
    texts = [f"{p['title']}. {p['text']}" if p["title"] else p["text"] for p in passages]
    model = SentenceTransformer(str(folders["encoder"]), device=device)
    model.max_seq_length = 128
    reference = warmed_rate(device, len(texts), lambda: model.encode(texts[:256], batch_size=64),
                            lambda: model.encode(texts, batch_size=64, normalize_embeddings=True,
                                                 convert_to_numpy=True, show_progress_bar=False))
    ceiling = model_alone(lambda batch: model(batch)["sentence_embedding"], model.tokenizer, texts, None, 1024, 128,
                          device, torch.float16, model)
    return row(f"`ifqa index dense` encoding, {len(texts):,} passages, {size['bert_name']}, 128 tokens, vs "
               "sentence-transformers encode (batch 64, fp32)", ours, reference, "psg/s", ceiling,
               note=f"command {command:.1f} s: {len(texts) / command:,.0f} psg/s start-up included, "
                    f"{len(texts) / command / reference:.2f}x encode")


def model_alone(call, tokenizer, first: list[str], second: list[str] | None, batch: int, max_length: int, device: str,
                dtype, module) -> float:
    """Items/s of the model alone: inputs tokenized, sorted by length and on the device before the clock starts."""
    import torch

    order = sorted(range(len(first)), key=lambda i: -len(first[i]) - (len(second[i]) if second else 0))
    batches = []
    for start in range(0, len(order), batch):
        chosen = order[start : start + batch]
        features = tokenizer([first[i] for i in chosen], [second[i] for i in chosen] if second else None,
                             truncation=True, max_length=max_length, padding=True, return_tensors="pt")
        batches.append({k: v.to(device) for k, v in features.items()})
    module.to(dtype if device.startswith("cuda") else torch.float32)
    with torch.inference_mode():
        rate = warmed_rate(device, len(first), lambda: call(batches[0]), lambda: [call(features) for features in batches])
    module.to(torch.float32)
    return rate


def reranking(folders: dict, size: dict, device: str, work: Path) -> dict:
    """ifqa's reranker (what `ifqa rerank` runs) beside CrossEncoder.predict and the model alone, each
    warmed and timed in this process; the command's wall time, start-up included, noted beside."""
    import torch
    from sentence_transformers import CrossEncoder

    from ifqa.retrieval.rerank import CrossEncoderReranker

    passages = demo_passages()
    n, depth = size["questions"], size["depth"]
    examples = [{"idx": i, "question": f"If question {i} of the suite were asked, what would the answer be?",
                 "answers": ["x"]} for i in range(n)]
    (work / "questions.json").write_text(json.dumps(examples))
    run = work / "rerank-run.jsonl"
    run.write_text("".join(json.dumps({"qid": str(i), "question": examples[i]["question"], "answers": ["x"], "ctxs": [
        {**passages[(i * depth + j) % len(passages)], "score": float(depth - j)} for j in range(depth)]}) + "\n"
        for i in range(n)))
    started = time.time()
    subprocess.run(ifqa("rerank", "--run", run, "--model", folders["reranker"], "--depth", depth, "--questions",
                        work / "questions.json", "-o", work / "reranked.jsonl", "--no-progress", "--device", device),
                   check=True, capture_output=True)
    command = time.time() - started
    pairs = [(examples[i]["question"], passages[(i * depth + j) % len(passages)]["text"]) for i in range(n) for j in range(depth)]
    reranker = CrossEncoderReranker(str(folders["reranker"]), depth, device=device)
    items = [(q, [t for _, t in pairs[i : i + depth]], [0.0] * depth) for i, (q, _) in enumerate(pairs) if i % depth == 0]
    ours = warmed_rate(device, len(pairs), lambda: reranker.score_many(items[:2]), lambda: reranker.score_many(items))
    model = CrossEncoder(str(folders["reranker"]), device=device)
    reference = warmed_rate(device, len(pairs), lambda: model.predict(pairs[:64], batch_size=64),
                            lambda: model.predict(pairs, batch_size=64, show_progress_bar=False))
    ceiling = model_alone(lambda batch: model.model(**batch).logits, model.tokenizer, [q for q, _ in pairs],
                          [t for _, t in pairs], 512, getattr(model, "max_seq_length", None) or 512, device, torch.float16,
                          model.model)
    return row(f"`ifqa rerank` scoring, {n} questions x top {depth} vs CrossEncoder.predict (batch 64)",
               ours, reference, "pairs/s", ceiling,
               note=f"command {command:.1f} s: {len(pairs) / command:,.0f} pairs/s start-up included, "
                    f"{len(pairs) / command / reference:.2f}x predict")


def reranker_training(folders: dict, size: dict, device: str, work: Path) -> dict:
    """Seconds for `ifqa train reranker`'s default step shape (30 pairs x 192 tokens), projected to its 800 steps."""
    from ifqa.training.data import TrainingGroup
    from ifqa.training.recipes import RerankerRecipe
    from ifqa.training.reranker import train_reranker

    passages = demo_passages()
    groups = [TrainingGroup(qid=str(i), question=f"If thing {i} changed, what would happen?",
                            positives=[passages[i]["text"]], negatives=[p["text"] for p in passages[i + 1 : i + 40]],
                            other_gold=[]) for i in range(400)]
    recipe = RerankerRecipe(model=str(folders["bert"]), epochs=1)
    started = time.time()
    result = train_reranker(groups, work / "reranker-train", recipe, device, progress=False, stop_after=size["train_steps"])
    seconds = time.time() - started
    per_step = seconds / max(1, result["step"])
    return row(f"reranker training, default recipe shape ({result['step']} steps timed)", None, None, "s",
               note=f"{per_step * 800:.0f} s projected for 800 steps (start-up included)")


def serve_latency(folders: dict, size: dict, device: str, work: Path) -> dict:
    from serve_latency import search, start

    process, url = start(["--rerank", str(folders["reranker"]), "--rerank-depth", "100", "--device", device],
                         work / "serve.log")
    try:
        questions = [f"If the bridge at town {i} were stone, what would cross the river?" for i in range(size["serve_requests"])]
        search(url, questions[0], 10)
        latencies = [search(url, q, 10) for q in questions]
    finally:
        process.terminate()
        process.wait(30)
    return row(f"`ifqa serve --rerank` /search p50 (demo BM25 + rerank top 100, {len(latencies)} requests)",
               1000 * statistics.median(latencies), None, "ms")


def attempt(name: str, function, *args) -> list[dict]:
    """A measurement that fails (a package missing on the GPU machine, a bug) becomes a row saying why,
    so one failure never costs the others; each row notes its section's seconds."""
    started = time.time()
    try:
        result = function(*args)
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - every failure is reported in the table
        detail = (getattr(exc, "stderr", None) or str(exc) or type(exc).__name__).strip().splitlines() or [type(exc).__name__]
        return [{"path": name, "ifqa": f"not measured: {type(exc).__name__}: {detail[-1][:160]}", "reference": "",
                 "ratio": "", "ceiling": "", "seconds": f"{time.time() - started:.0f}"}]
    rows = result if isinstance(result, list) else [result]
    for entry in rows:
        entry["seconds"] = "; ".join(filter(None, [entry.get("seconds"), f"section {time.time() - started:.0f} s"]))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=WORK / "gpu_suite.md", help="where the Markdown table goes")
    parser.add_argument("--tokenizer", help="a BERT tokenizer folder (default: one trained here on the demo passages)")
    parser.add_argument("--skip-tests", action="store_true", help="leave out `pytest -m gpu`")
    parser.add_argument("--smoke", action="store_true", help="toy sizes on the CPU: checks the suite itself")
    parser.add_argument("--work", type=Path, help="scratch folder, emptied first (default benchmarks/.work/gpu[-smoke])")
    args = parser.parse_args()
    import torch

    if not args.smoke and not torch.cuda.is_available():
        print("gpu_suite: no CUDA device here; nothing measured")
        return
    size, device = SIZES["smoke" if args.smoke else "full"], "cpu" if args.smoke else "cuda"
    work = args.work or WORK / ("gpu-smoke" if args.smoke else "gpu")
    shutil.rmtree(work, ignore_errors=True)  # every run from scratch: a training folder left over would resume
    work.mkdir(parents=True)
    started = time.time()
    folders = build_models(work, size, args.tokenizer, [p["text"] for p in demo_passages()])
    rows = [] if args.skip_tests or args.smoke else [gpu_tests()]
    name = torch.cuda.get_device_name(0) if device == "cuda" else "CPU (smoke sizes)"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    for section, function in [("FiD training", fid_training), ("FiD reading", fid_reading),
                              ("dense encoding", dense_encoding), ("reranking", reranking),
                              ("reranker training", reranker_training), ("serve --rerank", serve_latency)]:
        rows += attempt(section, function, folders, size, device, work)
        print(json.dumps(rows[-1]), flush=True)
        table = (f"{name}; torch {torch.__version__}; random weights of the real shapes; "
                 f"{time.time() - started:.0f} s in all\n\n" + markdown_table(rows))
        args.out.write_text(table + "\n")  # after every section: a run cut short keeps what it measured
    print("\n" + table)


if __name__ == "__main__":
    main()
