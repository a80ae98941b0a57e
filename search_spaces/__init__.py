"""Search-space declarations (YAML), shipped as package data."""
