"""Reranking a run file (``ifqa rerank``, ``Reranker.rerank_run``): the run's questions re-scored in
groups by any reranker, resumable through a ``.partial`` file of the questions done so far, which a
rerun continues from and a finished run replaces."""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path

from ifqa.artifacts import read_manifest, read_run, recorded_questions, write_manifest
from ifqa.errors import IfqaError, restoring
from ifqa.eval.passages import run_record
from ifqa.io import atomic_write, exclusive
from ifqa.retrieval.hits import reorder

log = logging.getLogger(__name__)


def questions_per_group(reranker) -> int:
    """Questions scored together: enough pairs to fill several batches, so lengths bucket well."""
    return max(1, 8 * getattr(reranker, "batch_rows", 1) // reranker.depth)


def read_rerankable(run_path: str | Path, depth: int) -> list:
    """The run's records, refused with the line of the first passage (within ``depth``) without text."""
    records = read_run(run_path)
    for number, record in enumerate(records, start=1):
        for ctx in record["ctxs"][:depth]:
            if not str(ctx.get("text") or "").strip():
                raise IfqaError(
                    f"passage {ctx.get('id')!r} has no text; rerank needs passage texts "
                    "(make the run with `ifqa retrieve`, or `ifqa convert --corpus`)",
                    run_path,
                    number,
                )
    return records


def rerank_run(
    run_path: str | Path, reranker, output: str | Path, questions, progress: bool = True, records: list | None = None
) -> list[dict]:
    """Rerank every question of a run; resumable (finished questions are kept in ``<output>.partial``).
    Returns the records written (the run is parsed once: ``records``, when the caller has them, and
    a summary is made from what this returns, never by reading the output again).

    Flags (``has_answer``, ``gold``) are those of ``questions``: the run's own when its manifest says
    it was made for them, else recomputed; the output and its manifest appear only when every
    question is done.
    """
    with exclusive(output, "another ifqa rerank is writing this output; wait for it, or name another --output"):
        return _rerank_run(run_path, reranker, output, questions, progress, records)


def _rerank_run(run_path, reranker, output, questions, progress: bool, records: list | None) -> list[dict]:
    records = records if records is not None else read_rerankable(run_path, reranker.depth)
    examples = {e.qid: e for e in questions.examples}
    output = Path(output)
    partial = output.with_name(output.name + ".partial")
    for record in records:  # before anything is written: a refused start leaves nothing
        if record["qid"] not in examples:
            raise IfqaError(f"question {record['qid']!r} is not in {questions.name}", run_path)
    header = {"partial_of": str(run_path), "run_bytes": os.path.getsize(run_path), "reranker": reranker.describe()}
    output.parent.mkdir(parents=True, exist_ok=True)
    fresh = not partial.exists()
    done = _read_partial(partial, header, {record["qid"] for record in records})
    started = time.time()
    todo = [record for record in records if record["qid"] not in done]

    recorded = recorded_questions(run_path)  # a run made for these very questions: its flags are theirs
    flags_kept = bool(recorded) and recorded.get("id") == questions.identity
    try:
        written = _rerank_groups(reranker, todo, examples, partial, done, len(records), progress, flags_kept)
    except IfqaError:
        if fresh and not done:  # failed before any question was finished: nothing to resume from
            partial.unlink(missing_ok=True)
        raise
    ordered = [done[r["qid"]] for r in records]
    with atomic_write(output) as handle:  # the lines as encoded for the partial file (a resumed one: again)
        handle.writelines(
            written.get(r["qid"]) or json.dumps(done[r["qid"]], ensure_ascii=False) + "\n" for r in records
        )
    previous = read_manifest(run_path) or {}
    write_manifest(
        output,
        questions,
        n=len(ordered),
        **{key: previous.get(key) for key in ("k", "query_mode", "indexes", "fusion", "weights")},
        rerankers=list(previous.get("rerankers") or []) + [reranker.describe()],
        source_run=str(run_path),
        seconds=round(time.time() - started, 2),
    )
    os.unlink(partial)
    return ordered


def _rerank_groups(
    reranker, todo: list, examples: dict, partial: Path, done: dict, total: int, progress: bool, flags_kept: bool
) -> dict[str, str]:
    """Score ``todo`` a group of questions at a time, each finished question's line appended to ``partial``;
    returns those lines by question (the output is made of them: each record is encoded once).
    ``flags_kept``: the run was made for these questions, so its passages' flags are reused
    (``run_record``) instead of computed between the device's batches."""
    from tqdm import tqdm

    with (
        open(partial, "a", encoding="utf-8") as handle,
        tqdm(total=total, initial=len(done), desc="rerank", unit="q", disable=not progress) as bar,
    ):
        per_group = questions_per_group(reranker)
        groups = [todo[start : start + per_group] for start in range(0, len(todo), per_group)]
        items = [
            [
                (
                    record["question"],
                    [c["text"] for c in record["ctxs"][: reranker.depth]],
                    [float(c.get("score") or 0.0) for c in record["ctxs"][: reranker.depth]],
                )
                for record in group
            ]
            for group in groups
        ]
        written = {}
        for group, scores in zip(groups, reranker.score_groups(items)):
            for record, values in zip(group, scores):
                ranked = reorder(record["ctxs"], values, lambda ctx, score: {**ctx, "score": round(score, 6)})
                line = run_record(examples[record["qid"]], ranked, record if flags_kept else None)
                written[record["qid"]] = json.dumps(line, ensure_ascii=False) + "\n"
                handle.write(written[record["qid"]])
                done[record["qid"]] = line
            handle.flush()
            bar.update(len(group))
    return written


def _read_partial(path: Path, header: dict, qids: set[str]) -> dict[str, dict]:
    """Questions finished by an interrupted rerank of the same run with the same reranker (else
    none: the file is started afresh); a torn last line is dropped and redone, a line that is no
    reranked question of this run (a hand edit) is one line naming it."""
    done: dict[str, dict] = {}
    if path.exists():
        with open(path, "rb+") as handle, restoring(path, "delete it to rerank from the start"):
            first = handle.readline()
            try:
                same = json.loads(first) == header
            except ValueError:
                same = False
            good = len(first) if same else 0
            for number, line in enumerate(handle if same else (), start=2):
                try:
                    record = json.loads(line)
                except ValueError:
                    break
                if not (isinstance(record, dict) and record.get("qid") in qids and type(record.get("ctxs")) is list):
                    raise ValueError(f"line {number} is no reranked question of this run")
                done[record["qid"]] = record
                good += len(line)
            handle.truncate(good)
        if done:
            log.info("%s: resuming after %d reranked questions", path, len(done))
    if not done:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(header) + "\n", encoding="utf-8")
    return done
