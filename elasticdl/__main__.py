"""`python -m elasticdl` is the `elasticdl` command."""

import sys

from elasticdl.cli import main

sys.exit(main())
