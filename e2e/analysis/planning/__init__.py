"""Advice before a sweep: the runs a design needs for the effect asked."""
