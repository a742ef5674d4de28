"""Interactive explorers (ipywidgets), one module per lesson."""
