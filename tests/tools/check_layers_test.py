#!/usr/bin/env python3
"""tools/check_layers.py refuses an upward include and passes the layers as they are."""
import pathlib
import subprocess
import sys
import tempfile
import unittest

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHECK = ROOT / "tools" / "check_layers.py"


def run(src):
    return subprocess.run([sys.executable, str(CHECK), str(src)], capture_output=True, text=True)


class CheckLayersTest(unittest.TestCase):
    def tree(self, files):
        directory = tempfile.TemporaryDirectory()
        self.addCleanup(directory.cleanup)
        for name, text in files.items():
            path = pathlib.Path(directory.name) / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        return pathlib.Path(directory.name)

    def test_the_source_tree_has_no_upward_include(self):
        result = run(ROOT / "src")
        self.assertEqual(result.returncode, 0, result.stdout)

    def test_an_include_of_a_room_above_fails_with_the_line(self):
        src = self.tree({
            "core/status.h": "#pragma once\n",
            "engine/replay.h": '#include "core/status.h"\n#include "policy/policy_spec.h"\n',
            "core/trace_header.h": '#pragma once\n\n#include "engine/replay.h"\n',
        })
        result = run(src)
        self.assertEqual(result.returncode, 1)
        self.assertEqual(result.stdout,
                         "core/trace_header.h:3: includes engine/, above core/ (which may include "
                         "nothing of src)\n")

    def test_a_room_outside_the_table_is_named(self):
        result = run(self.tree({"plugins/x.cc": '#include "core/status.h"\n'}))
        self.assertEqual(result.returncode, 1)
        self.assertIn("plugins/x.cc: room 'plugins' is not in the layer table", result.stdout)


if __name__ == "__main__":
    unittest.main()
