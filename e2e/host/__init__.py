"""TODO face."""
