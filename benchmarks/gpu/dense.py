"""`ifqa index dense` as typed, beside sentence-transformers' ``encode`` and the model alone."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from gpu.inputs import passage_texts, write_collection
from gpu.suite import (
    DPR_LENGTH,
    GOALS,
    LENGTHS,
    Suite,
    command,
    device_batches,
    judge_command,
    library_default,
    main_thread_profile,
    model_alone,
    precision_name,
    release,
    row,
    startup_text,
    steady_text,
    warmed_rate,
)
from ifqa.feeding import WORKERS_ENV

#: feed worker processes for the 128-token rerun that moves the feed off the calling process's threads
PROCESS_WORKERS = 4
#: the 128-token rerun's batch: four times a GPU's default, whether fewer model calls a passage lift the rate
LARGE_BATCH = 2048


def collections(suite: Suite) -> tuple[Path, Path]:
    """The dense sections' collections (written once): ``--passages`` passages, and one chunk's worth for start-up."""
    folder = suite.work.new("collection")
    full, small = folder / "passages.jsonl", folder / "startup.jsonl"
    if not full.exists():
        folder.mkdir(exist_ok=True)
        write_collection(small, suite.startup_passages)
        write_collection(full, suite.passages)
    return full, small


def index_dense(
    suite: Suite,
    collection: Path,
    out: Path,
    length: int,
    phases=None,
    env: dict | None = None,
    profile=None,
    options: tuple = (),
) -> tuple[float, float]:
    """`ifqa index dense` as a user types it (``options`` added); (start time, wall seconds)."""
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
        *options,
        phases=phases,
        env=env,
        profile=profile,
    )
    return started, seconds


def again(suite: Suite, collection: Path, out: Path, length: int, how: str, **given) -> tuple[bool, str]:
    """The full command once more, ``how`` it differs (``given`` to ``index_dense``: under py-spy, fed another
    way), as a note for its row: (whether it ran, its rate or why it failed). A failure (py-spy not let to
    sample, a container's shared memory too small for worker processes) never costs the row."""
    try:
        _, seconds = index_dense(suite, collection, out, length, **given)
        return True, f"; again {how} {suite.passages / seconds:,.0f} psg/s"
    except RuntimeError as exc:
        return False, f"; the rerun {how} failed ({str(exc)[-120:]})"
    finally:
        shutil.rmtree(out, ignore_errors=True)


def dense_startup(suite: Suite, small: Path, length: int) -> tuple[float, int]:
    """The start-up of `ifqa index dense` (the command on one chunk of passages), measured once: it
    does not depend on the token length (one chunk encodes in a fraction of a second on a GPU)."""
    if "dense" not in suite.startup:
        phases = suite.work.new("dense-startup-phases.json")
        seconds = index_dense(suite, small, suite.work.new("dense-startup"), length, phases)[1]
        suite.startup["dense"] = (seconds, length, phases)
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
    startup, measured_at, phases = dense_startup(suite, small, length)
    started, seconds = index_dense(suite, corpus, folder, length)
    manifest = json.loads((folder / "manifest.json").read_text())
    if manifest.get("passages") != n:
        raise RuntimeError(f"the index holds {manifest.get('passages')} passages, not {n}")
    precision = manifest["params"].get("precision", "fp32")
    encoded = max(p.stat().st_mtime for p in (folder / "embeddings").glob("chunk-*.npy")) - started
    shutil.rmtree(folder)  # the suite's own, and the largest thing it writes
    rate = n / seconds
    profile = ""
    if length == LENGTHS[0]:  # where the calling process spends the run, and whether its feed threads slow it
        stacks = suite.out_file("dense-128-profile.txt")
        ran, profile = again(suite, corpus, folder, length, "under py-spy", profile=stacks)
        profile += f", {main_thread_profile(stacks)}" if ran else ""
        # the fast tokenizer feeds on threads of this process (their Python shares the model's GIL); worker
        # processes instead (IFQA_FEED_WORKERS=N; =0 keeps the threads, which the H200's 5,696 vs 5,715 compared)
        how = f"fed by {PROCESS_WORKERS} worker processes instead of threads"
        profile += again(suite, corpus, folder, length, how, env={WORKERS_ENV: str(PROCESS_WORKERS)})[1]
        # the H200's main thread spent most of a batch in the eager model's own Python: do fewer, larger calls pay?
        large = ("--batch-size", LARGE_BATCH)
        profile += again(suite, corpus, folder, length, f"at --batch-size {LARGE_BATCH}", options=large)[1]
    if length == LENGTHS[-1]:  # a token budget the default batch fills at full length: shorter passages, more rows
        budget = default_batch_size(device) * length
        how, budgeted = f"at --max-batch-tokens {budget:,}", ("--max-batch-tokens", budget)
        profile += again(suite, corpus, folder, length, how, options=budgeted)[1]

    sample = passage_texts(min(n, size["sample_passages"]))
    batch, dtype = (
        default_batch_size(device),
        {"fp16": torch.float16, "bf16": torch.bfloat16}.get(precision, torch.float32),
    )
    default_batch, default, same, ceiling, masks = encode_references(
        suite, sample, length, dtype, batch, forms=length == LENGTHS[0]
    )
    release(device)
    share = startup / seconds
    judge_command(
        suite.goals,
        f"dense-{length}",
        GOALS["dense"],
        n,
        dict(ifqa=rate, defaults=default, same=same, ceiling=ceiling, startup=startup),
        share,
        "psg",
        "--passages",
    )
    return row(
        f"`ifqa index dense`, {n:,} passages, {size['bert_name']}, {length} tokens, {precision} batch {batch}, "
        "start-up and flat index included",
        rate,
        "psg/s",
        default=default,
        same=same,
        ceiling=ceiling,
        startup=startup_text(
            startup,
            n_small,
            seconds,
            "passages" + ("" if measured_at == length else f" at {measured_at} tokens"),
            phases if measured_at == length else None,
        ),
        note=f"command {seconds:.1f} s: encoding done at {encoded:.1f} s, then the flat index and exit "
        f"{seconds - encoded:.1f} s; {steady_text(n - n_small, seconds, startup, 'psg')}; references and "
        f"ceiling on {len(sample):,} passages: encode at its defaults fp32 batch {default_batch}, then "
        f"{precision_name(dtype)} batch {batch}{mask_text(masks)}{profile}",
    )


def encode_references(suite: Suite, sample: list[str], length: int, dtype, batch: int, forms: bool = False) -> tuple:
    """sentence-transformers' ``encode`` at its defaults (fp32, its batch), then in ``dtype`` at
    ``batch``, then the model alone in ``dtype`` at ``batch``: (default batch, the three rates, the
    bare transformer's two rates by how its mask is given, ``mask_forms``, with ``forms``; else None)."""
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
    masks = None
    try:  # an extra: a library that reads the mask otherwise must not cost the row
        masks = mask_forms(model[0].auto_model, model.tokenizer, sample, batch, length, device) if forms else None
    except Exception as exc:  # noqa: BLE001 - said in the row instead
        masks = f"not measured ({type(exc).__name__}: {str(exc)[:80]})"
    return library_default(model.encode), default, same, ceiling, masks


def mask_text(masks: tuple | str | None) -> str:
    """The row's words for ``mask_forms``' two rates (or why they are missing)."""
    if masks is None:
        return ""
    rates = masks if isinstance(masks, str) else "{:,.0f} and {:,.0f} psg/s".format(*masks)
    return (
        "; the bare transformer alone, its mask 2D (checked for padding before each forward, where the host "
        f"waits on the device) and 4D (taken as given): {rates}"
    )


def mask_forms(transformer, tokenizer, sample: list[str], batch: int, length: int, device: str) -> tuple:
    """The bare transformer alone on the same batches, its attention mask given two ways: 2D, which
    transformers checks for padding before each forward (``padding_mask.all()`` read by Python: the host
    waits there for the device, so it never queues more than one batch ahead) and skips where there is none
    (SDPA's flash kernel then runs); and the 4D boolean form it takes as given (no wait, never skipped).
    Which rate is higher says whether ifqa should pass the 4D form (docs/benchmarks.md)."""
    import torch

    def four_d(features: dict) -> dict:
        mask = features["attention_mask"].bool()
        rows, width = mask.shape
        return {**features, "attention_mask": mask[:, None, None, :].expand(rows, 1, width, width)}

    batches = device_batches(tokenizer, sample, None, batch, length, device)
    rates = []
    with torch.inference_mode():
        for form in (lambda features: features, four_d):
            rates.append(
                warmed_rate(
                    device,
                    len(sample),
                    lambda form=form: transformer(**form(batches[0])),
                    lambda form=form: [transformer(**form(features)) for features in batches],
                )
            )
    return tuple(rates)


def dpr_encoding(suite: Suite) -> dict:
    """`ifqa index dense` with DPR's passage encoder shape (BERT-base, 256 tokens, the paper's retriever),
    beside that model alone in the command's precision and batch: a heavier model than MiniLM, so the
    host's share should leave the command nearer the model alone."""
    import torch
    from transformers import AutoTokenizer, DPRContextEncoder

    from ifqa.retrieval.batching import default_batch_size

    device, n = suite.device, suite.passages
    corpus, _ = collections(suite)
    folder = suite.work.new("dense-dpr")
    release(device)
    _, seconds, _ = command(
        "index", "dense", "--corpus", corpus, "-o", folder, "--encoder", suite.folders["dpr"],
        "--max-length", DPR_LENGTH, "--no-progress", "--device", device,
    )  # fmt: skip
    precision = json.loads((folder / "manifest.json").read_text())["params"].get("precision", "fp32")
    shutil.rmtree(folder)
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(precision, torch.float32)
    model = DPRContextEncoder.from_pretrained(str(suite.folders["dpr"])).to(device, dtype).eval()
    tokenizer, batch = AutoTokenizer.from_pretrained(str(suite.folders["dpr"])), default_batch_size(device)
    sample = passage_texts(min(n, suite.size["sample_passages"]))
    ceiling = model_alone(lambda f: model(**f).pooler_output, tokenizer, sample, None, batch, DPR_LENGTH, device)
    release(device)
    rate, goal = n / seconds, GOALS["dpr"]
    unjudged = f"{n:,} psg, under the {goal['minimum']:,} the goal names" if n < goal["minimum"] else ""
    shown = f"{rate / ceiling:.0%} ({rate:,.0f} vs {ceiling:,.0f} psg/s)"
    suite.goals.judge("dpr-ceiling", rate / ceiling, goal["ceiling"], shown, unjudged)
    return row(
        f"`ifqa index dense`, {n:,} passages, DPR passage encoder ({suite.size['dpr']['hidden_size']} dimensions), "
        f"{DPR_LENGTH} tokens, {precision} batch {batch}, start-up and flat index included",
        rate,
        "psg/s",
        ceiling=ceiling,
        note=f"command {seconds:.1f} s; the model alone on {len(sample):,} passages",
    )
