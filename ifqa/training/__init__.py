"""What ifqa trains, on one loop (``loop.py``): readers on a run file's questions and passages (``runs.py``) and
retrieval models on questions with negatives mined from an index (``jobs.py``), each kind one registry entry
(``kinds.py``) with its recipe (``recipes.py``). Every trained model learns from a training split alone and records
its dev scores with it; retrieval models read passages as text without titles (IfQA's gold passages have none) and
see other questions' gold passages among their negatives (``data.py``: gold passages share a style a word classifier
can spot). The rules in full: docs/ARCHITECTURE.md.
"""
