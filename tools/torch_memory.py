#!/usr/bin/env python3
"""Measures the live bytes of one real PyTorch training step at bucketsim's marks:

    tools/torch_memory.py FILE.py:build_model --batch FILE.py:make_batch [--optimizer sgd]
        [--optimizer-impl for-loop|foreach|fused] [--weight-decay X] [--device cpu|cuda] [--json]

The code is the recorder's, tools/recorder/measure.py (whose docstring says how it measures).
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from recorder.measure import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
