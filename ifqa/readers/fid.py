"""Fusion-in-Decoder (Izacard & Grave, 2021) on current transformers: model, training, inference.

FiD encodes each (question, passage) pair on its own and lets the decoder attend over all of them:
``FiDT5`` folds ``(batch, passages, length)`` into ``(batch * passages, length)`` for the encoder
and unfolds the states into ``(batch, passages * length)`` for the decoder. The folding happens in
``forward``/``generate`` rather than in a wrapper module, so parameter names stay those of T5: a
checkpoint is a plain T5 checkpoint, and the original facebookresearch/FiD checkpoints (whose
wrapper put ``encoder.encoder.block.N.module.`` in the names) load after renaming their keys.
"""

from __future__ import annotations

import contextlib
import json
import logging
import random
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Sequence

import torch
from transformers import AutoTokenizer, T5ForConditionalGeneration
from transformers.modeling_outputs import BaseModelOutput

from ifqa.errors import IfqaError
from ifqa.evaluation import exact_match

log = logging.getLogger(__name__)

FID_CONFIG = "fid.json"


class FiDT5(T5ForConditionalGeneration):
    """T5 whose encoder reads each passage separately and whose decoder reads them all."""

    def encode_passages(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> BaseModelOutput:
        batch, passages, length = input_ids.shape
        states = self.encoder(input_ids=input_ids.reshape(batch * passages, length),
                              attention_mask=attention_mask.reshape(batch * passages, length)).last_hidden_state
        return BaseModelOutput(last_hidden_state=states.reshape(batch, passages * length, -1))

    def forward(self, input_ids=None, attention_mask=None, encoder_outputs=None, **kwargs):
        if input_ids is not None and input_ids.dim() == 3:
            encoder_outputs = self.encode_passages(input_ids, attention_mask)
            attention_mask = attention_mask.reshape(input_ids.shape[0], -1)
            input_ids = None
        return super().forward(input_ids=input_ids, attention_mask=attention_mask, encoder_outputs=encoder_outputs, **kwargs)

    @torch.no_grad()
    def generate(self, input_ids=None, attention_mask=None, **kwargs):
        if input_ids is not None and input_ids.dim() == 3:
            kwargs["encoder_outputs"] = self.encode_passages(input_ids, attention_mask)
            attention_mask = attention_mask.reshape(input_ids.shape[0], -1)
            input_ids = None
        return super().generate(input_ids=input_ids, attention_mask=attention_mask, **kwargs)


def rename_original_fid_keys(state_dict: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """facebookresearch/FiD state dict -> T5 names (``encoder.encoder.`` and ``.module.`` removed)."""
    renamed = {}
    for name, tensor in state_dict.items():
        if name.startswith("encoder.encoder."):
            name = "encoder." + name[len("encoder.encoder."):]
        name = name.replace(".module.", ".") if name.startswith("encoder.block.") else name
        renamed[name] = tensor
    return renamed


def load_model(path: str | Path, device: str | None = None) -> FiDT5:
    """A FiD model from our checkpoint, a T5 hub id or folder, or an original FiD checkpoint."""
    try:
        model = FiDT5.from_pretrained(str(path))
    except OSError as exc:
        raise IfqaError(f"cannot load a T5 model from {path} ({exc})") from None
    original = Path(path) / "pytorch_model.bin"
    if original.exists():
        state = torch.load(original, map_location="cpu", weights_only=True)
        if any(key.startswith("encoder.encoder.") for key in state):
            missing, unexpected = model.load_state_dict(rename_original_fid_keys(state), strict=False)
            missing = [m for m in missing if m not in ("encoder.embed_tokens.weight", "decoder.embed_tokens.weight", "lm_head.weight")]
            if missing or unexpected:
                raise IfqaError(f"not a FiD checkpoint: missing {missing[:3]}, unexpected {unexpected[:3]}", original)
            model.tie_weights()
            log.info("loaded an original facebookresearch/FiD checkpoint from %s", path)
    return model.to(device or "cpu")


# --- data -------------------------------------------------------------------------------------


@dataclass
class FiDSettings:
    n_context: int = 20
    text_maxlength: int = 250
    answer_maxlength: int = 20


def passage_texts(question: str, ctxs: Sequence[dict], n_context: int) -> list[str]:
    """FiD's input strings: ``question: Q title: T context: C`` per passage; short lists are padded."""
    texts = [f"question: {question} title: {c.get('title', '')} context: {c.get('text', '')}" for c in ctxs[:n_context]]
    while len(texts) < n_context:
        texts.append(f"question: {question} title: context:")
    return texts


class Collator:
    """Tokenizes a batch: passages padded to ``text_maxlength`` (as FiD does), targets ending in EOS."""

    def __init__(self, tokenizer, settings: FiDSettings):
        self.tokenizer, self.settings = tokenizer, settings

    def inputs(self, records: Sequence[dict]) -> dict[str, torch.Tensor]:
        texts = [t for r in records for t in passage_texts(r["question"], r["ctxs"], self.settings.n_context)]
        encoded = self.tokenizer(texts, max_length=self.settings.text_maxlength, padding="max_length", truncation=True,
                                 return_tensors="pt")
        shape = (len(records), self.settings.n_context, -1)
        return {"input_ids": encoded["input_ids"].reshape(shape), "attention_mask": encoded["attention_mask"].reshape(shape)}

    def labels(self, targets: Sequence[str]) -> torch.Tensor:
        eos = self.tokenizer.eos_token_id
        rows = []
        for target in targets:
            ids = self.tokenizer(target, add_special_tokens=True)["input_ids"][: self.settings.answer_maxlength]
            if not ids or ids[-1] != eos:
                ids = ids[: self.settings.answer_maxlength - 1] + [eos]
            rows.append(ids)
        width = max(map(len, rows))
        labels = torch.full((len(rows), width), -100, dtype=torch.long)
        for i, ids in enumerate(rows):
            labels[i, : len(ids)] = torch.tensor(ids)
        return labels


# --- inference --------------------------------------------------------------------------------


def resolve_checkpoint(path: str | Path) -> Path:
    """A training folder means its best checkpoint; any other folder is taken as it is."""
    path = Path(path)
    if (path / "best" / "config.json").exists():
        return path / "best"
    if not (path / "config.json").exists():
        raise IfqaError("not a model folder (no config.json)", path)
    return path


def predict(model: FiDT5, tokenizer, records: Sequence[dict], settings: FiDSettings, batch_size: int = 8,
            beams: int = 1, progress: bool = False) -> list[str]:
    from tqdm import tqdm

    collator = Collator(tokenizer, settings)
    device = next(model.parameters()).device
    model.eval()
    out = []
    for start in tqdm(range(0, len(records), batch_size), desc="fid", disable=not progress):
        batch = collator.inputs(records[start : start + batch_size])
        generated = model.generate(input_ids=batch["input_ids"].to(device), attention_mask=batch["attention_mask"].to(device),
                                   max_new_tokens=settings.answer_maxlength, num_beams=beams, do_sample=False)
        out.extend(tokenizer.batch_decode(generated, skip_special_tokens=True))
    return [text.strip() for text in out]


def read_to_file(checkpoint: str | Path, examples: Sequence, run_path: str | Path, output: str | Path,
                 batch_size: int = 8, beams: int = 1, device: str | None = None, n_context: int | None = None,
                 progress: bool = True, source: str = "") -> list[dict]:
    from ifqa import __version__
    from ifqa.io import write_json, write_jsonl
    from ifqa.runs import read_run

    folder = resolve_checkpoint(checkpoint)
    settings = FiDSettings(**json.loads((folder / FID_CONFIG).read_text())) if (folder / FID_CONFIG).exists() else FiDSettings()
    if n_context:
        settings.n_context = n_context
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    model, tokenizer = load_model(folder, device), AutoTokenizer.from_pretrained(str(folder))
    runs = {r["qid"]: r for r in read_run(run_path)}
    missing = [e.qid for e in examples if e.qid not in runs]
    if missing:
        raise IfqaError(f"{len(missing)} questions are not in the run (e.g. qid {missing[0]})", run_path)
    records = [{"question": e.question, "ctxs": runs[e.qid]["ctxs"]} for e in examples]
    started = time.time()
    predictions = predict(model, tokenizer, records, settings, batch_size, beams, progress)
    rows = [{"qid": e.qid, "prediction": p, "raw": p} for e, p in zip(examples, predictions)]
    write_jsonl(output, rows)
    write_json(f"{output}.manifest.json", {"ifqa": __version__, "reader": "fid", "checkpoint": str(folder),
                                           "run": str(run_path), "questions": source, "settings": asdict(settings),
                                           "beams": beams, "seconds": round(time.time() - started, 2)})
    return rows


# --- training ---------------------------------------------------------------------------------


@dataclass
class TrainConfig:
    model: str = "t5-base"
    steps: int = 15000
    lr: float = 1e-4
    batch_size: int = 1
    accumulation: int = 1
    warmup_steps: int = 1000
    weight_decay: float = 0.01
    max_grad_norm: float = 1.0
    eval_every: int = 500
    eval_batch_size: int = 8
    save_every: int | None = None
    seed: int = 0
    gradient_checkpointing: bool = False
    bf16: bool = True
    n_context: int = 20
    text_maxlength: int = 250
    answer_maxlength: int = 20


def _save_model(model, tokenizer, settings: FiDSettings, target: Path, extra: dict | None = None) -> None:
    """Write a checkpoint folder aside and swap it in, so a crash never leaves half a checkpoint."""
    tmp = target.with_name(f".{target.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    (tmp / FID_CONFIG).write_text(json.dumps(asdict(settings), indent=2))
    if extra is not None:
        torch.save(extra, tmp / "trainer_state.pt")
    old = target.with_name(f".{target.name}.old")
    shutil.rmtree(old, ignore_errors=True)
    if target.exists():
        target.rename(old)
    tmp.rename(target)
    shutil.rmtree(old, ignore_errors=True)


def _batch_order(n: int, batch_size: int, seed: int, step: int) -> list[int]:
    """The examples of optimizer micro-step ``step``: epochs are seeded permutations, so resuming at
    any step sees exactly the data an uninterrupted run would have seen."""
    per_epoch = max(1, n // batch_size)
    epoch, position = divmod(step, per_epoch)
    order = list(range(n))
    random.Random(seed * 100003 + epoch).shuffle(order)
    return order[position * batch_size : (position + 1) * batch_size]


def evaluate_em(model, tokenizer, records: Sequence[dict], settings: FiDSettings, batch_size: int) -> float:
    predictions = predict(model, tokenizer, records, settings, batch_size)
    return 100.0 * sum(max(exact_match(p, a) for a in r["answers"]) for p, r in zip(predictions, records)) / max(1, len(records))


def train(train_run: str | Path, dev_run: str | Path | None, output: str | Path, config: TrainConfig,
          device: str | None = None, progress: bool = True, stop_after: int | None = None) -> dict:
    """Train FiD; resumes from ``output/last`` when it exists. Returns the training state.

    ``stop_after`` ends this invocation after that many steps (state saved), for time-limited jobs.
    """
    from tqdm import tqdm
    from transformers import get_linear_schedule_with_warmup

    from ifqa.runs import read_run

    output = Path(output)
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    settings = FiDSettings(config.n_context, config.text_maxlength, config.answer_maxlength)
    train_records = read_run(train_run)
    dev_records = read_run(dev_run) if dev_run else []
    if not train_records:
        raise IfqaError("no training questions", train_run)
    last = output / "last"
    resuming = (last / "trainer_state.pt").exists()
    if resuming:
        saved = json.loads((output / "train_config.json").read_text())
        if saved != asdict(config):
            raise IfqaError("this folder holds a run with other settings; use the same options or a new --output", output)
    else:
        output.mkdir(parents=True, exist_ok=True)
        (output / "train_config.json").write_text(json.dumps(asdict(config), indent=2))
    torch.manual_seed(config.seed)
    source = last if resuming else config.model
    model = load_model(source, device)
    tokenizer = AutoTokenizer.from_pretrained(str(source))
    if config.gradient_checkpointing:
        model.gradient_checkpointing_enable()
        model.config.use_cache = False
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    scheduler = get_linear_schedule_with_warmup(optimizer, config.warmup_steps, config.steps)
    state = {"step": 0, "best_em": -1.0, "log": []}
    if resuming:
        saved_state = torch.load(last / "trainer_state.pt", map_location="cpu", weights_only=False)
        optimizer.load_state_dict(saved_state["optimizer"])
        scheduler.load_state_dict(saved_state["scheduler"])
        torch.set_rng_state(saved_state["rng"])
        if device.startswith("cuda") and saved_state.get("cuda_rng") is not None:
            torch.cuda.set_rng_state(saved_state["cuda_rng"])
        state = saved_state["state"]
        log.info("resuming at step %d", state["step"])
    collator = Collator(tokenizer, settings)
    use_bf16 = config.bf16 and device.startswith("cuda")
    bar = tqdm(total=config.steps, initial=state["step"], desc="train fid", disable=not progress)

    def checkpoint_state() -> dict:
        return {"optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(), "rng": torch.get_rng_state(),
                "cuda_rng": torch.cuda.get_rng_state() if device.startswith("cuda") else None, "state": state}

    model.train()
    goal = min(config.steps, state["step"] + stop_after) if stop_after else config.steps
    while state["step"] < goal:
        step = state["step"]
        loss_total = 0.0
        for micro in range(config.accumulation):
            indices = _batch_order(len(train_records), config.batch_size, config.seed, step * config.accumulation + micro)
            batch = [train_records[i] for i in indices]
            choice = random.Random(f"{config.seed}:{step}:{micro}")
            inputs = collator.inputs(batch)
            labels = collator.labels([choice.choice(r["answers"]) for r in batch])
            with torch.autocast("cuda", dtype=torch.bfloat16) if use_bf16 else contextlib.nullcontext():
                loss = model(input_ids=inputs["input_ids"].to(device), attention_mask=inputs["attention_mask"].to(device),
                             labels=labels.to(device)).loss / config.accumulation
            loss.backward()
            loss_total += float(loss.detach())
        torch.nn.utils.clip_grad_norm_(model.parameters(), config.max_grad_norm)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        state["step"] = step + 1
        entry: dict[str, Any] = {"step": state["step"], "loss": round(loss_total, 6)}
        done = state["step"] == config.steps
        if dev_records and (state["step"] % config.eval_every == 0 or done):
            entry["dev_em"] = evaluate_em(model, tokenizer, dev_records, settings, config.eval_batch_size)
            model.train()
            if entry["dev_em"] > state["best_em"]:
                state["best_em"] = entry["dev_em"]
                _save_model(model, tokenizer, settings, output / "best")
        state["log"].append(entry)
        bar.update(1)
        bar.set_postfix(loss=entry["loss"], em=entry.get("dev_em", state["best_em"]), refresh=False)
        if done or state["step"] == goal or (config.save_every and state["step"] % config.save_every == 0) or "dev_em" in entry:
            _save_model(model, tokenizer, settings, last, checkpoint_state())
    bar.close()
    if state["step"] < config.steps:
        log.info("stopped at step %d of %d; rerun the same command to continue", state["step"], config.steps)
        return state
    if not dev_records:
        _save_model(model, tokenizer, settings, output / "best")
    (output / "train_log.jsonl").write_text("".join(json.dumps(e) + "\n" for e in state["log"]))
    return state
