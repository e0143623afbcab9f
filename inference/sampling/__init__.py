"""The sampling pipeline: `stages` (every stage in one table: penalty, temperature, top-k, top-p, min-p, DRY, XTC,
mirostat...), `pipeline` (the settings, the stages in their order, display order and the one draw with an explicit
u), `step_view` (one step's probabilities as the charts read them)."""
