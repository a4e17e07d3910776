"""Test utilities for third-party code: the store conformance suite (`azarr.testing.store`)."""
