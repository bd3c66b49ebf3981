"""python3 -m recorder (from tools/): the recorder's command, as tools/record_program.py."""

import sys

from .cli import main

sys.exit(main())
