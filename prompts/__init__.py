"""Prompt templates and chain-of-thought rationales, installed as the package data ``ifqa.prompts``."""
