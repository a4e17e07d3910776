"""Arrays and groups: the async node API over a store."""

from azarr.core.accessors import BlockIndex, OIndex, VIndex
from azarr.core.array import AsyncArray
from azarr.core.attributes import Attributes
from azarr.core.group import AsyncGroup

__all__ = ["AsyncArray", "AsyncGroup", "Attributes", "BlockIndex", "OIndex", "VIndex"]
