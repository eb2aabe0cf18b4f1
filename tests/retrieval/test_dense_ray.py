"""Dense encoding on a local Ray: the same chunk files, byte for byte, as one process; resumes."""

import pytest

from ifqa.retrieval import dense

pytestmark = [pytest.mark.filterwarnings("ignore::DeprecationWarning"), pytest.mark.slow]


@pytest.fixture(scope="module")
def local_ray():
    ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'ifqa[ray]')")
    try:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    except Exception as exc:  # no shared memory, no free ports ...: Ray cannot start on this machine
        pytest.skip(f"a local Ray cannot start here: {exc}")
    yield ray
    ray.shutdown()


def _chunks(folder):
    return {p.name: p.read_bytes() for p in sorted((folder / "embeddings").glob("chunk-*.npy"))}


@pytest.mark.heavy  # a local Ray cluster (33 s on 2 cores)
def test_ray_writes_the_same_chunks_as_one_process_and_resumes(local_ray, corpus, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    single = tmp_path / "single"
    dense.build(corpus, single, chunk=2, progress=False, threads=1)
    on_ray = tmp_path / "ray"
    dense.encode(corpus, on_ray, chunk=2, shard=(0, 2), progress=False, threads=1)  # half done, as if interrupted
    done = {name: (on_ray / "embeddings" / name).stat().st_mtime_ns for name in _chunks(on_ray)}
    assert len(done) == 2
    manifest = dense.build(corpus, on_ray, chunk=2, progress=False, ray="local")
    assert all((on_ray / "embeddings" / name).stat().st_mtime_ns == stamp for name, stamp in done.items())  # kept
    assert _chunks(on_ray) == _chunks(single) and len(_chunks(single)) == 4  # byte-identical
    assert manifest["passages"] == 8
    assert (on_ray / dense.FAISS_FILE).read_bytes() == (single / dense.FAISS_FILE).read_bytes()


def test_ray_and_shard_together_are_refused(cli, corpus, tmp_path):
    result = cli("index", "dense", "--corpus", corpus, "-o", tmp_path / "idx", "--ray", "--shard", "0/2")
    assert result.returncode == 1 and "--ray spreads the chunks itself; leave out --shard" in result.stderr
