import json
import os

import pytest
import torch
from transformers import AutoTokenizer, T5ForConditionalGeneration
from transformers.modeling_outputs import BaseModelOutput

from ifqa.devices import Device
from ifqa.models import load_weights
from ifqa.readers.fid import data as fid_data
from ifqa.readers.fid import model as fid_model
from ifqa.readers.fid import predict as fid_predict
from ifqa.training import fid as fid_train
from ifqa.training.recipes import FiDRecipe
from tests.readers.tiny_models import tiny_t5

TOY = [
    ("If the Gulf dried up, which state would border Alabama to the south?", "Florida"),
    ("If the strait were land, which country would border Alaska?", "Russia"),
    ("If Achilles spared him, which hero would survive?", "Hector"),
    ("Where would Allan Dwan have lived?", "Toronto"),
]


@pytest.fixture(scope="module")
def t5_dir(tmp_path_factory):
    return tiny_t5(tmp_path_factory.mktemp("t5"))


@pytest.fixture
def toy_run(tmp_path):
    path = tmp_path / "toy.jsonl"
    path.write_text(
        "".join(
            json.dumps(
                {
                    "qid": str(i),
                    "question": q,
                    "answers": [a],
                    "ctxs": [
                        {
                            "id": f"{i}-{j}",
                            "title": f"T{j}",
                            "text": f"{a} is mentioned in passage {j}" if j == i % 2 else "unrelated text",
                        }
                        for j in range(2)
                    ],
                }
            )
            + "\n"
            for i, (q, a) in enumerate(TOY)
        )
    )
    return path


@pytest.fixture
def t5_without_dropout(t5_dir, tmp_path):
    """The tiny T5 with dropout off: compiled code draws its dropout masks from its own generator,
    so compiled and eager losses are compared without it."""
    model = fid_model.FiDT5.from_pretrained(str(t5_dir))
    model.config.dropout_rate = 0.0
    model.save_pretrained(tmp_path / "t5")
    AutoTokenizer.from_pretrained(str(t5_dir)).save_pretrained(tmp_path / "t5")
    return tmp_path / "t5"


@pytest.mark.numerics
def test_forward_equals_a_hand_computation(t5_dir):
    model = fid_model.FiDT5.from_pretrained(str(t5_dir)).eval()
    torch.manual_seed(1)
    ids = torch.randint(4, 200, (2, 3, 6))
    mask = torch.ones_like(ids)
    mask[0, 1, 4:] = 0  # padding inside the second passage of the first question
    mask[1, 2, 2:] = 0
    labels = torch.randint(4, 200, (2, 4))
    fused = model(input_ids=ids, attention_mask=mask, labels=labels)
    # by hand: each passage through the encoder alone, states concatenated in passage order
    states, masks = [], []
    for b in range(2):
        row = [
            model.encoder(input_ids=ids[b, n][None], attention_mask=mask[b, n][None]).last_hidden_state
            for n in range(3)
        ]
        states.append(torch.cat(row, dim=1))
        masks.append(mask[b].reshape(1, -1))
    expected = T5ForConditionalGeneration.forward(
        model, encoder_outputs=BaseModelOutput(torch.cat(states)), attention_mask=torch.cat(masks), labels=labels
    )
    assert torch.allclose(fused.logits, expected.logits, atol=1e-5)
    assert torch.allclose(fused.loss, expected.loss, atol=1e-6)
    # masked positions do not matter; unmasked ones do
    changed = ids.clone()
    changed[0, 1, 5] = 7
    assert torch.allclose(model(input_ids=changed, attention_mask=mask, labels=labels).logits, fused.logits, atol=1e-6)
    changed[0, 1, 0] = 7
    assert not torch.allclose(
        model(input_ids=changed, attention_mask=mask, labels=labels).logits, fused.logits, atol=1e-4
    )


def test_collator_shapes_prefixes_and_padding(t5_dir):
    tokenizer = AutoTokenizer.from_pretrained(str(t5_dir))
    collator = fid_data.Collator(tokenizer, fid_data.FiDSettings(n_context=3, text_maxlength=24, answer_maxlength=5))
    batch = collator.inputs([{"question": "q one", "ctxs": [{"title": "A", "text": "first text"}]}])
    assert batch["input_ids"].shape == (1, 3, 24)
    first = tokenizer.decode(batch["input_ids"][0, 0], skip_special_tokens=True)
    assert first.startswith("question: q one title: A context: first text")
    labels = collator.labels(["Florida", "a much longer answer than five tokens"])
    assert labels.shape[1] <= 5 and (labels[labels != -100] >= 0).all()
    assert labels[0][labels[0] != -100][-1] == tokenizer.eos_token_id


def test_cli_training_overfits_and_the_checkpoint_reproduces_predictions(cli, t5_dir, toy_run, tmp_path):
    env = {**os.environ, "IFQA_CACHE_DIR": str(tmp_path / "cache")}
    out = tmp_path / "fid"
    result = cli(
        "train",
        "--reader",
        "fid",
        "--run",
        toy_run,
        "--model",
        t5_dir,
        "--output",
        out,
        "--steps",
        "120",
        "--lr",
        "0.01",
        "--batch-size",
        "2",
        "--warmup-steps",
        "5",
        "--eval-every",
        "40",
        "--n-context",
        "2",
        "--text-maxlength",
        "40",
        "--answer-maxlength",
        "8",
        "--no-progress",
        env=env,
    )
    assert result.returncode == 0, result.stderr
    assert "step 120" in result.stdout
    log = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]
    assert log[-1]["loss"] < log[0]["loss"] / 5
    questions = tmp_path / "toy.json"
    questions.write_text(json.dumps([{"idx": i, "question": q, "answers": [a]} for i, (q, a) in enumerate(TOY)]))
    predictions = tmp_path / "pred.jsonl"
    result = cli(
        "read",
        "--reader",
        "fid",
        "--checkpoint",
        out,
        "--run",
        toy_run,
        "--questions",
        questions,
        "-o",
        predictions,
        "--batch-size",
        "3",
        "--no-progress",
        env=env,
    )
    assert result.returncode == 0, result.stderr
    from_disk = [json.loads(line)["prediction"] for line in predictions.read_text().splitlines()]
    assert from_disk == [a for _, a in TOY]
    model = fid_model.load_model(out / "best")
    tokenizer = AutoTokenizer.from_pretrained(str(out / "best"))
    records = [json.loads(line) for line in toy_run.read_text().splitlines()]
    settings = fid_data.FiDSettings(n_context=2, text_maxlength=40, answer_maxlength=8)
    assert fid_predict.predict(model, tokenizer, records, settings, batch_size=1) == from_disk


@pytest.mark.numerics
@pytest.mark.parametrize("workers", ["0", "2"])
def test_resume_gives_the_same_next_losses(t5_dir, toy_run, tmp_path, monkeypatch, workers):
    """Resumed losses equal the uninterrupted run's, with batches prepared here or by feed workers (the
    default on a GPU), whose start once moved the dropout stream (``feeding``)."""
    monkeypatch.setenv("IFQA_FEED_WORKERS", workers)
    config = FiDRecipe(
        model=str(t5_dir),
        steps=6,
        lr=1e-3,
        batch_size=2,
        warmup_steps=1,
        n_context=2,
        text_maxlength=32,
        answer_maxlength=6,
    )
    straight = fid_train.train(toy_run, None, tmp_path / "a", config, "cpu", progress=False)
    first = fid_train.train(toy_run, None, tmp_path / "b", config, "cpu", progress=False, stop_after=3)
    assert first["step"] == 3 and not (tmp_path / "b" / "best").exists()
    saved = tmp_path / "b" / "train_config.json"  # as earlier versions wrote it: precision as fp32 (or bf16),
    legacy = json.loads(saved.read_text())  # no kind, no settings added since
    legacy["fp32"] = legacy.pop("precision") == "fp32"
    for added in ("kind", "epochs", "dev_questions"):
        legacy.pop(added)
    saved.write_text(json.dumps(legacy))
    resumed = fid_train.train(toy_run, None, tmp_path / "b", config, "cpu", progress=False)
    assert [e["loss"] for e in resumed["log"]] == pytest.approx([e["loss"] for e in straight["log"]], abs=1e-6)
    other = FiDRecipe(**{**config.__dict__, "lr": 5e-4})
    with pytest.raises(Exception, match="other settings"):
        fid_train.train(toy_run, None, tmp_path / "b", other, "cpu", progress=False)


def test_loads_an_original_fid_checkpoint(t5_dir, tmp_path):
    model = fid_model.FiDT5.from_pretrained(str(t5_dir)).eval()
    original = {}
    for name, tensor in model.state_dict().items():  # the layout facebookresearch/FiD saves
        if name.startswith("encoder.block."):
            index, rest = name[len("encoder.block.") :].split(".", 1)
            name = f"encoder.encoder.block.{index}.module.{rest}"
        elif name.startswith("encoder."):
            name = "encoder." + name
        original[name] = tensor.clone()
    folder = tmp_path / "fid_original"
    folder.mkdir()
    (folder / "config.json").write_text((t5_dir / "config.json").read_text())
    torch.save(original, folder / "pytorch_model.bin")
    loaded = fid_model.load_model(folder).eval()
    ids = torch.randint(4, 200, (1, 2, 5))
    mask = torch.ones_like(ids)
    assert torch.equal(
        loaded.generate(input_ids=ids, attention_mask=mask, max_new_tokens=4),
        model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=4),
    )


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_bf16_training_step_on_gpu(t5_dir, toy_run, tmp_path):
    config = FiDRecipe(
        model=str(t5_dir),
        steps=2,
        lr=1e-3,
        batch_size=2,
        warmup_steps=1,
        n_context=2,
        text_maxlength=32,
        answer_maxlength=6,
        gradient_checkpointing=True,
        no_compile=True,  # bf16 and checkpointing here; compiling on CUDA is the next test's (one compile a run)
    )
    state = fid_train.train(toy_run, None, tmp_path / "gpu", config, "cuda", progress=False)
    assert state["step"] == 2 and all(e["loss"] == e["loss"] for e in state["log"])


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_compiled_training_on_gpu_follows_eager_and_reads_in_bf16(t5_without_dropout, toy_run, tmp_path):
    """On CUDA, where compiling is the default: the compiled losses follow the eager ones (bf16, so
    within rounding), and the first decoding step under bf16 autocast, as generation runs, scores as in fp32."""
    common = dict(
        model=str(t5_without_dropout),
        steps=4,
        lr=1e-3,
        batch_size=2,
        warmup_steps=1,
        n_context=2,
        text_maxlength=32,
        answer_maxlength=6,
    )
    eager = fid_train.train(
        toy_run, None, tmp_path / "eager", FiDRecipe(**common, no_compile=True), "cuda", progress=False
    )
    compiled = fid_train.train(toy_run, None, tmp_path / "compiled", FiDRecipe(**common), "cuda", progress=False)
    assert [e["loss"] for e in compiled["log"]] == pytest.approx([e["loss"] for e in eager["log"]], rel=2e-2, abs=2e-2)
    model = fid_model.FiDT5.from_pretrained(str(t5_without_dropout)).to("cuda")
    tokenizer = AutoTokenizer.from_pretrained(str(t5_without_dropout))
    records = [json.loads(line) for line in toy_run.read_text().splitlines()]
    settings = fid_data.FiDSettings(n_context=2, text_maxlength=32, answer_maxlength=6)
    batch = {k: v.to("cuda") for k, v in fid_data.Collator(tokenizer, settings).inputs(records).items()}
    start = torch.full((len(records), 1), model.config.decoder_start_token_id, device="cuda")
    with torch.inference_mode():
        fp32 = model(**batch, decoder_input_ids=start).logits.float()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            bf16 = model(**batch, decoder_input_ids=start).logits.float()
    assert torch.allclose(
        bf16, fp32, rtol=5e-2, atol=5e-2 * fp32.abs().max().item()
    )  # random weights: near-ties may flip a token
    assert len(fid_predict.predict(model, tokenizer, records, settings, bf16=True)) == len(records)


@pytest.mark.heavy  # a minute of compiling on 2 CPU cores; the GPU suite runs it where compiling is the default
def test_compiled_training_equals_eager_and_resumes(t5_without_dropout, toy_run, tmp_path):
    """torch.compile (the default on CUDA) changes the speed, not the losses; a compiled run resumes
    an eager one (compiling is not a setting of the run). Compiled dropout draws its masks from its
    own generator, so the comparison runs without dropout."""
    from ifqa.devices import compile_unavailable

    if compile_unavailable("cpu"):
        pytest.skip(compile_unavailable("cpu"))
    config = FiDRecipe(
        model=str(t5_without_dropout),
        steps=4,
        lr=1e-3,
        batch_size=2,
        warmup_steps=1,
        n_context=2,
        text_maxlength=32,
        answer_maxlength=6,
    )
    eager = fid_train.train(toy_run, None, tmp_path / "eager", config, "cpu", progress=False)
    compiled_config = FiDRecipe(**{**config.__dict__, "compile": True})
    first = fid_train.train(toy_run, None, tmp_path / "compiled", config, "cpu", progress=False, stop_after=2)
    assert first["step"] == 2
    compiled = fid_train.train(toy_run, None, tmp_path / "compiled", compiled_config, "cpu", progress=False)
    assert [e["loss"] for e in compiled["log"]] == pytest.approx([e["loss"] for e in eager["log"]], rel=1e-4, abs=1e-5)


def test_compile_settings_are_checked_before_any_work(t5_dir, toy_run, tmp_path, monkeypatch):
    from ifqa import devices
    from ifqa.errors import IfqaError

    both = FiDRecipe(model=str(t5_dir), steps=1, compile=True, no_compile=True)
    with pytest.raises(IfqaError, match="--compile and --no-compile"):
        fid_train.train(toy_run, None, tmp_path / "a", both, "cpu", progress=False)
    monkeypatch.setattr(devices, "compile_unavailable", lambda device: "no C++ compiler (g++) found")
    asked = FiDRecipe(model=str(t5_dir), steps=1, compile=True)
    with pytest.raises(IfqaError, match="--compile: no C\\+\\+ compiler"):
        fid_train.train(toy_run, None, tmp_path / "b", asked, "cpu", progress=False)
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_a_compile_that_cannot_work_is_found_by_compiling_before_any_work(t5_dir, toy_run, tmp_path, monkeypatch):
    """The compiler is there by name but does not work: the test compile (once per process) finds it,
    so --compile is one line before the model loads, and a default compile trains eagerly."""
    import torch._dynamo
    import torch._inductor.config as inductor_config

    from ifqa import devices
    from ifqa.errors import IfqaError
    from ifqa.training.loop import compiles

    monkeypatch.setattr(inductor_config.cpp, "cxx", ("no-such-compiler-here",))
    monkeypatch.setattr(inductor_config, "fx_graph_cache", False)  # nothing compiled earlier is reused
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    torch._dynamo.reset()
    devices._compile_probe.cache_clear()
    try:
        reason = devices.compile_unavailable("cpu")
        assert reason and reason.startswith("a test compile failed") and "\n" not in reason
        asked = FiDRecipe(model=str(t5_dir), steps=1, compile=True)
        with pytest.raises(IfqaError, match="--compile: a test compile failed"):
            fid_train.train(toy_run, None, tmp_path / "c", asked, "cpu", progress=False)
        assert not (tmp_path / "c").exists()
        monkeypatch.setattr(devices, "compile_unavailable", lambda device: reason)
        assert compiles(FiDRecipe(model=str(t5_dir), steps=1), Device("cuda")) is False  # the default: eager
    finally:
        devices._compile_probe.cache_clear()
        torch._dynamo.reset()


def test_a_missing_model_folder_leaves_nothing(cli, toy_run, tmp_path):
    out = tmp_path / "fid"
    result = cli("train", "fid", "--run", toy_run, "--model", tmp_path / "no-such-model", "-o", out, "--steps", "1")
    assert result.returncode == 1 and "no such model folder" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and not out.exists()


def test_a_run_an_earlier_ifqa_saved_is_never_trained_over(cli, t5_dir, toy_run, tmp_path):
    """Its state in last/trainer_state.pt, which this version does not resume: one line, the folder as it was."""
    out = tmp_path / "fid"
    (out / "last").mkdir(parents=True)
    (out / "last" / "trainer_state.pt").write_bytes(b"an earlier run's state")
    (out / "train_config.json").write_text("{}")
    before = sorted((p.name, p.read_bytes()) for p in out.rglob("*") if p.is_file())
    result = cli("train", "fid", "--run", toy_run, "--model", t5_dir, "-o", out, "--steps", "1")
    assert result.returncode == 1 and "an earlier ifqa saved (last/trainer_state.pt)" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert sorted((p.name, p.read_bytes()) for p in out.rglob("*") if p.is_file()) == before


@pytest.mark.parametrize("stop", ["interrupt", "out of memory"])
def test_interrupted_training_keeps_whole_steps(t5_dir, toy_run, tmp_path, monkeypatch, stop):
    """A stop inside a step (Ctrl-C, SIGTERM, a GPU out of memory) saves the steps before it; the same
    command resumes as if nothing happened. Out of memory is one line naming the batch size."""
    from ifqa.errors import IfqaError

    config = FiDRecipe(
        model=str(t5_dir),
        steps=4,
        lr=1e-3,
        batch_size=2,
        warmup_steps=1,
        n_context=2,
        text_maxlength=32,
        answer_maxlength=6,
    )
    straight = fid_train.train(toy_run, None, tmp_path / "a", config, "cpu", progress=False)
    real_step, calls = torch.optim.AdamW.step, []

    def failing_step(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt if stop == "interrupt" else torch.OutOfMemoryError("CUDA out of memory")
        return real_step(self, *args, **kwargs)

    monkeypatch.setattr(torch.optim.AdamW, "step", failing_step)
    expected = (
        pytest.raises(KeyboardInterrupt)
        if stop == "interrupt"
        else pytest.raises(IfqaError, match="ran out of memory on a batch of 2 questions x 2 passages; lower")
    )
    with expected:
        fid_train.train(toy_run, None, tmp_path / "b", config, "cpu", progress=False)
    monkeypatch.setattr(torch.optim.AdamW, "step", real_step)
    saved = load_weights(tmp_path / "b" / "state" / "trainer.pt")
    assert saved["step"] == 2
    resumed = fid_train.train(toy_run, None, tmp_path / "b", config, "cpu", progress=False)
    assert [e["loss"] for e in resumed["log"]] == pytest.approx([e["loss"] for e in straight["log"]], abs=1e-6)


class _Planted:
    """Unpickling this runs code: what a crafted trainer_state.pt would do."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_a_crafted_trainer_state_runs_no_code(tmp_path):
    from ifqa.errors import IfqaError, restoring
    from ifqa.models import load_weights

    marker = tmp_path / "pwned"
    path = tmp_path / "trainer_state.pt"
    torch.save({"state": _Planted(marker)}, path)
    with pytest.raises(IfqaError, match="not a resume state this run can continue from"), restoring(path, "x"):
        load_weights(path)
    assert not marker.exists()


def test_the_batch_size_defaults_by_device_and_the_run_records_it(t5_without_dropout, toy_run, tmp_path):
    """8 questions a step fill a GPU (the speed goal is measured there at 8); 1 on a CPU; without
    --batch-size each rank takes that many (8 GPUs: 64 a step, not 8 GPUs of one question each), a
    given --batch-size stays the global batch. What the run trained with is recorded, so a resume
    compares like with like and a run says how it was trained."""
    kind = fid_train.KIND
    assert kind.batched(FiDRecipe(), True, 1).batch_size == 8 and kind.batched(FiDRecipe(), False, 1).batch_size == 1
    assert kind.batched(FiDRecipe(), True, 8).batch_size == 64 and kind.batched(FiDRecipe(), False, 2).batch_size == 2
    given = FiDRecipe(batch_size=3)
    assert kind.batched(given, True, 1).batch_size == 3 == kind.batched(given, True, 8).batch_size
    config = FiDRecipe(model=str(t5_without_dropout), steps=1, warmup_steps=0, n_context=2, text_maxlength=32)
    fid_train.train(toy_run, None, tmp_path / "fid", config, "cpu", progress=False)
    recorded = json.loads((tmp_path / "fid" / "train_config.json").read_text())
    assert recorded["batch_size"] == 1
    assert {k: recorded["launch"][k] for k in ("world_size", "global_batch", "batch_per_rank")} == {
        "world_size": 1,
        "global_batch": 1,
        "batch_per_rank": 1,
    }
    assert recorded["launch"]["numerics"]["precision"] == "fp32"


def test_checkpointed_fid_compiles_to_one_graph_without_recompiles():
    """--gradient-checkpointing (what the out-of-memory message recommends) with torch.compile: one
    graph, no graph break, no recompile over steps of one shape, every block recomputed in backward,
    and the eager model's loss and gradients (dropout 0)."""
    import torch._dynamo
    from torch._dynamo.utils import counters
    from transformers import T5Config

    def tiny():
        torch.manual_seed(0)
        return fid_model.FiDT5(
            T5Config(
                vocab_size=64,
                d_model=32,
                d_ff=64,
                num_layers=2,
                num_decoder_layers=2,
                num_heads=2,
                d_kv=16,
                dropout_rate=0.0,
                decoder_start_token_id=0,
                pad_token_id=0,
            )
        ).train()

    def step(call, model):
        model.zero_grad(set_to_none=True)
        loss = call(input_ids=ids, attention_mask=mask, labels=labels).loss
        loss.backward()
        return float(loss.detach()), {name: p.grad.clone() for name, p in model.named_parameters()}

    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(1, 64, (2, 3, 12), generator=generator)
    mask = torch.ones_like(ids)
    mask[:, :, 9:] = 0
    labels = torch.randint(1, 64, (2, 5), generator=generator)
    labels[1, 3:] = -100
    reference = tiny()
    expected_loss, expected = step(reference, reference)
    model, graphs = tiny(), []
    fid_model.enable_checkpointing(model)

    def backend(graph, example_inputs):
        graphs.append(graph)
        return graph.forward  # eager: exact with dropout 0

    torch._dynamo.reset()
    counters.clear()
    compiled = torch.compile(model, backend=backend)
    loss, grads = step(compiled, model)
    with torch.compiler.set_stance("fail_on_recompile"):
        for _ in range(2):
            loss, grads = step(compiled, model)
    assert dict(counters["graph_break"]) == {} and len(graphs) == 1
    regions = [n for n in graphs[0].graph.nodes if n.op == "call_function" and "checkpoint" in str(n.target)]
    assert len(regions) == len(model.encoder.block) + len(model.decoder.block)
    assert loss == pytest.approx(expected_loss, abs=1e-5)
    for name, grad in expected.items():
        torch.testing.assert_close(grads[name], grad, atol=1e-5, rtol=1e-5, msg=name)
    torch._dynamo.reset()
