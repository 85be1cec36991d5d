"""``python -m agent``: see :mod:`agent.cli`."""

import sys

from agent.cli import main

sys.exit(main())
