"""Learning retrieval from IfQA: training data with mined hard negatives, a cross-encoder reranker,
a bi-encoder retriever, the question-agnostic control, and model cards.

Validity rules every learned component follows (see docs/ARCHITECTURE.md): passages are read as
text without titles (IfQA's gold passages have none, every other passage has one); other
questions' gold passages are among the negatives (gold passages share a style a word classifier
can spot); only a training split is learned from, and dev scores go into the model card.
"""
