"""The sampling pipeline: `pipeline` (settings, stages, the draw with an explicit u), `samplers` (the
stateful and less common samplers: DRY, XTC, mirostat...), `step_view` (one step's probabilities as the
charts read them)."""
