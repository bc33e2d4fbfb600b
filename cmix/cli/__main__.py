"""``python -m cmix.cli``: the ``cmix`` command."""

import sys

from . import main

sys.exit(main())
