"""The device check's own scripts (tools/device/), on this machine: program_diff.py on programs
that are equal, equal but for their tensor ids, and different (the op's index and name said;
exit 1), and a file that is not JSON (exit 2); fsdp2_check.py's flags for each configuration
fsdp2_step.py measures, accepted by `bucketsim gen program` on a one-block Llama program.
Python's standard library and the bucketsim binary (BUCKETSIM) only."""

import copy
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tools", "device"))

import fsdp2_check  # noqa: E402
import program_diff  # noqa: E402

LLAMA = os.path.join(ROOT, "tests", "fuzz", "seeds", "program", "llama1l-bf16-flash.json")


def load(path):
    with open(path) as f:
        return json.load(f)


class ProgramDiffTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.program = load(LLAMA)

    def tearDown(self):
        self.dir.cleanup()

    def write(self, name, program):
        path = os.path.join(self.dir.name, name)
        with open(path, "w") as f:
            json.dump(program, f)
        return path

    def run_diff(self, a, b):
        return subprocess.run([sys.executable, os.path.join(ROOT, "tools", "device",
                                                            "program_diff.py"), a, b],
                              capture_output=True, text=True)

    def test_equal_programs_and_the_target_block_ignored(self):
        other = copy.deepcopy(self.program)
        other["target"] = {"device": "somewhere else"}
        other["description"] = "another"
        run = self.run_diff(self.write("a.json", self.program), self.write("b.json", other))
        self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
        self.assertIn("0 difference(s)", run.stdout)

    def test_tensor_ids_are_compared_by_first_appearance(self):
        text = json.dumps(self.program)
        ids = sorted({e["id"] for op in self.program["forward"] for e in op.get("outputs", [])} |
                     {t["id"] for t in self.program["inputs"]}, key=len, reverse=True)
        for tensor_id in ids:  # longest first: t12 before t1
            text = text.replace(f'"{tensor_id}"', f'"x{tensor_id}"')
        renamed = json.loads(text)
        self.assertNotEqual(renamed, self.program)
        shown, total = program_diff.differences(self.program, renamed, 5)
        self.assertEqual((shown, total), ([], 0))

    def test_a_changed_op_is_named_with_its_index(self):
        other = copy.deepcopy(self.program)
        index, op = next((i, op) for i, op in enumerate(other["forward"])
                         if op["op"] == "run" and op.get("outputs"))
        op["outputs"][0]["bytes"] += 512
        run = self.run_diff(self.write("a.json", self.program), self.write("b.json", other))
        self.assertEqual(run.returncode, 1)
        self.assertIn("1 difference(s)", run.stdout)
        self.assertIn(f"forward[{index}] {op['name']}: outputs:", run.stdout)

    def test_bad_file(self):
        bad = os.path.join(self.dir.name, "bad.json")
        with open(bad, "w") as f:
            f.write("{not json")
        run = self.run_diff(bad, self.write("a.json", self.program))
        self.assertEqual(run.returncode, 2)
        self.assertIn(f"program_diff: {bad}:", run.stderr)


class Fsdp2CheckFlagsTest(unittest.TestCase):
    CONFIGS = [dict(checkpoint="none"), dict(checkpoint="full"),
               dict(checkpoint="full", last_reshard="false"), dict(checkpoint="full", offload=True)]

    def test_each_configuration_is_accepted_by_gen_program(self):
        bucketsim = os.environ.get("BUCKETSIM", os.path.join(ROOT, "build", "bucketsim"))
        with tempfile.TemporaryDirectory() as out:
            for extra in self.CONFIGS:
                config = dict(wrap=["TransformerBlock"], param_dtype="bf16", reduce_dtype="fp32",
                              last_reshard="true", offload=False)
                config.update(extra)
                flags = fsdp2_check.gen_flags(config, 1)
                run = subprocess.run([bucketsim, "gen", "program", LLAMA, *flags, "-o",
                                      os.path.join(out, "t.json")], capture_output=True,
                                     text=True)
                self.assertEqual(run.returncode, 0, f"{flags}: {run.stderr}")
                if extra.get("last_reshard") == "false":
                    self.assertIn("reshard_after_forward=False (--unit-setting)", run.stderr)
                if extra.get("offload"):
                    self.assertIn("--offload-params", flags)

    def test_labels(self):
        measured = {"config": dict(checkpoint="full", offload=True, last_reshard="false"),
                    "alloc_conf": "expandable_segments:True"}
        self.assertEqual(fsdp2_check.label(measured),
                         "ckpt full, offload, last unit kept, expandable_segments:True")


if __name__ == "__main__":
    unittest.main()
