"""The GPU suite's sections, one module each (``benchmarks/gpu_suite.py`` runs them): the work folder,
the inputs, the rows and goals (``suite``), and FiD, dense encoding, reranking and the GPU tests."""
