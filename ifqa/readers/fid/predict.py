"""FiD inference: a checkpoint reads the passages of a run and writes predictions."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from ifqa import distributed
from ifqa.artifacts import QuestionSet, as_question_set, check_questions, read_run, write_manifest, write_predictions
from ifqa.cards import FID_CONFIG
from ifqa.devices import bf16_supported, is_cuda, pick_device
from ifqa.errors import IfqaError
from ifqa.models import check_model
from ifqa.readers.fid.data import Collator, FiDSettings
from ifqa.readers.fid.model import FiDT5, load_model


def resolve_checkpoint(path: str | Path) -> Path:
    """A training folder means its best checkpoint; any other folder is taken as it is."""
    path = Path(path)
    if (path / "best" / "config.json").exists():
        return path / "best"
    if not path.exists():  # as every command says it of a model path that is not there
        raise IfqaError("no such model folder", path)
    return check_model(path, files=("config.json",))


def predict(
    model: FiDT5,
    tokenizer,
    records: Sequence[dict],
    settings: FiDSettings,
    batch_size: int = 8,
    beams: int = 1,
    progress: bool = False,
    bf16: bool = True,
) -> list[str]:
    """Answers for ``records``, generated under bf16 autocast on a GPU that has it (as FiD trains; fp32
    generation ran at a fraction of the card's speed), in fp32 on a CPU or with ``bf16=False``."""
    import torch
    from tqdm import tqdm

    collator = Collator(tokenizer, settings)
    device = next(model.parameters()).device
    autocast = bf16 and is_cuda(str(device)) and bf16_supported(str(device))
    model.eval()
    out = []
    for start in tqdm(range(0, len(records), batch_size), desc="fid", disable=not progress):
        batch = collator.inputs(records[start : start + batch_size])
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=autocast):
            generated = model.generate(
                input_ids=batch["input_ids"].to(device),
                attention_mask=batch["attention_mask"].to(device),
                max_new_tokens=settings.answer_maxlength,
                num_beams=beams,
                do_sample=False,
            )
        out.extend(tokenizer.batch_decode(generated, skip_special_tokens=True))
    return [text.strip() for text in out]


def read_to_file(
    checkpoint: str | Path,
    questions: QuestionSet,
    run_path: str | Path,
    output: str | Path,
    batch_size: int = 8,
    beams: int = 1,
    device: str | None = None,
    n_context: int | None = None,
    progress: bool = True,
) -> list[dict]:
    from transformers import AutoTokenizer

    folder = resolve_checkpoint(checkpoint)
    saved = folder / FID_CONFIG
    settings = FiDSettings(**json.loads(saved.read_text())) if saved.exists() else FiDSettings()
    if n_context:
        settings.n_context = n_context
    world = distributed.launched()
    device = pick_device(device, world)
    questions = as_question_set(questions)
    run = read_run(run_path)
    check_questions(run_path, questions, run)
    runs = {r["qid"]: r for r in run}
    model, tokenizer = load_model(folder, device), AutoTokenizer.from_pretrained(str(folder))
    examples = questions.examples
    missing = [e.qid for e in examples if e.qid not in runs]
    if missing:
        raise IfqaError(f"{len(missing)} questions are not in the run (e.g. qid {missing[0]})", run_path)
    records = [{"question": e.question, "ctxs": runs[e.qid]["ctxs"]} for e in examples]
    started = time.time()
    if world.active:  # each rank reads its run of whole batches; rank 0 writes them all, in question order
        distributed.start(device)
        share = world.blocks(len(records), batch_size)
        mine = records[share.start : share.stop]
        try:
            with distributed.collective_errors(world):
                made = predict(model, tokenizer, mine, settings, batch_size, beams, progress and world.main)
                predictions = distributed.gather_objects(made, world)
        finally:
            distributed.stop()
    else:
        predictions = predict(model, tokenizer, records, settings, batch_size, beams, progress)
    rows = [{"qid": e.qid, "prediction": p, "raw": p} for e, p in zip(examples, predictions)]
    if not world.main:
        return rows
    write_predictions(output, rows)

    precision = "bf16" if is_cuda(device) and bf16_supported(device) else "fp32"
    write_manifest(
        output,
        questions,
        reader="fid",
        checkpoint=str(folder),
        run=str(run_path),
        settings=asdict(settings),
        beams=beams,
        precision=precision,
        seconds=round(time.time() - started, 2),
    )
    return rows
