"""``python -m lookplangraph.cli``: the ``lookplangraph`` command."""

import sys

from lookplangraph.cli import main

sys.exit(main())
