"""``python -m azarr.cli``: the same as the ``azarr`` executable."""

from azarr.cli import main

main()
