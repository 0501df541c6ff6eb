"""``python -m memory_core.cli``: the ``memory-core`` command (:func:`memory_core.cli.main`)."""

import sys

from memory_core.cli import main

sys.exit(main())
