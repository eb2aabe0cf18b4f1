"""OpenVINO: the graph converted to OpenVINO's format, int8 by NNCF's post-training quantization."""

from __future__ import annotations

from pathlib import Path


class OpenVinoRuntime:
    extra = "openvino"

    def modules(self, quantize: str | None) -> list[str]:
        return ["openvino"] + (["nncf"] if quantize else [])

    def convert(self, onnx_path: Path, folder: Path, quantize: str | None, batches: list[dict]) -> None:
        import openvino as ov

        model = ov.convert_model(str(onnx_path))
        if quantize:
            import nncf

            model = nncf.quantize(
                model,
                nncf.Dataset(batches),
                model_type=nncf.ModelType.TRANSFORMER,
                subset_size=sum(len(b["input_ids"]) for b in batches),
            )
        ov.save_model(model, str(folder / "model.xml"), compress_to_fp16=False)

    def load(self, folder: Path, threads: int, quantize: str | None):
        import openvino as ov

        # f32 for what is not int8: OpenVINO's default on CPUs with AVX-512 BF16 or AMX is bf16, 10-70%
        # faster, but it reorders a cross-encoder's close scores (rank correlation 0.55 on a small model)
        compiled = ov.Core().compile_model(
            str(folder / "model.xml"),
            "CPU",
            {"PERFORMANCE_HINT": "LATENCY", "INFERENCE_NUM_THREADS": threads, "INFERENCE_PRECISION_HINT": "f32"},
        )
        names = [i.get_any_name() for i in compiled.inputs]
        return names, lambda feed: compiled(feed)[0], str(compiled.get_property("INFERENCE_PRECISION_HINT"))


RUNTIME = OpenVinoRuntime()
