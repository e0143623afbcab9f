"""The small core every lesson uses; it imports no lesson.

Models (`loader`, `bundled`, `model_config`), the run (`run`: Trace, StepRecord, Generation) over one forward
pass interface (`forward`: transformers' forward for a local model,
`remote`'s request to a serving engine, a shortlist wrapper for a speculative draft; chosen once per run), `kv_cache`, `tokens`, `prompting`, `limits`, `paths`, `machine`, `measuring`,
`flops`, `routing` (what an MoE router chose, per step), `quantize` (bfloat16/int8/int4 copies) and
`calculator` (public model shapes: KV bytes, fit).
"""
