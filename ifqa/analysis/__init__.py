"""Analyses that read what readers wrote: does a reader follow the counterfactual premise (``premise``)?"""
