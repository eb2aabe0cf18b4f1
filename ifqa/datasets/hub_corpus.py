"""Passage collections from the Hugging Face Hub or a local folder in Hub layout (``--corpus hf:...``),
streamed once into the passages JSONL every engine reads, named by the dataset's content fingerprint so a
second index reuses it. Its options and manifest: docs/data.md."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

from ifqa.artifacts import UniqueIds
from ifqa.datasets.hub import HubSpec, choose_split, find_column, load_splits, quiet_datasets, reading
from ifqa.errors import IfqaError
from ifqa.hub_reach import is_offline
from ifqa.io import atomic_write, content_digest, file_sha256, nfc, unpaired_surrogate, write_json
from ifqa.paths import cache_dir

#: Where a passage's fields are looked for (DPR's, BEIR's and FlashRAG's corpora among them).
CANDIDATES = {
    "id": ("id", "docid", "_id", "pid", "doc_id"),
    "title": ("title",),
    "text": ("text", "contents", "passage", "content"),
}
REQUIRED = ("id", "text")
BATCH = 10_000


def corpus_file(name: str, progress: bool = True) -> Path:
    """The passages JSONL of an ``hf:`` corpus, made on first use. A row without an id or a text, two
    rows with one id, a file that cannot be read: one line naming the spec and the row (``hub.reading``,
    the gate of every Hub read), and nothing is written."""
    spec = HubSpec.parse(name, CANDIDATES)
    with reading(name, spec):
        return _corpus_file(spec, name, progress)


def _corpus_file(spec: HubSpec, name: str, progress: bool) -> Path:
    from tqdm import tqdm

    files = data_files(spec, name)
    # no files to resolve: a Hub dataset read offline from datasets' cache, its Arrow tables memory-mapped
    cached = load_splits(spec, name) if not files and is_offline() else None
    chosen = choose_split(spec, cached if cached is not None else files, name, ("train",))
    if cached is not None:
        files = {chosen: [table["filename"] for table in cached[chosen].cache_files]}
    parquet = [Path(f) for f in files[chosen] if str(f).endswith(".parquet") and Path(f).is_file()]
    local = len(parquet) == len(files[chosen])
    if local:
        import pyarrow.parquet as pq

        columns = list(pq.ParquetFile(str(parquet[0])).schema_arrow.names)
    else:
        data = cached[chosen] if cached is not None else load_splits(spec, name, streaming=True)[chosen]
        columns = list(data.column_names or [])
    mapped = {ours: find_column(spec, ours, columns, name, CANDIDATES, REQUIRED) for ours in CANDIDATES}
    wanted = [c for c in (mapped["id"], mapped["title"], mapped["text"]) if c]
    fingerprint = content_digest(files[chosen], json.dumps([name, chosen]))  # a rewritten file is a new corpus
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", spec.name.strip("/"))[-80:]
    target = cache_dir() / "corpora" / f"{slug}-{chosen}-{fingerprint[:16]}.jsonl"
    manifest = Path(f"{target}.manifest.json")
    if target.exists() and manifest.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    batches = parquet_batches(parquet, wanted) if local else data.select_columns(wanted).iter(batch_size=BATCH)
    count = 0
    unique = UniqueIds(target)
    with atomic_write(target) as handle, tqdm(desc="corpus", unit="psg", disable=not progress) as bar:
        for batch in batches:
            ids, texts = batch[mapped["id"]], batch[mapped["text"]]
            titles = batch[mapped["title"]] if mapped["title"] else [""] * len(ids)
            lines = []
            for pid, title, text in zip(ids, titles, texts):
                if pid is None or str(pid) == "" or not isinstance(text, str) or not text.strip():
                    raise IfqaError(
                        f"{name}: row {count} has no id or no text (columns {mapped['id']}, {mapped['text']})"
                    )
                if unpaired_surrogate(str(pid), str(title or ""), text):
                    raise IfqaError(f"{name}: row {count} holds text that is not Unicode")
                record = {"id": str(pid), "title": nfc(str(title or "")), "text": nfc(text)}
                unique.add(record["id"])
                lines.append(json.dumps(record, ensure_ascii=False))
                count += 1
            handle.write("\n".join(lines) + "\n")
            bar.update(len(lines))
        if not count:  # nothing would be left of the file: said against the spec, not the cache's copy
            raise IfqaError(f"{name}: split {chosen!r} holds no rows (no passages)")
    try:  # named by the spec and its rows (the file holds them in order), not by this cache's copy
        unique.check(lambda: _ids(target), name)
    except IfqaError:
        target.unlink(missing_ok=True)
        raise
    write_json(
        manifest,
        {
            "sha256": file_sha256(target),
            "passages": count,
            "hub": {
                "id": spec.name,
                "config": spec.config,
                "split": chosen,
                "revision": spec.revision,
                "fingerprint": fingerprint,
                "fields": {k: v for k, v in mapped.items() if v},
            },
        },
    )
    return target


def _ids(path: Path) -> Iterator[str]:
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            yield json.loads(line)["id"]


def data_files(spec: HubSpec, source: str) -> dict[str, list]:
    """The dataset's files by split, as ``datasets`` resolves its card (nothing is read yet)."""
    datasets = quiet_datasets(spec)
    local = Path(spec.name).expanduser()
    try:
        builder = datasets.load_dataset_builder(
            str(local) if local.exists() else spec.name, spec.config, revision=spec.revision
        )
    except Exception:  # noqa: BLE001 - every way it fails is load_splits's to say, in one line
        load_splits(spec, source, streaming=True)
        raise
    files = {split: list(paths) for split, paths in (builder.config.data_files or {}).items()}
    return files


def parquet_batches(files: list[Path], columns: list[str]) -> Iterator[dict[str, list]]:
    """Local Parquet files read in batches with pyarrow: in bounded memory (about 180 MB for a
    million passages, where ``datasets``' memory-mapped Arrow cache held a gigabyte resident)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    pa.set_memory_pool(pa.system_memory_pool())  # freed batches go back to the system, not a pool
    for path in files:
        handle = pq.ParquetFile(str(path), pre_buffer=False, buffer_size=1 << 20)
        for batch in handle.iter_batches(batch_size=BATCH, columns=columns, use_threads=False):
            yield batch.to_pydict()
