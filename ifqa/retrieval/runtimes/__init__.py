"""CPU runtimes an encoder or cross-encoder can be exported to (``--runtime``), one module each with a
``RUNTIME`` object (``modules``, ``extra``, ``convert``, ``load``: the ``RUNTIMES`` row of
docs/ARCHITECTURE.md; ``load`` returns the input names, a ``feed -> array`` function and the precision)."""
