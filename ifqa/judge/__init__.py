"""An LLM judge: does each prediction give a gold answer under the question's premise? (Long answers
defeat exact match; docs/evaluation.md.) A model on any backend ``ifqa read llm`` takes, through the same
session; its prompt is ``prompts/judge.txt``, its verdicts are read by ``ifqa evaluate --judgments``."""
