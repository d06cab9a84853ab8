"""The dashboard's Jinja2 templates (`web/templates/`), shared by the modules that render pages."""

from __future__ import annotations

from importlib.resources import files

from fastapi.templating import Jinja2Templates

templates = Jinja2Templates(directory=str(files(__package__) / "templates"))
"""Autoescaping is on for .html templates: every crawled string is escaped."""
