"""ifqa: retrieve-then-read question answering under counterfactual presuppositions (IfQA).

Stages (one subpackage or module each): ``data`` (IfQA splits), ``corpus`` (Wikipedia passages),
``retrieval`` (BM25, dense, fusion), ``readers`` (FiD, LLMs), ``evaluation`` (the scorer).
Importing ``ifqa`` is cheap on purpose: heavy libraries load only inside the stage that needs them.
"""

__version__ = "0.1.0"
