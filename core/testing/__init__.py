"""Test doubles for jevqueue and for code that uses it: scripted hosts and models, a
recording audit sink, a network guard, and the plugin conformance suite."""
