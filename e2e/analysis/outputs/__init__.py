"""Outputs compared prompt by prompt, whether an arm is safe to merge, and GSM8K agreement."""
