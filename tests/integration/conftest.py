"""Fixtures for the integration tests.

The real S3 server (SeaweedFS ``weed mini``, fixture ``weed``) is defined in tests/conftest.py,
so that the docs tests (tests/docs) share the one server of a session.
"""
