"""Scoring, one module per job: answers (EM/F1), passages (has_answer, gold matching, recall),
categories (breakdowns), significance (intervals, paired tests), summary and report."""
