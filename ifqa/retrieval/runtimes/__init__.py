"""CPU runtimes an encoder or cross-encoder can be exported to (``--runtime``), one module each.

A runtime is an object with ``modules(quantize)`` (what must be installed), ``extra`` (the pip
extra that installs it), ``convert(onnx_path, folder, quantize, batches)`` (from the traced ONNX
graph, int8 calibrated on ``batches``) and ``load(folder, threads)`` (returning its input names, a
``feed -> array`` function and the precision it runs at). ``ifqa.registry.RUNTIMES`` lists them;
adding one is a module here plus a line there.
"""
