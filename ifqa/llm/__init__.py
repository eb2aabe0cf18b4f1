"""Model access shared by everything that prompts a model (readers, the judge, the twins, query
rewriting, ``ifqa serve``): the backend contract (``protocol``), one module per backend
(``openai_backend``, ``hf_backend``, ``llamacpp_backend``, ``vllm_backend``), a persistent response
cache (``cache``), cached, counted, concurrent generation (``generation``), the settings every
prompting command shares (``config``) and the one session they all prompt through (``session``)."""
