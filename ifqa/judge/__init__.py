"""An LLM judge: does each prediction give a gold answer under the question's premise?

Long answers defeat exact match, so papers that read with LLMs also report a judge (FlashRAG's
``llm_judge``, BERGEN's LLM evaluation). The judge is a model on any backend ``ifqa read llm`` takes,
through the same machinery (response cache, retries, concurrency, redaction, reasoning models); its
prompt is ``prompts/judge.txt``. Each verdict and its reason are written per question (judgments
JSONL, with a manifest naming the judge model, the prompt's SHA-256 and the predictions file's), and
``ifqa evaluate --judgments`` reports the judge's accuracy beside EM, F1 and containment, with its
agreement with EM (``eval/judged.py``), so a judge that says yes to everything shows.
"""
