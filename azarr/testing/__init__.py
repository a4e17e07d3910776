"""Test utilities for third-party code: the store conformance suite (:mod:`azarr.testing.store`)."""
