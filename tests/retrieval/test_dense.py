import os

import numpy as np
import pytest

from ifqa.errors import IfqaError
from ifqa.retrieval import dense
from ifqa.retrieval.engines import DenseSettings
from ifqa.retrieval.specs import open_index

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def test_default_encoder_ships_offline():
    from ifqa.retrieval.encoders import resolve

    assert os.path.isdir(resolve("sentence-transformers/all-MiniLM-L6-v2"))


@pytest.mark.numerics
def test_shards_resume_and_merge_match_a_single_build(corpus, tmp_path):
    whole = tmp_path / "whole"
    dense.build(corpus, whole, chunk=3, progress=False)
    sharded = tmp_path / "sharded"
    assert dense.build(corpus, sharded, shard=(1, 2), chunk=3, progress=False) is None
    chunks = sorted((sharded / "embeddings").glob("chunk-*.npy"))
    assert [c.name for c in chunks] == ["chunk-0000001.npy", "chunk-0000002.npy"]  # 3 chunks: shard 1 of 2 has 2
    with pytest.raises(IfqaError, match="1 of 3 embedding chunks are missing"):
        dense.merge(corpus, sharded)
    stamp = chunks[0].stat().st_mtime_ns
    manifest = dense.build(corpus, sharded, chunk=3, progress=False)  # encodes only chunk 0, then merges
    assert chunks[0].stat().st_mtime_ns == stamp
    assert manifest["passages"] == 8 and manifest["params"]["dim"] == 384 and manifest["index_bytes"] > 0
    for j in range(3):
        a = np.load(whole / "embeddings" / f"chunk-{j:07d}.npy")
        b = np.load(sharded / "embeddings" / f"chunk-{j:07d}.npy")
        assert np.allclose(a, b, atol=1e-5)


def test_a_chunk_holds_64_batches_of_its_device_and_a_resumed_build_keeps_its_own(corpus, tmp_path):
    """A chunk is what its batches are planned over: 4,096 passages on a CPU (256 batches of 16), 32,768 at a
    GPU's batch of 512 (a tenth of a 256-token batch was padding in chunks of 4,096); a build resumed without
    --chunk-size, on any device, keeps the chunk it recorded, where a new default would refuse it."""
    from tests.fake_cuda import FakeCuda

    nowhere = tmp_path / "new"
    assert dense.default_chunk(nowhere, "cpu", None) == dense.CHUNK == 4096
    assert dense.default_chunk(nowhere, "cpu", 1024) == 65536 and dense.default_chunk(nowhere, "cpu", 8) == 4096
    with pytest.MonkeyPatch.context() as patch:
        FakeCuda(count=1).install(patch)
        assert dense.default_chunk(nowhere, "cuda", None) == 32768
    dense.build(corpus, tmp_path / "idx", shard=(0, 2), chunk=3, progress=False, device="cpu")
    assert dense.default_chunk(tmp_path / "idx", "cpu", None) == 3
    manifest = dense.build(corpus, tmp_path / "idx", progress=False, device="cpu")  # shard 1's chunks, then merged
    assert manifest["passages"] == 8 and len(list((tmp_path / "idx" / "embeddings").glob("chunk-*.npy"))) == 3


def test_other_encoder_settings_are_refused_unless_forced(corpus, tmp_path):
    dense.build(corpus, tmp_path / "idx", shard=(0, 2), chunk=3, progress=False)
    with pytest.raises(IfqaError, match="another encoder or collection; use another -o folder, or --force"):
        dense.build(corpus, tmp_path / "idx", shard=(1, 2), chunk=4, progress=False)
    manifest = dense.build(corpus, tmp_path / "idx", chunk=4, force=True, progress=False)
    assert manifest["passages"] == 8 and not (tmp_path / "idx" / "embeddings" / "chunk-0000002.npy").exists()


def test_a_failed_start_never_blocks_the_corrected_command(corpus, tmp_path):
    with pytest.raises(IfqaError):
        dense.build(corpus, tmp_path / "idx", DenseSettings(encoder="no-such-encoder-folder/"), progress=False)
    assert not (tmp_path / "idx").exists()  # refused before any work: nothing left behind
    # a start that fails after its settings were written (the encoder cannot load) leaves no folder either
    (tmp_path / "not-a-model").mkdir()
    (tmp_path / "not-a-model" / "config.json").write_text("{}")
    with pytest.raises(IfqaError):
        dense.build(corpus, tmp_path / "idx", DenseSettings(encoder=str(tmp_path / "not-a-model")), progress=False)
    assert not (tmp_path / "idx").exists()
    unfinished = tmp_path / "unfinished"
    dense.build(corpus, unfinished, shard=(0, 2), chunk=3, progress=False)
    with pytest.raises(IfqaError, match="no manifest|not an index|manifest"):
        open_index(unfinished)  # an unfinished folder is never used as an index
    assert dense.build(corpus, tmp_path / "idx", progress=False)["passages"] == 8


@pytest.mark.parametrize("index_type", ["flat", "hnsw", "ivfpq"])
def test_index_types_retrieve_the_obvious_passage(corpus, tmp_path, index_type):
    dense.build(corpus, tmp_path / index_type, DenseSettings(index_type=index_type), progress=False)
    retriever = open_index(tmp_path / index_type)
    hits = retriever.search(["Which bird of prey hunts fast?", "fruit trees like apples"], k=3)
    assert retriever.passages[hits[0][0][0]]["id"] == "p3"
    assert retriever.passages[hits[1][0][0]]["id"] == "p5"


def test_the_merge_uses_the_threads_the_user_shares_even_after_a_search_set_fewer(corpus, tmp_path, monkeypatch):
    """OMP_NUM_THREADS is a scheduler's or the user's share of a shared machine: the merge keeps to it
    (every core would oversubscribe a node), and takes it back from a search's one thread."""
    import faiss

    used = []
    monkeypatch.setattr(faiss, "omp_set_num_threads", used.append)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)  # the test run's own share (tests/conftest.py)
    dense.build(corpus, tmp_path / "a", chunk=4, progress=False)
    open_index(tmp_path / "a").search(["apples"], k=1)
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    dense.build(corpus, tmp_path / "b", chunk=4, progress=False)
    monkeypatch.delenv("OMP_NUM_THREADS")
    dense.build(corpus, tmp_path / "c", chunk=4, progress=False)
    assert used == [os.cpu_count(), 1, 3, os.cpu_count()]


def test_shard_syntax():
    assert dense.parse_shard("2/4") == (2, 4)
    with pytest.raises(IfqaError):
        dense.parse_shard("4/4")
    with pytest.raises(IfqaError):
        dense.parse_shard("x")


def test_an_index_that_cannot_fit_stops_before_encoding(corpus, tmp_path):
    flat = dense.index_memory("flat", 8, 384)
    assert flat == 8 * 384 * 4 * 3  # vectors + training sample + the chunk being added
    assert dense.index_memory("ivfpq", 8, 384) < flat < dense.index_memory("hnsw", 8, 384)
    assert dense.index_memory("flat", 8, 384, chunk=2) == flat - 6 * 384 * 4  # the build's --chunk-size counts
    budget = f"{flat - 1000}"  # the estimate counts 8 or 9 passages: either fails flat, fits ivfpq
    with pytest.raises(
        IfqaError,
        match=r"a flat index of about \d passages x 384 dimensions needs about [\d.]+ kB of memory "
        r"to build and to search, over --max-memory 35.0 kB; --index-type ivfpq \(compressed\)",
    ):
        dense.build(corpus, tmp_path / "idx", max_memory=budget, progress=False)
    assert not (tmp_path / "idx").exists()  # nothing encoded, nothing left behind
    assert (
        dense.build(corpus, tmp_path / "idx", DenseSettings(index_type="ivfpq"), max_memory=budget, progress=False)[
            "passages"
        ]
        == 8
    )


def test_the_merge_checks_memory_with_the_real_dimension(corpus, tmp_path):
    dense.build(
        corpus, tmp_path / "idx", shard=(0, 1), chunk=3, progress=False, max_memory="1K"
    )  # shards: no index built
    with pytest.raises(IfqaError, match="needs about .* over --max-memory"):
        dense.merge(corpus, tmp_path / "idx", max_memory="1K")
    assert not (tmp_path / "idx" / dense.FAISS_FILE).exists()
    assert dense.merge(corpus, tmp_path / "idx")["passages"] == 8  # the chunks stay: a bigger budget just merges


def test_an_index_larger_than_the_machine_is_refused_before_loading(corpus, tmp_path, monkeypatch):
    dense.build(corpus, tmp_path / "idx", progress=False)
    monkeypatch.setattr("ifqa.memory.physical_memory", lambda: 1000)
    with pytest.raises(IfqaError, match=r"index\.faiss: searching this index needs about .* more than this machine's"):
        open_index(tmp_path / "idx")


def test_cli_max_memory_is_one_line(cli, corpus, tmp_path):
    result = cli("index", "dense", "--corpus", corpus, "-o", tmp_path / "idx", "--max-memory", "1K", "--no-progress")
    assert result.returncode == 1
    assert result.stderr.strip().startswith(
        "ifqa: error: a flat index of about 9 passages x 384 dimensions needs about"
    )
    assert len(result.stderr.strip().splitlines()) == 1 and not (tmp_path / "idx").exists()


def test_embedding_size_is_read_without_loading_weights(tmp_path):
    import json

    assert dense.embedding_size("sentence-transformers/all-MiniLM-L6-v2") == 384
    model = tmp_path / "st-with-dense"
    (model / "1_Pooling").mkdir(parents=True)
    (model / "2_Dense").mkdir()
    (model / "modules.json").write_text(
        json.dumps(
            [
                {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
                {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
                {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"},
            ]
        )
    )
    (model / "config.json").write_text(json.dumps({"model_type": "bert", "hidden_size": 384}))
    (model / "1_Pooling" / "config.json").write_text(json.dumps({"word_embedding_dimension": 384}))
    (model / "2_Dense" / "config.json").write_text(json.dumps({"in_features": 384, "out_features": 128}))
    assert dense.embedding_size(str(model)) == 128  # the Dense layer's output, not the transformer's width
    assert dense.embedding_size("nobody/not-downloaded-model") is None  # nothing fetched to find out


def _reference_vectors(corpus, titles=True):
    """What ifqa wrote before the batched pipeline: sentence-transformers' own encode, as ifqa called it."""
    import json

    from sentence_transformers import SentenceTransformer

    from ifqa.retrieval.encoders import resolve

    passages = [json.loads(line) for line in corpus.read_text().splitlines()]
    texts = [f"{p['title']}. {p['text']}" if titles else p["text"] for p in passages]
    model = SentenceTransformer(resolve("all-MiniLM-L6-v2"), device="cpu")
    return model.encode(texts, batch_size=64, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)


def _chunks(folder):
    return np.concatenate([np.load(path) for path in sorted((folder / "embeddings").glob("chunk-*.npy"))])


@pytest.mark.numerics
@pytest.mark.parametrize("titles", [True, False])
def test_embeddings_equal_sentence_transformers_encode(corpus, tmp_path, titles):
    dense.build(
        corpus, tmp_path / "idx", DenseSettings(titles=titles, max_length=256), chunk=3, batch_size=2, progress=False
    )
    ours, reference = _chunks(tmp_path / "idx"), _reference_vectors(corpus, titles)
    assert ours.shape == reference.shape and ours.dtype == np.float32
    assert np.min(np.sum(ours * reference, axis=1)) > 1 - 1e-3
    assert np.allclose(ours, reference, atol=1e-5)  # fp32 on a CPU: the same numbers


@pytest.mark.numerics
def test_tokenizing_workers_write_the_same_chunks(corpus, tmp_path, monkeypatch):
    """The CUDA path (DataLoader worker processes tokenizing ahead, across chunk boundaries) runs on a
    CPU too when asked: the chunk files equal the inline path's."""
    from ifqa import feeding

    dense.build(corpus, tmp_path / "inline", chunk=3, batch_size=2, progress=False)
    monkeypatch.setattr(feeding, "default_workers", lambda device, asked=None: 2)
    dense.build(corpus, tmp_path / "workers", chunk=3, batch_size=2, progress=False)
    for j in range(3):
        name = f"chunk-{j:07d}.npy"
        assert np.array_equal(
            np.load(tmp_path / "inline" / "embeddings" / name), np.load(tmp_path / "workers" / "embeddings" / name)
        )


def test_queries_are_encoded_in_their_order():
    from ifqa.retrieval.encoders import load_encoder

    encoder = load_encoder(device="cpu")
    queries = ["a much longer question about the river Lune and its bridges", "copper?", "falcons hunting"]
    together = encoder.encode_queries(queries, batch_size=2)
    alone = np.concatenate([encoder.encode_queries([q]) for q in queries])
    assert np.allclose(together, alone, atol=1e-5)
    assert encoder.encode_queries([]).shape == (0, 384)


def test_a_precision_the_machine_lacks_is_one_line_before_any_work(corpus, tmp_path, cli):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    result = cli("index", "dense", "--corpus", corpus, "-o", tmp_path / "idx", "--precision", "fp16")
    assert result.returncode == 1 and "--precision fp16 needs a CUDA device" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and not (tmp_path / "idx").exists()
    result = cli("index", "dense", "--corpus", corpus, "-o", tmp_path / "idx", "--device", "cuda")
    assert result.returncode == 1 and "no CUDA device" in result.stderr and "encode" not in result.stderr
    assert not (tmp_path / "idx").exists()


@pytest.mark.gpu
@pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="needs CUDA")
def test_gpu_encoding_matches_the_cpu_within_fp16(corpus, tmp_path):
    """fp16 on CUDA, tokenized by worker processes after CUDA started, writes the CPU's vectors within
    1e-3 cosine (all-MiniLM-L6-v2, or a random model of its shape where its package is not installed)."""
    from tests.training.tiny import minilm

    settings = dense.DenseSettings(encoder=minilm(tmp_path / "minilm"))
    dense.build(corpus, tmp_path / "cpu", settings, chunk=3, batch_size=2, progress=False, device="cpu")
    dense.build(corpus, tmp_path / "gpu", settings, chunk=3, batch_size=2, progress=False, device="cuda")
    for j in range(3):
        name = f"chunk-{j:07d}.npy"
        a, b = np.load(tmp_path / "cpu" / "embeddings" / name), np.load(tmp_path / "gpu" / "embeddings" / name)
        assert np.min(np.sum(a * b, axis=1)) > 0.999


def test_a_gpu_out_of_memory_is_one_line_and_keeps_finished_chunks(corpus, tmp_path, monkeypatch):
    """Out of memory on the third chunk: the error names the batch size to lower, the two finished
    chunks stay, and the same call resumes to the index an uninterrupted build writes."""
    import torch

    from ifqa.retrieval import encoders

    real, calls = encoders.SentenceEncoder.passage_vectors, []

    def runs_out(self, features):
        calls.append(1)
        if len(calls) == 3:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real(self, features)

    monkeypatch.setattr(encoders.SentenceEncoder, "passage_vectors", runs_out)
    with pytest.raises(IfqaError, match="ran out of memory on a batch of 3 passages; lower --batch-size"):
        dense.build(corpus, tmp_path / "idx", chunk=3, batch_size=3, progress=False)
    assert sorted(p.name for p in (tmp_path / "idx" / "embeddings").glob("chunk-*.npy")) == [
        "chunk-0000000.npy",
        "chunk-0000001.npy",
    ]
    monkeypatch.setattr(encoders.SentenceEncoder, "passage_vectors", real)
    dense.build(corpus, tmp_path / "idx", chunk=3, batch_size=3, progress=False)
    dense.build(corpus, tmp_path / "whole", chunk=3, batch_size=3, progress=False)
    for j in range(3):
        name = f"chunk-{j:07d}.npy"
        assert np.allclose(
            np.load(tmp_path / "idx" / "embeddings" / name), np.load(tmp_path / "whole" / "embeddings" / name)
        )


def test_questions_are_encoded_in_the_precision_the_index_records(corpus, tmp_path, monkeypatch):
    """An index records the precision its passages were encoded in; questions are encoded in it where
    the device runs it, else in fp32, never in fp16 for an index that does not record fp16."""
    import json

    from ifqa import devices

    dense.build(corpus, tmp_path / "idx", chunk=3, progress=False)
    assert json.loads((tmp_path / "idx" / "embeddings" / "settings.json").read_text())["precision"] == "fp32"
    manifest_path = tmp_path / "idx" / "manifest.json"
    assert "precision" not in json.loads(manifest_path.read_text())["params"]  # fp32: nothing to keep alike
    assert open_index(str(tmp_path / "idx"), device="cpu").encoder.precision == "fp32"
    manifest = json.loads(manifest_path.read_text())
    manifest["params"]["precision"] = "bf16"
    manifest_path.write_text(json.dumps(manifest))
    monkeypatch.setattr(devices, "bf16_supported", lambda device: True)  # as on a CPU with AMX
    assert open_index(str(tmp_path / "idx"), device="cpu").encoder.precision == "bf16"
    monkeypatch.setattr(devices, "bf16_supported", lambda device: False)
    assert open_index(str(tmp_path / "idx"), device="cpu").encoder.precision == "fp32"
    assert devices.search_precision("fp16", "cpu") == "fp32" and devices.search_precision(None, "cuda") == "fp32"
    assert devices.search_precision("fp32", "cuda") == "fp32"  # a bf16/fp32 index is never searched in fp16


def test_resumed_chunks_of_another_precision_fall_back_to_fp32(corpus, tmp_path):
    import json

    dense.build(corpus, tmp_path / "idx", shard=(0, 2), chunk=3, progress=False)
    settings = tmp_path / "idx" / "embeddings" / "settings.json"
    settings.write_text(json.dumps({**json.loads(settings.read_text()), "precision": "fp16"}))  # as a GPU shard records
    manifest = dense.build(corpus, tmp_path / "idx", chunk=3, progress=False)  # the rest in fp32 here
    assert "precision" not in manifest["params"] and json.loads(settings.read_text())["precision"] == "fp32"


def test_a_non_finite_question_vector_is_one_line(corpus, tmp_path, monkeypatch):
    dense.build(corpus, tmp_path / "idx", chunk=3, progress=False)
    retriever = open_index(str(tmp_path / "idx"), device="cpu")
    monkeypatch.setattr(
        retriever.encoder, "encode_queries", lambda queries: np.full((len(queries), 384), np.nan, np.float32)
    )
    with pytest.raises(IfqaError, match="non-finite vectors for 2 of 2 questions at precision fp32"):
        retriever.search(["copper?", "falcons"], k=2)


def test_a_non_finite_chunk_is_one_line_and_the_chunks_written_before_it_stay(corpus, tmp_path, monkeypatch):
    """Chunks are written by a writer thread while the next one encodes: an error in the third chunk's
    vectors stops the build with one line after the two before it are on disk, and the rerun resumes."""
    import torch

    from ifqa.retrieval import encoders

    real, calls = encoders.SentenceEncoder.passage_vectors, []

    def overflows(self, features):
        calls.append(1)
        vectors = real(self, features)
        return torch.full_like(vectors, float("nan")) if len(calls) == 3 else vectors

    monkeypatch.setattr(encoders.SentenceEncoder, "passage_vectors", overflows)
    with pytest.raises(IfqaError, match="non-finite vectors for chunk 2 at --precision fp32"):
        dense.build(corpus, tmp_path / "idx", chunk=3, batch_size=3, progress=False)
    assert sorted(p.name for p in (tmp_path / "idx" / "embeddings").glob("chunk-*.npy")) == [
        "chunk-0000000.npy",
        "chunk-0000001.npy",
    ]
    assert not [p for p in (tmp_path / "idx").rglob("*") if p.name.endswith((".tmp", ".partial"))]
    monkeypatch.setattr(encoders.SentenceEncoder, "passage_vectors", real)
    assert dense.build(corpus, tmp_path / "idx", chunk=3, batch_size=3, progress=False)["passages"] == 8


@pytest.mark.parametrize("damage", ["truncated", "pickle", "wrong shape", "empty"])
def test_a_damaged_chunk_is_named_at_merge_and_encoded_again_on_resume(corpus, tmp_path, damage):
    """Issue #36: resuming over a truncated chunk or one that is a pickle was a traceback (and a
    pickle must never be unpickled). A merge that finds one names it; a resume encodes it again."""
    import io
    import pickle

    whole = tmp_path / "whole"
    dense.build(corpus, whole, chunk=3, progress=False)
    folder = tmp_path / "idx"
    for shard in ((0, 2), (1, 2)):  # every chunk written by the shards, not merged yet
        assert dense.build(corpus, folder, shard=shard, chunk=3, progress=False) is None
    victim = folder / "embeddings" / "chunk-0000000.npy"
    wrong = io.BytesIO()
    np.save(wrong, np.zeros((2, 384), dtype=np.float32))
    sound = victim.read_bytes()
    damaged = {"truncated": sound[: len(sound) // 2], "pickle": pickle.dumps({"not": "vectors"}), "empty": b""}
    victim.write_bytes(damaged.get(damage, wrong.getvalue()))
    with pytest.raises(IfqaError, match=f"{victim.name}: .*delete it and rerun the same command"):
        dense.merge(corpus, folder)
    manifest = dense.build(corpus, folder, chunk=3, progress=False)  # resumes: only the damaged chunk again
    assert manifest["passages"] == 8
    assert np.allclose(np.load(victim), np.load(whole / "embeddings" / victim.name), atol=1e-5)


def test_a_full_disk_while_writing_the_faiss_file_leaves_only_the_finished_chunks(corpus, tmp_path, monkeypatch):
    import faiss

    def full_disk(index, path):
        with open(path, "wb") as handle:
            handle.write(b"half an index")
        raise RuntimeError("Error in faiss::FileIOWriter: write failed: No space left on device")

    folder = tmp_path / "idx"
    monkeypatch.setattr(faiss, "write_index", full_disk)
    with pytest.raises(IfqaError, match="No space left on device.*finished chunks are kept"):
        dense.build(corpus, folder, chunk=3, progress=False)
    monkeypatch.undo()
    left = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    assert [p for p in left if "tmp" in p or p.endswith(".faiss")] == [] and len(
        [p for p in left if "chunk-" in p]
    ) == 3
    assert dense.build(corpus, folder, chunk=3, progress=False)["passages"] == 8  # the rerun merges, encoding nothing


def test_progress_counts_passages_as_batches_finish_and_a_resume_says_what_was_done(corpus, tmp_path, caplog):
    """A chunk of 4,096 passages is minutes on a CPU: a bar that moved per chunk sat at 0% for them."""
    from ifqa.retrieval.chunks import ChunkEncoder
    from ifqa.retrieval.encoders import DEFAULT_ENCODER

    dense.build(corpus, tmp_path / "idx", shard=(0, 2), chunk=4, progress=False)  # chunk 0 of 2
    encoder = ChunkEncoder(corpus, tmp_path / "idx", DEFAULT_ENCODER, None, "cpu", None, True, 2, 4)
    counted: list[int] = []
    written = list(encoder.encode_many([1], on_batch=counted.append))
    assert counted == [2, 2] and written == [4]  # every batch of 2 counted as it finished, then the chunk
    (tmp_path / "idx" / "embeddings" / "chunk-0000001.npy").unlink()
    with caplog.at_level("INFO", logger="ifqa"):
        dense.build(corpus, tmp_path / "idx", chunk=4, progress=False)
    assert "resuming; 4 of 8 passages were already encoded" in caplog.text


def test_every_way_to_build_a_dense_index_encodes_at_one_default_length(monkeypatch, tmp_path):
    """`ifqa index dense`, an experiment's index stage and the demo index read one default (an index
    stage without max_length once encoded at the model's own limit, 256 for MiniLM): the engine's
    settings."""
    from ifqa.experiments.build_stages import stage_settings
    from ifqa.retrieval import DENSE_MAX_LENGTH
    from ifqa.retrieval.engines import DenseSettings
    from ifqa.retrieval.specs import DEMO_INDEXES as DEMO

    assert DenseSettings().max_length == DENSE_MAX_LENGTH
    _, staged = stage_settings({"stage": "index", "name": "i", "engine": "faiss"}, tmp_path / "exp.yaml")
    assert staged == DenseSettings()
    assert DEMO.recipe("dense")["max_length"] == DENSE_MAX_LENGTH
    built = {}
    monkeypatch.setattr(dense, "encode", lambda corpus, folder, settings, **run: built.update(settings=settings))
    monkeypatch.setattr(dense, "merge", lambda *args, **kwargs: {})
    dense.build(tmp_path / "corpus.jsonl", tmp_path / "index", shard=(0, 2))
    assert built["settings"].max_length == DENSE_MAX_LENGTH


def test_index_dense_with_a_token_budget_writes_the_vectors_of_fixed_batches(cli, corpus, tmp_path):
    """``--max-batch-tokens``: the same index (vectors within float32 rounding of fixed batches) from batches
    sized by the passages' token counts; the one-line refusals of a bad budget stay the option checker's."""
    fixed, budgeted = tmp_path / "fixed", tmp_path / "budgeted"
    for folder, extra in ((fixed, ()), (budgeted, ("--max-batch-tokens", "100"))):
        result = cli("index", "dense", "--corpus", corpus, "-o", folder, "--chunk-size", "5", "--no-progress", *extra)
        assert result.returncode == 0, result.stderr
    for j in range(2):
        a, b = (np.load(f / "embeddings" / f"chunk-{j:07d}.npy") for f in (fixed, budgeted))
        np.testing.assert_allclose(b, a, rtol=0, atol=64 * np.finfo(np.float32).eps * np.abs(a).max())
    refused = cli("index", "dense", "--corpus", corpus, "-o", tmp_path / "bad", "--max-batch-tokens", "0")
    assert (
        refused.returncode != 0
        and len(refused.stderr.strip().splitlines()) == 1
        and "--max-batch-tokens" in refused.stderr
    )


def test_a_token_budget_with_a_tokenizer_that_counts_no_tokens_is_one_line_and_leaves_nothing(
    corpus, tmp_path, monkeypatch
):
    from ifqa.retrieval.encoders import SentenceEncoder

    monkeypatch.setattr(SentenceEncoder, "tokenizes_in_parallel", property(lambda self: False))
    with pytest.raises(IfqaError, match="--max-batch-tokens plans batches by token counts"):
        dense.build(corpus, tmp_path / "idx", max_batch_tokens=100, progress=False)
    assert not (tmp_path / "idx").exists()
