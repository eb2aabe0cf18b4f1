"""Encoders and cross-encoders exported for CPU inference: ONNX Runtime or OpenVINO, fp32 or int8.

Which is fastest depends on the CPU (``fastest_export``, ``--runtime auto``); PyTorch's own dynamic
int8 is not offered: it moved MiniLM's embeddings to a cosine of 0.85. An export is a derived artifact,
made on first use and cached (``export_cache``) under a checksum of its source (its configuration and
every weight), so a changed model is never served a stale one. Before it is cached, its outputs on a
probe batch are compared with the PyTorch model's; beyond tolerance it is refused and nothing is
written. int8 calibration and the probe use the packaged demo passages and questions (real Wikipedia
text), so an export is the same whichever command made it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ifqa.errors import IfqaError
from ifqa.paths import cache_dir
from ifqa.registry import RUNTIMES, RuntimeNames
from ifqa.retrieval.export_cache import MANIFEST, cached_problem, publish, sha256, staging_folder
from ifqa.version import __version__

log = logging.getLogger(__name__)

QUANTIZATIONS = ("int8",)
# lowest cosine (embeddings) or rank correlation (scores) to the PyTorch model on the probe batch
TOLERANCE = {None: 0.999, "int8": 0.97}
INPUTS = ("input_ids", "attention_mask", "token_type_ids")
#: Seconds an export (calibration and checks included) took for all-MiniLM-L6-v2 (22.7M parameters)
#: on the 2-core test machine (tests/retrieval/test_exported.py): the log's estimate scales them.
EXPORT_SECONDS = {"onnx": 15, "onnx-int8": 15, "openvino": 15, "openvino-int8": 60}
MINILM_PARAMETERS = 22_713_216


def export_estimate(label: str, parameters: int) -> str:
    """About how long exporting a model of ``parameters`` to ``label`` takes on 2 CPU cores."""
    seconds = EXPORT_SECONDS.get(label, 60) * max(parameters, 1) / MINILM_PARAMETERS
    return (
        f"about {max(5, round(seconds, -1 if seconds >= 20 else 0)):.0f} s"
        if seconds < 90
        else f"about {seconds / 60:.0f} min"
    )


@dataclass(frozen=True)
class Runtime:
    """Where a model runs: ``torch`` (any device), or exported to ``onnx``/``openvino`` (CPU), optionally int8."""

    name: str = "torch"
    quantize: str | None = None

    def __post_init__(self) -> None:
        if self.name == "auto":  # resolved here, so manifests and caches only ever name a real backend
            object.__setattr__(self, "name", fastest_export(self.quantize))
        if self.name != "torch" and self.name not in RUNTIMES:
            raise IfqaError(f"--runtime {self.name!r}: choose from {', '.join(RuntimeNames())}")
        if self.quantize not in (None, *QUANTIZATIONS):
            raise IfqaError(f"--quantize {self.quantize!r}: choose from {', '.join(QUANTIZATIONS)}")
        if self.quantize and self.name == "torch":
            raise IfqaError(
                "--quantize int8 needs --runtime onnx or openvino (PyTorch's dynamic int8 moved "
                "MiniLM's embeddings to a cosine of 0.85)"
            )

    @classmethod
    def parse(cls, label: str | None) -> Runtime:
        """``torch``, ``onnx``, ``openvino``, ``onnx-int8``, ``openvino-int8`` (as manifests write it),
        or ``auto``/``auto-int8`` (``fastest_export``)."""
        name, _, quantize = (label or "torch").partition("-")
        return cls(name, quantize or None)

    @property
    def label(self) -> str:
        return self.name + (f"-{self.quantize}" if self.quantize else "")

    @property
    def exported(self) -> bool:
        return self.name != "torch"

    def check(self, device: str | None = None) -> None:
        """The packages this backend needs, and a CPU: one line with the install command otherwise."""
        if not self.exported:
            return
        if device and device != "cpu":
            raise IfqaError(f"--runtime {self.name} runs on the CPU; use --runtime torch on {device}")
        import importlib.util

        runtime = RUNTIMES.get(self.name)
        missing = [module for module in runtime.modules(self.quantize) if importlib.util.find_spec(module) is None]
        if missing:
            raise IfqaError(f"--runtime {self.label} needs {', '.join(missing)}: pip install 'ifqa[{runtime.extra}]'")


def cpu_has_int8_dot_products() -> bool:
    """VNNI or AMX: the instructions that make int8 matrix products fast on a CPU."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return any(flag in flags for flag in ("avx512_vnni", "avx_vnni", "amx_int8"))


def fastest_export(quantize: str | None) -> str:
    """What ``--runtime auto`` means on this CPU, by benchmarks/cpu_backends.py (docs/benchmarks.md):
    int8 runs fastest in OpenVINO where the CPU has VNNI or AMX (3.3x fp32 PyTorch encoding on
    AVX-512 VNNI) and in ONNX Runtime where it has only AVX2 (OpenVINO's int8 was no faster than
    fp32 there); in f32, OpenVINO was the faster on both. Another registered runtime is taken when
    neither is installed."""
    import importlib.util

    preferred = ["openvino", "onnx"] if (not quantize or cpu_has_int8_dot_products()) else ["onnx", "openvino"]
    candidates = [n for n in preferred if n in RUNTIMES] + [n for n in RUNTIMES.names() if n not in preferred]

    def installed(name: str) -> bool:
        return all(importlib.util.find_spec(m) is not None for m in RUNTIMES.get(name).modules(quantize))

    return next((name for name in candidates if installed(name)), candidates[0])


def checksum(module) -> str:
    """SHA-256 of a model's structure (its repr: modules, pooling, lengths), configuration, and every
    parameter and buffer, in order."""
    digest = hashlib.sha256(repr(module).encode())
    config = getattr(getattr(module, "inner", module), "config", None)
    if config is not None and hasattr(config, "to_json_string"):
        digest.update(config.to_json_string().encode())
    for name, tensor in module.state_dict().items():
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().float().numpy().tobytes())
    return digest.hexdigest()


class Exported:
    """An exported model called like the PyTorch one: tokenized features in, a float tensor out."""

    def __init__(self, folder: Path, backend: Runtime):
        import torch

        self.folder, self.backend = folder, backend
        self._names, self._run, self.precision = RUNTIMES.get(backend.name).load(
            folder, torch.get_num_threads(), backend.quantize
        )

    def __call__(self, features: dict):
        import torch

        feed = {
            name: np.asarray(features[name].cpu() if hasattr(features[name], "cpu") else features[name], dtype=np.int64)
            for name in self._names
        }
        return torch.from_numpy(np.ascontiguousarray(self._run(feed), dtype=np.float32))


def load_exported(
    module, tokenize: Callable[[list], dict], kind: str, backend: Runtime, probe: list, calibration: list
) -> Exported:
    """The export of ``module`` (a ``features -> tensor`` PyTorch module) for ``backend``: from the
    cache when its manifest matches, else exported, checked on ``probe`` and cached."""
    backend.check("cpu")
    source = checksum(module)
    folder = cache_dir() / "exported" / f"{source[:20]}-{kind}-{backend.label}"
    manifest = {"kind": kind, "backend": backend.name, "quantize": backend.quantize, "source_sha256": source}
    manifest["inputs"] = list(tokenize(probe[:2]))
    problem = cached_problem(folder, manifest)
    if problem is None:
        try:
            return Exported(folder, backend)
        except Exception as exc:  # noqa: BLE001 - removed or replaced between the check and the load
            problem = f"it could not be loaded ({type(exc).__name__})"
    if problem != "not exported yet":
        log.warning("%s: %s; exporting again", folder, problem)
    parameters = sum(p.numel() for p in module.parameters())
    took = export_estimate(backend.label, parameters)
    log.info("exporting %s to %s (once, %s on 2 CPU cores; cached in %s)", kind, backend.label, took, folder)
    started = time.perf_counter()
    staging = staging_folder(folder)  # private to this process: a concurrent export of the same model has its own
    try:
        _export(module, tokenize, backend, staging, calibration)
        agreement = _agreement(module, Exported(staging, backend), tokenize(probe), kind)
        if agreement < TOLERANCE[backend.quantize]:
            raise IfqaError(
                f"the {backend.label} export of this model differs from it on a probe batch "
                f"({'lowest cosine' if kind == 'embedding' else 'rank correlation'} {agreement:.4f}, "
                f"needs {TOLERANCE[backend.quantize]}); use --runtime torch"
            )
        files = {str(p.relative_to(staging)): sha256(p) for p in sorted(staging.rglob("*")) if p.is_file()}
        record = {**manifest, "ifqa": __version__, "probe_agreement": round(agreement, 6), "files": files}
        (staging / MANIFEST).write_text(json.dumps(record, indent=2))
        publish(staging, folder, manifest)
        log.info("exported %s to %s in %.0f s", kind, backend.label, time.perf_counter() - started)
    except IfqaError:
        raise
    except Exception as exc:  # an exporter's own failure: one line, nothing cached
        first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
        raise IfqaError(
            f"exporting to {backend.label} failed ({type(exc).__name__}: {first}); use --runtime torch"
        ) from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return Exported(folder, backend)


def _modules():
    """The PyTorch modules exports are traced from (defined lazily: torch is imported on use)."""
    import torch

    class Embedding(torch.nn.Module):
        """A sentence-transformers model's sentence embedding."""

        def __init__(self, model):
            super().__init__()
            self.inner = model

        def forward(self, features: dict):
            return self.inner(features)["sentence_embedding"]

    class Score(Embedding):
        """A cross-encoder's last logit."""

        def forward(self, features: dict):
            return self.inner(**features).logits[:, -1]

    class Positional(torch.nn.Module):
        """Positional tensors in, as ``torch.onnx.export`` passes them."""

        def __init__(self, model, names: list[str]):
            super().__init__()
            self.inner, self.names = model, names

        def forward(self, *tensors):
            return self.inner(dict(zip(self.names, tensors)))

    return Embedding, Score, Positional


def embedding_module(sentence_transformer):
    return _modules()[0](sentence_transformer).eval()


def score_module(sequence_classifier):
    return _modules()[1](sequence_classifier).eval()


def _export(module, tokenize, backend: Runtime, folder: Path, calibration: list) -> None:
    import warnings

    import torch

    example = tokenize(calibration[:4])
    names = [name for name in INPUTS if name in example]
    axes = {name: {0: "batch", 1: "tokens"} for name in names}
    onnx_path = folder / "model.fp32.onnx"
    with warnings.catch_warnings(), torch.inference_mode(False), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            _modules()[2](module, names).eval(),
            tuple(example[name] for name in names),
            str(onnx_path),
            input_names=names,
            output_names=["output"],
            dynamic_axes={**axes, "output": {0: "batch"}},
            opset_version=17,
            dynamo=False,
        )
    batches = [
        {
            name: np.asarray(value, dtype=np.int64)
            for name, value in tokenize(calibration[i : i + 16]).items()
            if name in names
        }
        for i in range(0, len(calibration), 16)
    ]
    RUNTIMES.get(backend.name).convert(onnx_path, folder, backend.quantize, batches)
    onnx_path.unlink(missing_ok=True)
    for leftover in folder.glob("*.data"):
        leftover.unlink()


def _agreement(module, exported: Exported, features: dict, kind: str) -> float:
    import torch

    with torch.inference_mode():
        expected = module(features).float().numpy()
    got = exported(features).numpy()
    if kind == "embedding":
        a = expected / np.linalg.norm(expected, axis=1, keepdims=True)
        b = got / np.linalg.norm(got, axis=1, keepdims=True)
        return float(np.min(np.sum(a * b, axis=1)))
    ranks = lambda values: np.argsort(np.argsort(values.ravel())).astype(np.float64)  # noqa: E731
    return (
        float(np.corrcoef(ranks(expected), ranks(got))[0, 1])
        if expected.size > 1
        else float(np.isclose(expected, got, atol=1e-3).all())
    )
