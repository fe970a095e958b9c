"""Reproducible benchmark of langchain-compact against langchain, langmem, trim_messages and
deepagents.

Run ``python -m bench`` (``--quick`` for a tiny smoke run). See ``bench/__main__.py`` for what
runs, ``bench/peers.py`` for how each system is configured and driven, ``bench/metrics.py``
for what is measured and ``bench/report.py`` for the tables, plot and README section.
"""
