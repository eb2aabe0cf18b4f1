"""`ifqa train --reranker` and `ifqa rerank` on the demo set with a tiny model the test builds."""

import json

import pytest

from ifqa.artifacts import read_manifest, read_run
from ifqa.errors import IfqaError

TRAIN = [
    "--index",
    "demo:bm25",
    "--epochs",
    "1",
    "--questions-per-step",
    "2",
    "--group-size",
    "4",
    "--max-length",
    "64",
    "--hard-depth",
    "10",
    "--no-progress",
    "--setting",
    "demo",
]
BASE = TRAIN[:-2]  # without the question set


@pytest.fixture(scope="module")
def trained(tmp_path_factory, tiny_model):
    from tests.conftest import run_cli

    out = tmp_path_factory.mktemp("reranker") / "rr"
    first = run_cli("train", "--reranker", *TRAIN, "--model", tiny_model, "-o", out, "--stop-after", "2")
    assert first.returncode == 0, first.stderr
    assert "stopped at step 2 of 6" in first.stdout and (out / "state" / "trainer.pt").exists()
    second = run_cli("train", "--reranker", *TRAIN, "--model", tiny_model, "-o", out)
    assert second.returncode == 0, second.stderr
    return out


@pytest.mark.numerics
def test_training_resumes_and_writes_a_model_with_its_card(trained, tiny_model):
    model = trained / "model"
    assert (model / "config.json").exists() and not (trained / "state").exists()
    card = json.loads((model / "ifqa_card.json").read_text())
    assert card["kind"] == "reranker" and card["seed"] == 0 and card["steps"] == 6
    assert card["recipe"]["model"] == str(tiny_model) and card["recipe"]["group_size"] == 4
    assert card["training_data"]["questions"]["name"] == "demo:train"
    assert "without title" in card["passages_read_as"]
    groups = [json.loads(line) for line in (trained / "groups.jsonl").read_text().splitlines()]
    assert len(groups) == 12 and all(g["positives"] and g["other_gold"] for g in groups)


def test_mined_negatives_never_include_a_gold_passage(trained):
    from ifqa.datasets.demo import load_demo
    from ifqa.eval.passages import GoldMatcher

    gold = {e.qid: GoldMatcher(e.context) for e in load_demo("train")}
    for line in (trained / "groups.jsonl").read_text().splitlines():
        group = json.loads(line)
        assert not any(gold[group["qid"]].matches(text) for text in group["negatives"] + group["other_gold"])


@pytest.mark.numerics
def test_same_seed_same_model(tmp_path, trained, tiny_model, cli):
    import torch
    from safetensors.torch import load_file

    again = tmp_path / "again"
    result = cli("train", "reranker", *TRAIN, "--model", tiny_model, "-o", again)
    assert result.returncode == 0, result.stderr
    a, b = load_file(trained / "model" / "model.safetensors"), load_file(again / "model" / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_attention_dropout_reaches_the_model(tmp_path, trained, tiny_model, cli):
    from safetensors.torch import load_file

    out = tmp_path / "rr"
    result = cli("train", "reranker", *TRAIN, "--model", tiny_model, "--attention-dropout", "0.3", "-o", out)
    assert result.returncode == 0, result.stderr
    assert json.loads((out / "model" / "config.json").read_text())["attention_probs_dropout_prob"] == 0.3
    assert json.loads((out / "model" / "ifqa_card.json").read_text())["recipe"]["attention_dropout"] == 0.3
    default = json.loads((trained / "model" / "ifqa_card.json").read_text())["recipe"]["attention_dropout"]
    assert default != 0.3
    a, b = load_file(trained / "model" / "model.safetensors"), load_file(out / "model" / "model.safetensors")
    assert any(not a[k].equal(b[k]) for k in a)  # trained differently, not just labelled differently


def test_refuses_to_train_on_dev_or_without_gold(tmp_path, tiny_model, cli):
    result = cli("train", "--reranker", *TRAIN, "--split", "dev", "--model", tiny_model, "-o", tmp_path / "x")
    assert result.returncode == 1 and "refusing to train on the dev split" in result.stderr
    bare = tmp_path / "q.json"
    bare.write_text(json.dumps([{"idx": 1, "question": "If a, what b?", "answers": ["c"], "context": []}]))
    result = cli("train", "--reranker", *BASE, "--questions", bare, "--model", tiny_model, "-o", tmp_path / "y")
    assert result.returncode == 1 and "have no gold passage" in result.stderr
    assert not (tmp_path / "y" / "model").exists()


def test_rerank_reorders_the_top_and_keeps_the_rest(tmp_path, trained, cli):
    run = tmp_path / "run.jsonl"
    assert cli("retrieve", "--k", "8", "-o", run, "--no-progress").returncode == 0
    out = tmp_path / "reranked.jsonl"
    result = cli("rerank", "--run", run, "--model", trained / "model", "--depth", "5", "-o", out, "--no-progress")
    assert result.returncode == 0, result.stderr
    before, after = read_run(run), read_run(out)
    assert [r["qid"] for r in before] == [r["qid"] for r in after]
    for b, a in zip(before, after):
        assert sorted(c["id"] for c in b["ctxs"][:5]) == sorted(c["id"] for c in a["ctxs"][:5])
        assert [c["id"] for c in b["ctxs"][5:]] == [c["id"] for c in a["ctxs"][5:]]
        scores = [c["score"] for c in a["ctxs"][:5]]
        assert scores == sorted(scores, reverse=True)
        for ctx in a["ctxs"]:
            assert {"gold", "has_answer"} <= set(ctx)
    manifest = read_manifest(out)
    assert manifest["questions"]["name"] == "demo:dev" and manifest["rerankers"][-1]["depth"] == 5
    assert not (tmp_path / "reranked.jsonl.partial").exists()


def test_rerank_resumes_from_a_partial_file(tmp_path, trained, cli):
    run = tmp_path / "run.jsonl"
    assert cli("retrieve", "--k", "6", "-o", run, "--no-progress").returncode == 0
    out = tmp_path / "r.jsonl"
    assert (
        cli("rerank", "--run", run, "--model", trained / "model", "--depth", "6", "-o", out, "--no-progress").returncode
        == 0
    )
    complete = read_run(out)
    out.unlink()
    header = {
        "partial_of": str(run),
        "run_bytes": run.stat().st_size,
        "reranker": {"model": str(trained / "model"), "depth": 6, "max_length": 64},
    }
    partial = tmp_path / "r.jsonl.partial"
    torn = json.dumps(complete[1])[:40]  # a line cut by a kill
    partial.write_text(json.dumps(header) + "\n" + json.dumps(complete[0]) + "\n" + torn)
    result = cli("-v", "rerank", "--run", run, "--model", trained / "model", "--depth", "6", "-o", out, "--no-progress")
    assert result.returncode == 0, result.stderr
    assert "resuming after 1 reranked questions" in result.stderr
    assert read_run(out) == complete and not partial.exists()


def test_a_rerank_begun_in_fp32_is_not_resumed_in_bf16(tmp_path, trained, cli, monkeypatch):
    """A rerank interrupted in fp32 and run again with ``--precision bf16`` (on a CPU with AVX-512 BF16
    or AMX) starts afresh: bf16 scores differ from fp32's, and one run never holds both. Its record says bf16."""
    from ifqa import devices

    run, out = tmp_path / "run.jsonl", tmp_path / "r.jsonl"
    assert cli("retrieve", "--k", "6", "-o", run, "--no-progress").returncode == 0
    rerank = ("-v", "rerank", "--run", run, "--model", trained / "model", "--depth", "6", "-o", out, "--no-progress")
    monkeypatch.setattr(devices, "cpu_bf16_features", lambda: ["amx_bf16"])  # a CPU with bf16: fp32 all the same
    assert cli(*rerank).returncode == 0
    assert "precision" not in read_manifest(out)["rerankers"][-1]  # fp32 records stay as they were
    fp32 = {"model": str(trained / "model"), "depth": 6, "max_length": 64}
    header = {"partial_of": str(run), "run_bytes": run.stat().st_size, "reranker": fp32}
    partial = tmp_path / "r.jsonl.partial"
    partial.write_text(json.dumps(header) + "\n" + json.dumps(read_run(out)[0]) + "\n")
    out.unlink()
    result = cli(*rerank, "--precision", "bf16")
    assert result.returncode == 0, result.stderr
    assert "resuming" not in result.stderr and not partial.exists()
    assert read_manifest(out)["rerankers"][-1]["precision"] == "bf16"


def test_rerank_reuses_the_runs_flags_and_writes_the_same_bytes(tmp_path, trained, cli, monkeypatch):
    """Reranking reorders passages; their answer and gold flags stay theirs. A run made for the same
    questions keeps its flags (not computed again between the device's batches); a run without a
    manifest, or without flags, has them computed: the output bytes are the same."""
    from ifqa import load_questions
    from ifqa.eval import passages
    from ifqa.retrieval.rerank import load_reranker
    from ifqa.retrieval.rerank_run import rerank_run

    run = tmp_path / "run.jsonl"
    assert cli("retrieve", "--k", "8", "-o", run, "--no-progress").returncode == 0
    bare = tmp_path / "bare.jsonl"  # the same passages, no flags and no manifest
    bare.write_text(
        "".join(
            json.dumps(
                {**r, "ctxs": [{k: v for k, v in c.items() if k not in ("gold", "has_answer")} for c in r["ctxs"]]}
            )
            + "\n"
            for r in read_run(run)
        )
    )
    reranker, questions = load_reranker(str(trained / "model"), depth=5, device="cpu"), load_questions("demo", "dev")
    calls = []
    real = passages.flag_contexts
    monkeypatch.setattr(passages, "flag_contexts", lambda *args: calls.append(1) or real(*args))
    rerank_run(run, reranker, tmp_path / "kept.jsonl", questions, progress=False)
    assert calls == []
    rerank_run(bare, reranker, tmp_path / "computed.jsonl", questions, progress=False)
    assert len(calls) == len(questions)
    assert (tmp_path / "kept.jsonl").read_bytes() == (tmp_path / "computed.jsonl").read_bytes()


def test_retrieve_with_a_rerank_stage(tmp_path, trained, cli):
    out = tmp_path / "run.jsonl"
    result = cli(
        "retrieve", "--k", "3", "--rerank", trained / "model", "--rerank-depth", "8", "-o", out, "--no-progress"
    )
    assert result.returncode == 0, result.stderr
    records = read_run(out)
    assert all(len(r["ctxs"]) == 3 for r in records)
    assert read_manifest(out)["rerankers"][0]["depth"] == 8


@pytest.mark.parametrize(
    "args, message",
    [
        (["--depth", "0"], "--depth"),
        (["--model", "NOT_A_MODEL_DIR"], "not a model folder"),
    ],
)
def test_rerank_bad_input(tmp_path, trained, cli, args, message):
    run = tmp_path / "run.jsonl"
    assert cli("retrieve", "--k", "3", "-o", run, "--no-progress").returncode == 0
    (tmp_path / "NOT_A_MODEL_DIR").mkdir()
    args = [a.replace("NOT_A_MODEL_DIR", str(tmp_path / "NOT_A_MODEL_DIR")) for a in args]
    if "--model" not in args:
        args += ["--model", str(trained / "model")]
    result = cli("rerank", "--run", run, *args, "-o", tmp_path / "out.jsonl")
    assert result.returncode != 0 and message in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out.jsonl").exists()


def test_rerank_refuses_a_run_without_passage_text(tmp_path, trained, cli):
    run = tmp_path / "run.jsonl"
    assert cli("retrieve", "--k", "3", "-o", run, "--no-progress").returncode == 0
    records = read_run(run)
    records[1]["ctxs"][0]["text"] = ""
    run.write_text("".join(json.dumps(r) + "\n" for r in records))
    result = cli("rerank", "--run", run, "--model", trained / "model", "-o", tmp_path / "out.jsonl")
    assert result.returncode == 1 and "run.jsonl:2: passage" in result.stderr and "has no text" in result.stderr
    assert not (tmp_path / "out.jsonl").exists() and not (tmp_path / "out.jsonl.partial").exists()


@pytest.mark.numerics
def test_pairs_scored_across_questions_equal_one_question_at_a_time(tmp_path, trained, monkeypatch):
    """Batching many questions' pairs together (and tokenizing them in worker processes, the CUDA
    path) gives the ranks of scoring each question alone, and in fp32 the same scores."""
    import ifqa
    from ifqa import feeding

    questions = [e.question for e in ifqa.load_questions("demo", "dev")][:12]
    hits = ifqa.open_index("demo:bm25").batch_search(questions, 20)
    reranker = ifqa.Reranker(trained / "model", depth=15, batch_size=16, device="cpu")
    alone = [reranker.rerank(q, h) for q, h in zip(questions, hits)]
    together = reranker.rerank_many(questions, hits)
    monkeypatch.setattr(feeding, "default_workers", lambda device, asked=None: 2)
    with_workers = reranker.rerank_many(questions, hits)
    for a, b, c in zip(alone, together, with_workers):
        assert [h.id for h in a] == [h.id for h in b] == [h.id for h in c]
        assert max(abs(x.score - y.score) for x, y in zip(a, b)) < 1e-5
        assert [h.score for h in b] == [h.score for h in c]
    assert reranker.model.score_many([]) == [] and reranker.model.score("q", []) == []


@pytest.mark.numerics
def test_bf16_reranking_casts_the_weights_and_keeps_the_ranks(trained, monkeypatch):
    """bf16 where asked and the device runs it (a CPU with AMX): the weights are cast, as the encoders'
    are, ranks within rounding of fp32; the default stays fp32 on such a CPU. The CPU's features are
    forced, so that the test means the same on a CPU with or without bf16."""
    import torch

    from ifqa import devices
    from ifqa.retrieval.rerank import load_reranker

    texts = ["The river Lune flows west into the bay.", "Copper is a soft metal.", "Falcons hunt at speed."]
    monkeypatch.setattr(devices, "cpu_bf16_features", lambda: [])  # as on an AVX2-only CPU
    with pytest.raises(IfqaError, match="--precision bf16: cpu has no native bf16"):
        load_reranker(str(trained / "model"), depth=3, device="cpu", precision="bf16")
    monkeypatch.setattr(devices, "cpu_bf16_features", lambda: ["amx_bf16"])  # as on a CPU with AMX
    fp32 = load_reranker(str(trained / "model"), depth=3, device="cpu")  # the default on every CPU
    bf16 = load_reranker(str(trained / "model"), depth=3, device="cpu", precision="bf16")
    assert fp32.precision == "fp32" and bf16.precision == "bf16"
    assert next(bf16.encoder.model.parameters()).dtype == torch.bfloat16
    for question in ("If the Lune dried up, where would it flow?", "If copper were hard, what metal would be soft?"):
        assert bf16.score(question, texts) == pytest.approx(fp32.score(question, texts), abs=0.05)


@pytest.mark.skipif(__import__("importlib").util.find_spec("openvino") is None, reason="pip install 'ifqa[openvino]'")
def test_rerank_on_an_exported_backend_keeps_the_ranking(tmp_path, trained, cli, monkeypatch):
    monkeypatch.setenv("IFQA_CACHE_DIR", str(tmp_path / "cache"))
    run = tmp_path / "run.jsonl"
    assert cli("retrieve", "--k", "8", "-o", run, "--no-progress").returncode == 0
    outputs = {}
    for backend in ("torch", "openvino"):
        outputs[backend] = tmp_path / f"{backend}.jsonl"
        result = cli(
            "rerank",
            "--run",
            run,
            "--model",
            trained / "model",
            "--depth",
            "8",
            "--runtime",
            backend,
            "-o",
            outputs[backend],
            "--no-progress",
            "--device",
            "cpu",
            env={**__import__("os").environ, "IFQA_CACHE_DIR": str(tmp_path / "cache")},
        )
        assert result.returncode == 0, result.stderr
    for a, b in zip(read_run(outputs["torch"]), read_run(outputs["openvino"])):
        assert [c["score"] for c in a["ctxs"]] == pytest.approx([c["score"] for c in b["ctxs"]], abs=0.05)
    assert read_manifest(outputs["openvino"])["rerankers"][-1]["backend"] == "openvino"


@pytest.mark.gpu
@pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="needs CUDA")
def test_gpu_reranking_keeps_the_cpu_ranks(trained):
    """On CUDA (bf16, pairs tokenized by worker processes) the ranks are the CPU's, up to near-ties."""
    import ifqa

    questions = [e.question for e in ifqa.load_questions("demo", "dev")]
    hits = ifqa.open_index("demo:bm25").batch_search(questions, 20)
    cpu = ifqa.Reranker(trained / "model", depth=20, device="cpu").rerank_many(questions, hits)
    gpu = ifqa.Reranker(trained / "model", depth=20, device="cuda").rerank_many(questions, hits)
    for a, b in zip(cpu, gpu):
        by_id = {h.id: h.score for h in b}
        assert max(abs(h.score - by_id[h.id]) for h in a) < 0.1
        assert a[0].id == b[0].id or abs(a[0].score - a[1].score) < 0.1


@pytest.mark.numerics
def test_rerank_scores_do_not_depend_on_the_batches(tmp_path, trained, cli):
    """A pair's score is the pair's alone: equal within 1e-5 (fp32, CPU) whatever the batch size, the
    number of questions reranked together and so the batches the planner forms; through
    `ifqa rerank` and the reranker the API and `--rerank` use."""
    from ifqa import load_questions
    from ifqa.retrieval.rerank import load_reranker
    from ifqa.retrieval.rerank_run import rerank_run

    run = tmp_path / "run.jsonl"
    assert cli("retrieve", "--k", "20", "-o", run, "--no-progress").returncode == 0
    first = tmp_path / "first5.jsonl"  # fewer questions: other groups, other batches
    first.write_text("".join(run.read_text().splitlines(keepends=True)[:5]))
    questions = load_questions("demo", "dev")
    scores = {}
    for batch in (1, 8, 64):
        reranker = load_reranker(str(trained / "model"), depth=20, batch_size=batch, device="cpu")
        for name, source in (("all", run), ("first5", first)):
            out = tmp_path / f"{name}-{batch}.jsonl"
            rerank_run(source, reranker, out, questions, progress=False)
            scores[name, batch] = {(r["qid"], c["id"]): c["score"] for r in read_run(out) for c in r["ctxs"]}
        alone = reranker.score_many([(r["question"], [c["text"] for c in r["ctxs"]], []) for r in read_run(run)[:3]])
        scores["api", batch] = [s for row in alone for s in row]
    reference = scores["all", 64]
    for (name, batch), values in scores.items():
        if name == "api":
            assert values == pytest.approx(scores["api", 64], abs=1e-5), batch
            continue
        assert max(abs(value - reference[key]) for key, value in values.items()) <= 1e-5, (name, batch)


def test_a_pair_is_cut_the_same_way_whatever_its_batch_mates():
    """A question too long for its passage to be cut alone is cut with it, in its own pair only:
    the other pairs of the batch keep the tokens they have in any batch."""
    from transformers import AutoTokenizer

    from ifqa.models import pair_inputs
    from ifqa.retrieval.encoders import resolve

    tokenizer = AutoTokenizer.from_pretrained(resolve("all-MiniLM-L6-v2"))
    long_question = "If the river that " + "flows past the old mill and the stone bridge " * 8 + "dried up?"
    # the first question leaves its passage some room; cut together with the second, it would lose words too
    fits = "If copper were as soft as lead and as rare as gold, what would the wires in every house be made of instead?"
    questions, texts = [fits, long_question], ["Copper " * 40, "River " * 40]
    together = pair_inputs(tokenizer, questions, texts, 48, padding=True, return_tensors="pt")
    for i in range(2):
        alone = pair_inputs(tokenizer, questions[i : i + 1], texts[i : i + 1], 48, padding=True, return_tensors="pt")
        width = int(alone["attention_mask"].sum())
        assert together["input_ids"][i, :width].tolist() == alone["input_ids"][0, :width].tolist()
        assert int(together["attention_mask"][i].sum()) == width
    assert together["input_ids"].shape == (2, 48)


def test_a_state_saved_before_the_step_log_resumes_with_every_steps_loss(tmp_path, tiny_model, cli):
    """A state an earlier ifqa saved holds each step's loss as ``losses``: resumed, the run's
    train_log.jsonl still has every step, the ones before the stop included."""
    import torch

    out = tmp_path / "rr"
    first = cli("train", "reranker", *TRAIN, "--model", tiny_model, "-o", out, "--stop-after", "2")
    assert first.returncode == 0, first.stderr
    path = out / "state" / "trainer.pt"
    saved = torch.load(path, weights_only=False)
    saved["losses"] = json.dumps([entry["loss"] for entry in json.loads(saved.pop("log"))])
    torch.save(saved, path)
    second = cli("train", "reranker", *TRAIN, "--model", tiny_model, "-o", out)
    assert second.returncode == 0, second.stderr
    steps = [json.loads(line)["step"] for line in (out / "train_log.jsonl").read_text().splitlines()]
    assert steps == list(range(1, 7))


def test_a_token_budget_batches_pairs_within_it_and_scores_them_alike(tmp_path, trained, cli, monkeypatch):
    """``--max-batch-tokens``: each batch of pairs fits the budget padded (rows × width), longest first; the run
    written equals fixed batches' within 1e-5 (fp32, CPU); where pairs are tokenized one by one (no token counts
    to budget) it is one line before any pair is scored."""
    from ifqa.retrieval.rerank import CrossEncoderReranker, load_reranker

    run = tmp_path / "run.jsonl"
    assert cli("retrieve", "--k", "10", "-o", run, "--no-progress").returncode == 0
    outputs = {}
    for name, extra in (("fixed", ()), ("budget", ("--max-batch-tokens", "600"))):
        outputs[name] = tmp_path / f"{name}.jsonl"
        args = ("rerank", "--run", run, "--model", trained / "model", "--depth", "10", "-o", outputs[name])
        result = cli(*args, "--no-progress", "--setting", "demo", "--split", "dev", *extra)
        assert result.returncode == 0, result.stderr
    fixed, budgeted = (
        {(r["qid"], c["id"]): c["score"] for r in read_run(outputs[n]) for c in r["ctxs"]} for n in ("fixed", "budget")
    )
    assert fixed.keys() == budgeted.keys() and max(abs(budgeted[k] - fixed[k]) for k in fixed) <= 1e-5

    shapes = []
    logits = CrossEncoderReranker._logits
    monkeypatch.setattr(
        CrossEncoderReranker, "_logits", lambda self, f: shapes.append(f["input_ids"].shape) or logits(self, f)
    )
    reranker = load_reranker(str(trained / "model"), depth=10, device="cpu", max_batch_tokens=600)
    records = read_run(run)
    reranker.score_many([(r["question"], [c["text"] for c in r["ctxs"]], []) for r in records])
    assert sum(rows for rows, _ in shapes) == 10 * len(records)
    assert all(rows == 1 or rows * width <= 600 for rows, width in shapes) and len({r for r, _ in shapes}) > 1, shapes

    reranker._pairs = False  # as for a tokenizer whose pairs are not built from ids
    with pytest.raises(IfqaError, match="--max-batch-tokens plans batches by token counts"):
        reranker.score_many([(records[0]["question"], [c["text"] for c in records[0]["ctxs"]], [])])
