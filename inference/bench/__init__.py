"""Every benchmark in one place: `python -m inference.bench [--json PATH] [--pages]` (`cli.py`), one module per area,
each returning its keys as a dict. Figures are reported, never asserted in tests; the latest whole run per CPU kind is
docs/BENCHMARKS.md. `students` and `hall` are the class load drivers, run on their own (`python -m inference.bench.students`).
"""
