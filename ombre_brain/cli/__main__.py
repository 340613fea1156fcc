"""`python -m ombre_brain.cli`: the same as the `ombre-brain` console script."""

import sys

from . import main

sys.exit(main())
