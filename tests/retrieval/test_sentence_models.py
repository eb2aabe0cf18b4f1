"""Sentence-transformers folders read through transformers alone: the vectors and scores equal the library's
own (the reference here, at fp32) for every layout and pooling mode ifqa reads; anything it does not read is
one line naming the folder and what it lacks, never pooled another way."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import numpy as np
import pytest

from ifqa.errors import IfqaError
from ifqa.retrieval.encoders import SentenceEncoder, demo_texts, resolve
from ifqa.retrieval.rerank import CrossEncoderReranker
from ifqa.retrieval.sentence_models import POOLING_MODES
from tests.training.tiny import MINILM

st = pytest.importorskip("sentence_transformers")
try:
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer
except ImportError:  # sentence-transformers before 6
    from sentence_transformers.models import Normalize, Pooling, Transformer

TEXTS = [*demo_texts()[:6], "A short one.", "  spaced  Å ", " ".join(demo_texts()[:5])]  # one cut at the limit
#: unit vectors in fp32 from the same operations in another order: a few float32 epsilons per component
TOLERANCE = 64 * float(np.finfo(np.float32).eps)


def built(tmp_path, tiny_model, mode: str, normalize: bool, prompt: str | None = None, max_length: int = 64):
    """A sentence-transformers folder written by the library itself around the tiny BERT."""
    word = Transformer(str(tiny_model), max_seq_length=max_length)
    dimension = getattr(word, "get_embedding_dimension", None) or word.get_word_embedding_dimension
    modules = [word, Pooling(dimension(), mode), *([Normalize()] if normalize else [])]
    prompts = {"query": prompt} if prompt else None
    model = st.SentenceTransformer(modules=modules, prompts=prompts, default_prompt_name="query" if prompt else None)
    folder = tmp_path / f"{mode}-{normalize}-{bool(prompt)}"
    model.save(str(folder))
    return str(folder)


def reference(folder: str, texts=TEXTS) -> np.ndarray:
    model = st.SentenceTransformer(folder, device="cpu")
    return model.encode(texts, convert_to_numpy=True, normalize_embeddings=True, batch_size=4)


@pytest.mark.numerics
@pytest.mark.parametrize("mode", POOLING_MODES)
def test_every_pooling_mode_gives_the_librarys_vectors(tmp_path, tiny_model, mode):
    folder = built(tmp_path, tiny_model, mode, normalize=mode == "mean")
    ours = SentenceEncoder(folder, device="cpu").encode_queries(TEXTS, batch_size=4)
    assert np.abs(ours - reference(folder)).max() <= TOLERANCE


@pytest.mark.numerics
def test_the_shipped_minilm_a_prompt_and_a_plain_transformers_folder_give_the_librarys_vectors(tmp_path, tiny_model):
    """The packaged all-MiniLM-L6-v2 (the legacy pooling config), a default prompt put before each text, and
    a transformers folder without modules.json (mean pooling, as the library assembles one)."""
    for folder in (resolve(MINILM), built(tmp_path, tiny_model, "mean", True, prompt="query: "), str(tiny_model)):
        encoder = SentenceEncoder(folder, device="cpu")
        ours = encoder.encode_passages([{"title": "", "text": t} for t in TEXTS], batch_size=4)
        assert np.abs(ours - reference(folder)).max() <= TOLERANCE, folder


@pytest.mark.numerics
def test_a_cross_encoder_scores_as_the_library_does(tmp_path, tiny_model):
    """A CrossEncoder folder as sentence-transformers saves one: the same length limit and the same logits."""
    import torch

    folder = tmp_path / "ce"
    encoder = st.CrossEncoder(str(tiny_model), num_labels=1, max_length=48)
    encoder.save(str(folder))
    pairs = [("If the sea rose, what would flood?", t) for t in TEXTS]
    theirs = st.CrossEncoder(str(folder), device="cpu").predict(pairs, activation_fn=torch.nn.Identity(), batch_size=4)
    reranker = CrossEncoderReranker(str(folder), device="cpu", batch_size=4)
    ours = reranker.score_many([(q, [t for _, t in pairs], [0.0] * len(pairs)) for q in {pairs[0][0]}])[0]
    library = st.CrossEncoder(str(folder), device="cpu")
    assert reranker.encoder.max_seq_length == getattr(library, "max_seq_length", None) or library.max_length == 48
    assert np.abs(np.asarray(ours) - theirs).max() <= TOLERANCE * max(1.0, float(np.abs(theirs).max()))


def test_what_is_not_read_is_one_line_naming_the_folder(tmp_path, tiny_model):
    empty = tmp_path / "empty"
    empty.mkdir()
    weighted = built(tmp_path, tiny_model, "weightedmean", normalize=False)
    dense = tmp_path / "dense"
    shutil.copytree(built(tmp_path, tiny_model, "mean", normalize=False), dense)
    modules = json.loads((dense / "modules.json").read_text())
    (dense / "modules.json").write_text(
        json.dumps([*modules, {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"}])
    )
    cases = [
        (empty, "neither modules.json"),
        (weighted, "pooling weightedmean is not implemented"),
        (dense, "Dense is not implemented"),
    ]
    for folder, expected in cases:
        with pytest.raises(IfqaError, match=expected) as raised:
            SentenceEncoder(str(folder), device="cpu")
        assert str(folder) in str(raised.value) and "\n" not in str(raised.value)


def _heavy_imports_after(args: list[str]) -> list[str]:
    """Which of sentence-transformers and scikit-learn a fresh interpreter imported running ``ifqa ARGS``."""
    code = (
        "import sys, atexit\n"
        "atexit.register(lambda: print('LIBRARIES', [m for m in ('sentence_transformers', 'sklearn') if m in sys.modules]))\n"
        f"from ifqa.cli import main\nmain({args!r})\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert "LIBRARIES" in result.stdout, result.stderr[-2000:]
    return json.loads(result.stdout.split("LIBRARIES ", 1)[1].splitlines()[0].replace("'", '"'))


@pytest.mark.slow
def test_index_dense_and_rerank_import_no_sentence_transformers(tmp_path, tiny_model):
    """The commands that only run a model never import the library (its import costs seconds)."""
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps({"id": str(i), "title": "", "text": t}) + "\n" for i, t in enumerate(TEXTS)))
    index = ["index", "dense", "--corpus", str(corpus), "--encoder", str(tiny_model), "-o", str(tmp_path / "index")]
    assert _heavy_imports_after([*index, "--device", "cpu", "--no-progress"]) == []
    folder = tmp_path / "ce"
    st.CrossEncoder(str(tiny_model), num_labels=1, max_length=48).save(str(folder))
    run = tmp_path / "run.jsonl"
    ctxs = [{"id": str(i), "title": "", "text": t, "score": 1.0} for i, t in enumerate(TEXTS)]
    run.write_text(json.dumps({"qid": "1", "question": "If the sea rose?", "answers": ["x"], "ctxs": ctxs}) + "\n")
    rerank = ["rerank", "--run", str(run), "--model", str(folder), "-o", str(tmp_path / "reranked.jsonl")]
    assert _heavy_imports_after([*rerank, "--device", "cpu", "--no-progress"]) == []
