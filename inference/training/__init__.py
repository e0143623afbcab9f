"""Training the bundled models: `train` (presets dense, draft, moe), `corpus` (the TinyStories split),
`evaluate` (bits per byte), `model_card`, `moe_stats` (routing statistics written at card time)."""
