"""pytest plugin that serves ``megatron.energon`` from stoker during a test run.

Example::

    python -m pytest -p stoker.energon_alias.pytest_plugin path/to/tests
"""

from stoker.energon_alias import install

install()
