"""A capacity search's margins and estimate."""
