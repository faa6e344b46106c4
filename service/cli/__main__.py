"""`python -m procsift.service.cli`: the same as the `procsift` command."""

import sys

from procsift.service.cli import main

sys.exit(main())
