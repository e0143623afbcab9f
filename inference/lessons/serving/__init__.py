"""Serve many: request traces (request_trace), replay, stats, engine metrics, roofline, experiments, random-weight model, students per server, bench keys, figures."""
