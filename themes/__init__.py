"""evaltui's built-in Textual themes, one TOML file each (see evaltui/tui/themes.py).

Installed as the package ``evaltui._themes`` (pyproject maps it here), so the code
finds these files the same way in a source checkout, an editable and a wheel install.
A user's own themes go in the config dir's ``themes/`` instead.
"""
