"""Energon's constants: the files inside a prepared dataset, and the API version stoker mirrors.

``megatron.energon.flavors.webdataset.config`` serves these (see :mod:`stoker.energon_alias`);
the values come from stoker's own format module, so they cannot drift apart.

Example:
    >>> from stoker.energon_alias.config import INFO_JSON_FILENAME, MAIN_FOLDER_NAME
    >>> f"{MAIN_FOLDER_NAME}/{INFO_JSON_FILENAME}"
    '.nv-meta/.info.json'
"""

from __future__ import annotations

import posixpath

from stoker.format import meta

MAIN_FOLDER_NAME = meta.META_DIR
INFO_JSON_FILENAME = posixpath.basename(meta.INFO_JSON)
INFO_YAML_FILENAME = posixpath.basename(meta.INFO_YAML)
INDEX_SQLITE_FILENAME = posixpath.basename(meta.INDEX_SQLITE)
INDEX_UUID_FILENAME = posixpath.basename(meta.INDEX_UUID)
SPLIT_YAML_FILENAME = meta.DEFAULT_SPLIT_CONFIG
JOIN_INDEX_FILENAME = "join_index.bin"  # written next to a join's metadataset by Energon

#: ``megatron.energon.__version__`` under the alias: the Energon API stoker mirrors, for clients
#: that choose code paths by Energon's version (stoker's own is ``stoker.__version__``).
ENERGON_VERSION = "7.4.1"
