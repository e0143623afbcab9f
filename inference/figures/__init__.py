"""Charts and HTML, one module per page, named like the page: `generate` (with the token
chips), `sampling`, `prefill_decode`, `kv_cache`, `quantization`, `cost`. `style` holds what
they share (palette, base layout, legends, token labels, line/bar/hover helpers).

Pure functions from data to a `plotly.graph_objects.Figure` or an HTML string: no
Streamlit, no model runs. A figure module imports `style` and compute modules, never
another page's figure module.
"""
