"""llama-cpp-python's own reading of a GGUF file: the reference the tests and benchmarks/llamacpp_reader.py
compare ifqa's llama.cpp backend with."""

from __future__ import annotations


def reference_llama(path, **settings):
    """llama-cpp-python's own ``Llama`` (the reference the tests compare with), its weights out of llama.cpp's
    AMX buffers as ifqa loads them (local_models.open_model: its AMX kernel crashes on quantized weights)."""
    from unittest import mock

    import llama_cpp
    from llama_cpp import llama_cpp as bindings

    from ifqa.llm import local_models

    defaults = bindings.llama_model_default_params

    def without_repacking():
        params = defaults()
        params.use_extra_bufts = not local_models.amx_repacks()
        return params

    with mock.patch.object(bindings, "llama_model_default_params", without_repacking):
        return llama_cpp.Llama(model_path=str(path), verbose=False, **settings)
