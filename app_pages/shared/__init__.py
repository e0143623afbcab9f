"""Streamlit glue the pages share, one module per job (models, sidebar, layout, captions, slots, shared results…)."""
