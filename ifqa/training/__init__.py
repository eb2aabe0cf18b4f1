"""What ifqa trains, on one loop (``loop.py``): readers on a run file's questions and passages (FiD, the
LLM reader: ``runs.py``) and retrieval models on questions with negatives mined from an index (the
reranker, the retriever, the question-agnostic control: ``jobs.py``), each kind one registry entry
(``kinds.py``) with its recipe (``recipes.py``).

Validity rules every trained model follows (see docs/ARCHITECTURE.md): only a training split is learned
from, never a dev or test split; dev scores are recorded with the model. Retrieval models read passages as
text without titles (IfQA's gold passages have none, every other passage has one), and other questions'
gold passages are among their negatives (gold passages share a style a word classifier can spot).
"""
