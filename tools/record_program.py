#!/usr/bin/env python3
"""Records a real PyTorch model's program for bucketsim (traces/program-v1.schema.json).

    /usr/bin/python3 tools/record_program.py my_models.py:build_model \\
        --batch my_models.py:make_batch --wrap TransformerBlock -o model.json
    bucketsim gen program model.json --world-size 64 ... -o trace.json

The recorder is the package tools/recorder/: its __init__.py says what a program holds and how
each part is recorded, and lists its modules; docs/your-model.md is the guide.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from recorder.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
