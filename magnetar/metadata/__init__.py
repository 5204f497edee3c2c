"""See api.py and the module docstrings."""
