"""``python -m scheduling.sim``: see :mod:`scheduling.sim.cli`."""

import sys

from scheduling.sim.cli import main

sys.exit(main())
