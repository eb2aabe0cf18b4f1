"""Exported CPU backends (ONNX Runtime, OpenVINO; fp32 or int8): the same vectors and ranks within
tolerance, a cache that is never stale, one line for every refusal, nothing half-written."""

import importlib.util
import json

import numpy as np
import pytest

from ifqa.errors import IfqaError
from ifqa.retrieval import dense, export_cache, exported
from ifqa.retrieval.exported import Runtime

pytestmark = pytest.mark.filterwarnings("ignore")
HAVE = {
    "onnx": all(importlib.util.find_spec(m) for m in ("onnx", "onnxruntime")),
    "openvino": importlib.util.find_spec("openvino") is not None,
    "nncf": importlib.util.find_spec("nncf") is not None,
}
needs_onnx = pytest.mark.skipif(not HAVE["onnx"], reason="pip install 'ifqa[onnx]'")
needs_openvino = pytest.mark.skipif(not HAVE["openvino"], reason="pip install 'ifqa[openvino]'")


@pytest.fixture(autouse=True)
def cache(tmp_path_factory, monkeypatch):
    folder = tmp_path_factory.getbasetemp() / "export-cache"
    monkeypatch.setenv("IFQA_CACHE_DIR", str(folder))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return folder / "exported"


def passages(corpus):
    return [json.loads(line) for line in corpus.read_text().splitlines()]


def test_backend_labels_and_refusals():
    assert Runtime.parse("openvino-int8") == Runtime("openvino", "int8") and Runtime.parse(None).label == "torch"
    with pytest.raises(IfqaError, match="--quantize int8 needs --runtime onnx or openvino"):
        Runtime("torch", "int8")
    with pytest.raises(IfqaError, match="--runtime 'tensorrt'"):
        Runtime("tensorrt")
    with pytest.raises(IfqaError, match="runs on the CPU"):
        Runtime("onnx").check("cuda")


def test_a_missing_package_names_the_extra(monkeypatch):
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(IfqaError, match=r"needs openvino, nncf: pip install 'ifqa\[openvino\]'"):
        Runtime("openvino", "int8").check()


@pytest.mark.parametrize(
    "label",
    [
        pytest.param("onnx", marks=[needs_onnx, pytest.mark.heavy]),  # the tiny model's exports below run by default
        pytest.param("onnx-int8", marks=[needs_onnx, pytest.mark.heavy]),  # the default run exports onnx fp32
        pytest.param("openvino", marks=[needs_openvino, pytest.mark.heavy]),
        pytest.param(
            "openvino-int8",
            marks=[
                needs_openvino,
                pytest.mark.slow,
                pytest.mark.heavy,
                pytest.mark.skipif(not HAVE["nncf"], reason="pip install 'ifqa[openvino]'"),
            ],
        ),
    ],
)
def test_exported_encoders_match_pytorch(corpus, label, cache):
    from ifqa.retrieval.encoders import load_encoder

    texts = passages(corpus)
    reference = load_encoder(device="cpu").encode_passages(texts)
    encoder = load_encoder(device="cpu", backend=label)
    vectors = encoder.encode_passages(texts, batch_size=3)
    assert vectors.shape == reference.shape
    assert np.min(np.sum(vectors * reference, axis=1)) > (0.97 if "int8" in label else 0.999)
    [folder] = [f for f in cache.iterdir() if f.name.endswith(f"-embedding-{label}")]
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["backend"] == label.split("-")[0] and manifest["probe_agreement"] > 0.97
    stamp = (folder / "manifest.json").stat().st_mtime_ns
    load_encoder(device="cpu", backend=label)  # from the cache
    assert (folder / "manifest.json").stat().st_mtime_ns == stamp


@needs_onnx
def test_a_stale_export_is_rebuilt_and_another_model_gets_its_own(tmp_path, monkeypatch, tiny_model, caplog):
    """The cache's mechanics, on the tiny model (the real one's exports are the test above); an
    export says about how long it will take, and how long it took."""
    from sentence_transformers import SentenceTransformer

    from ifqa.retrieval.encoders import load_encoder

    monkeypatch.setenv("IFQA_CACHE_DIR", str(tmp_path / "cache"))
    cache = tmp_path / "cache" / "exported"
    with caplog.at_level("INFO", logger="ifqa"):
        load_encoder(str(tiny_model), device="cpu", backend="onnx")
    assert "(once, about 5 s on 2 CPU cores" in caplog.text and "exported embedding to onnx in" in caplog.text
    [folder] = [f for f in cache.iterdir() if f.name.endswith("-embedding-onnx")]
    manifest = json.loads((folder / "manifest.json").read_text())
    (folder / "manifest.json").write_text(json.dumps({**manifest, "source_sha256": "0" * 64}))
    load_encoder(str(tiny_model), device="cpu", backend="onnx")
    assert json.loads((folder / "manifest.json").read_text())["source_sha256"] == manifest["source_sha256"]
    changed = SentenceTransformer(str(tiny_model), device="cpu")
    with __import__("torch").no_grad():
        next(changed.parameters()).add_(0.01)
    changed.save(str(tmp_path / "changed"))
    load_encoder(str(tmp_path / "changed"), device="cpu", backend="onnx")
    assert len([f for f in cache.iterdir() if f.name.endswith("-embedding-onnx")]) == 2


@needs_onnx
def test_a_failed_or_disagreeing_export_caches_nothing(tmp_path, monkeypatch, tiny_model):
    from ifqa.retrieval.encoders import load_encoder

    monkeypatch.setenv("IFQA_CACHE_DIR", str(tmp_path))
    cache = tmp_path / "exported"
    monkeypatch.setattr(exported, "TOLERANCE", {None: 1.01, "int8": 1.01})
    with pytest.raises(IfqaError, match="differs from it on a probe batch"):
        load_encoder(str(tiny_model), device="cpu", backend="onnx-int8")

    def broken(*args, **kwargs):
        raise RuntimeError("exporter crashed\nsecond line")

    monkeypatch.setattr(exported, "_export", broken)
    with pytest.raises(IfqaError, match=r"exporting to onnx failed \(RuntimeError: exporter crashed\)"):
        load_encoder(str(tiny_model), device="cpu", backend="onnx")
    assert not cache.exists() or not list(cache.iterdir())


@needs_openvino
@pytest.mark.heavy  # the real model exported to OpenVINO (19 s on 2 cores)
def test_an_index_built_with_a_backend_encodes_queries_with_it(corpus, tmp_path, cli):
    result = cli(
        "index",
        "dense",
        "--corpus",
        corpus,
        "-o",
        tmp_path / "idx",
        "--runtime",
        "openvino",
        "--chunk-size",
        "3",
        "--no-progress",
    )
    assert result.returncode == 0, result.stderr
    manifest = json.loads((tmp_path / "idx" / "manifest.json").read_text())
    assert manifest["params"]["backend"] == "openvino"
    from ifqa.retrieval.specs import open_index

    index = open_index(str(tmp_path / "idx"))
    assert index.encoder.backend.label == "openvino"
    [hits] = index.search(["Which metal conducts heat well?"], 1)
    assert index.passages[hits[0][0]]["id"] == "p2"
    torch_build = tmp_path / "torch"
    dense.build(corpus, torch_build, chunk=3, progress=False)  # at the default length, 128
    ours = np.concatenate([np.load(p) for p in sorted((tmp_path / "idx" / "embeddings").glob("chunk-*.npy"))])
    theirs = np.concatenate([np.load(p) for p in sorted((torch_build / "embeddings").glob("chunk-*.npy"))])
    assert np.min(np.sum(ours * theirs, axis=1)) > 0.999


@pytest.mark.parametrize(
    "args, message",
    [
        (["--quantize", "int8"], "--quantize int8 needs --runtime onnx or openvino"),
        (["--runtime", "onnx", "--device", "cuda"], "--runtime onnx runs on the CPU"),
    ],
)
def test_index_dense_backend_refusals_are_one_line(corpus, tmp_path, cli, args, message, monkeypatch):
    from tests.fake_cuda import FakeCuda

    FakeCuda(count=1).install(monkeypatch)  # a GPU machine: --device cuda passes its own check
    result = cli("index", "dense", "--corpus", corpus, "-o", tmp_path / "idx", *args)
    assert result.returncode == 1 and message in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and not (tmp_path / "idx").exists()


def test_the_export_estimate_scales_with_the_model():
    assert exported.export_estimate("openvino-int8", exported.MINILM_PARAMETERS) == "about 60 s"
    assert exported.export_estimate("onnx", exported.MINILM_PARAMETERS * 5) == "about 80 s"
    assert exported.export_estimate("openvino-int8", exported.MINILM_PARAMETERS * 5) == "about 5 min"


def test_auto_names_the_export_measured_fastest_for_this_kind_of_cpu(monkeypatch):
    """``--runtime auto`` resolves at once (manifests and caches name a real backend): int8 in
    OpenVINO given VNNI or AMX, in ONNX Runtime on a CPU with only AVX2; f32 in OpenVINO."""
    from ifqa.retrieval import exported

    monkeypatch.setattr(exported, "cpu_has_int8_dot_products", lambda: True)
    assert exported.Runtime.parse("auto-int8").label == "openvino-int8"
    assert exported.Runtime("auto").label == "openvino"
    monkeypatch.setattr(exported, "cpu_has_int8_dot_products", lambda: False)
    assert exported.Runtime.parse("auto-int8").label == "onnx-int8"
    assert exported.Runtime("auto", "int8").exported


@needs_onnx
def test_a_damaged_cached_export_is_found_before_use_and_exported_again(tmp_path, monkeypatch, caplog, tiny_model):
    """Issue #36: a truncated or deleted model file, a manifest that is a list or a folder, or a
    file swapped under the cache was used (a traceback) or left an index half built. Every file's
    checksum is in the manifest and checked before use; a damaged export is made again."""
    import shutil

    from ifqa.retrieval.encoders import load_encoder

    monkeypatch.setenv("IFQA_CACHE_DIR", str(tmp_path / "cache"))  # this test's own: one export in it
    cache = tmp_path / "cache" / "exported"
    reference = load_encoder(str(tiny_model), device="cpu").encode_passages([{"title": "T", "text": "a river"}])
    load_encoder(str(tiny_model), device="cpu", backend="onnx")
    [folder] = [f for f in cache.iterdir() if f.name.endswith("-embedding-onnx")]
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["files"] and all(len(digest) == 64 for digest in manifest["files"].values())
    wanted = {key: manifest[key] for key in ("kind", "backend", "quantize", "source_sha256", "inputs")}
    model = next(name for name in manifest["files"] if name.endswith(".onnx"))

    def damaged(how):
        copy = tmp_path / how
        shutil.copytree(folder, copy)
        if how == "truncated":
            (copy / model).write_bytes((copy / model).read_bytes()[:1000])
        elif how == "deleted":
            (copy / model).unlink()
        elif how == "swapped":
            data = bytearray((copy / model).read_bytes())
            data[len(data) // 2] ^= 0xFF  # same size, one byte changed
            (copy / model).write_bytes(bytes(data))
        elif how == "manifest a list":
            (copy / "manifest.json").write_text("[]")
        elif how == "manifest a folder":
            (copy / "manifest.json").unlink()
            (copy / "manifest.json").mkdir()
        return copy

    for how in ("truncated", "deleted", "swapped", "manifest a list", "manifest a folder"):
        assert export_cache.cached_problem(damaged(how), wanted), how
    assert export_cache.cached_problem(folder, wanted) is None
    (folder / model).write_bytes((folder / model).read_bytes()[:1000])  # the real cache, truncated
    with caplog.at_level("WARNING"):
        vectors = load_encoder(str(tiny_model), device="cpu", backend="onnx").encode_passages(
            [{"title": "T", "text": "a river"}]
        )
    assert "does not match its checksum" in caplog.text and float(np.sum(vectors * reference)) > 0.999
    assert export_cache.cached_problem(folder, wanted) is None
    assert not [p for p in cache.iterdir() if p.name.startswith(".")]  # no staging folder left
    shutil.rmtree(folder)
    folder.symlink_to(folder.name)  # a link to itself: a loop, where the export should be
    load_encoder(str(tiny_model), device="cpu", backend="onnx")
    assert folder.is_dir() and not folder.is_symlink()
    assert not [p for p in cache.iterdir() if p.name.startswith(".")]  # the loop removed, not left as .old.tmp


@needs_onnx
@pytest.mark.heavy  # two processes importing torch; the staging and publish rules run by default above
def test_two_processes_exporting_the_same_model_both_succeed(tmp_path, tiny_model):
    import os
    import subprocess
    import sys

    code = f"from ifqa.retrieval.encoders import load_encoder; load_encoder({str(tiny_model)!r}, backend='onnx')"
    env = {**os.environ, "IFQA_CACHE_DIR": str(tmp_path), "HF_HUB_OFFLINE": "1"}
    jobs = [
        subprocess.Popen([sys.executable, "-c", code], env=env, stderr=subprocess.PIPE, text=True) for _ in range(2)
    ]
    results = [(job.wait(timeout=600), job.stderr.read()) for job in jobs]
    assert all(code == 0 for code, _ in results), results
    exports = sorted(p.name for p in (tmp_path / "exported").iterdir())
    assert len(exports) == 1 and exports[0].endswith("-embedding-onnx"), exports


def test_a_cache_that_cannot_be_written_is_one_line(tmp_path, monkeypatch):
    import tempfile

    def read_only(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(tempfile, "mkdtemp", read_only)
    with pytest.raises(IfqaError, match="export cache cannot be written \\(Permission denied\\); set IFQA_CACHE_DIR"):
        export_cache.staging_folder(tmp_path / "exported" / "x-embedding-onnx")


def test_a_damaged_export_moved_aside_by_a_killed_run_is_removed_by_the_next(tmp_path, monkeypatch):
    """Trust round 6: a repaired export left ``*.tmp.old`` in the cache. The folder a damaged export is
    moved to is named as staging is, so a run killed before removing it has it removed next time."""
    import os

    folder = tmp_path / "exported" / "model-embedding-onnx"
    folder.mkdir(parents=True)
    (folder / "manifest.json").write_text("[]")  # damaged
    staging = export_cache.staging_folder(folder)
    (staging / "manifest.json").write_text("{}")
    monkeypatch.setattr(export_cache, "remove_path", lambda *args, **kwargs: None)  # killed before removing
    export_cache.publish(staging, folder, {})
    monkeypatch.undo()
    [left] = [p for p in folder.parent.iterdir() if p != folder]
    assert left.name.startswith(f".{folder.name}.{os.getpid()}.") and left.name.endswith(".tmp")
    left.rename(left.with_name(left.name.replace(f".{os.getpid()}.", ".999999999.", 1)))  # its process gone
    export_cache.staging_folder(folder)
    assert sorted(p.name for p in folder.parent.iterdir() if not p.name.endswith(".tmp")) == [folder.name]
    assert len(list(folder.parent.glob("*.old*"))) == 0
