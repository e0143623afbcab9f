"""Serve many: request traces (request_trace), replay, stats, engine metrics, roofline, experiments, random-weight
model, figures. The class load driver and the bench keys are in inference/bench/."""
