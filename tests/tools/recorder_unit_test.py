#!/usr/bin/env python3
"""Unit tests of the recorder's modules (tools/recorder/), in this process, on tiny inputs: the
command line and its errors (cli), FILE.py:FUNCTION specs and the user's errors naming their
function and line (load), the module tree as FSDP instances (modules), the optimizer key
(optimizer), the batch and the loss (step), one op's FLOPs and gradient kinds (ops), tensors
by storage (tensors), the meta device (meta), the program document and its bytes (program),
and one recording of a one-layer model on meta (record). The end-to-end recordings of real
models are record_program_test.py's. Exit code 77 (ctest: skipped) when torch is missing."""

import contextlib
import functools
import io
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
TOOLS = os.path.join(os.path.dirname(os.path.dirname(HERE)), "tools")
sys.path.insert(0, TOOLS)

try:
    import torch
    from torch import nn
except ImportError:
    print("recorder_unit_test: torch is not installed (tools/setup.sh): skipped")
    sys.exit(77)

from recorder import (batch, cli, load, meta, modules, ops, optimizer, program, step,  # noqa: E402
                      tensors)
from recorder.errors import UsageError  # noqa: E402
from recorder.record import record  # noqa: E402


class UserFiles(unittest.TestCase):
    """A directory of the user's Python files, each named uniquely: the loader keeps a module
    per file name (user_NAME)."""

    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)

    def user_file(self, source):
        path = os.path.join(self.dir.name, f"unit_{self.id().split('.')[-1]}.py")
        with open(path, "w") as f:
            f.write(textwrap.dedent(source))
        return path


class Specs(UserFiles):
    def test_a_spec_splits_at_its_last_colon(self):
        self.assertEqual(load.parse_spec("models/gpt.py:build", "model"),
                         ("models/gpt.py", "build"))
        self.assertEqual(load.parse_spec("C:/models/gpt.py:build", "model"),
                         ("C:/models/gpt.py", "build"))

    def test_a_spec_without_a_function_is_refused(self):
        with self.assertRaises(load.LoadError) as e:
            load.parse_spec("models/gpt.py", "--batch")
        self.assertEqual(str(e.exception), "--batch: 'models/gpt.py' must be FILE.py:FUNCTION")
        self.assertIsInstance(e.exception, SystemExit)  # ends a command that does not catch it

    def test_a_function_is_loaded_from_its_file(self):
        path = self.user_file("""
            def build():
                return 42
        """)
        self.assertEqual(load.load_function(f"{path}:build", "model")(), 42)

    def test_a_missing_name_lists_what_the_file_defines(self):
        path = self.user_file("""
            import os
            VALUE = 3
            def build():
                pass
            def make_batch():
                pass
            def _private():
                pass
        """)
        with self.assertRaises(load.LoadError) as e:
            load.load_function(f"{path}:build_model", "model")
        self.assertEqual(str(e.exception), f"model: '{path}' defines no 'build_model' (it "
                                           "defines: build, make_batch)")
        with self.assertRaises(load.LoadError) as e:
            load.load_function(f"{path}:VALUE", "model")
        self.assertEqual(str(e.exception), f"model: '{path}:VALUE' is not callable")

    def test_a_missing_file(self):
        with self.assertRaises(load.LoadError) as e:
            load.load_function("no/such/file.py:build", "--wrap-policy")
        self.assertEqual(str(e.exception), "--wrap-policy: no such file 'no/such/file.py'")

    def test_a_file_that_fails_to_import_says_why_each_time(self):
        path = self.user_file("""
            SIZE = 1 // 0
            def build():
                pass
        """)
        for _ in range(2):  # not left half-imported for the next load
            with self.assertRaises(load.LoadError) as e:
                load.load_function(f"{path}:build", "model")
            self.assertEqual(str(e.exception), f"model: importing '{path}' failed: "
                                               "ZeroDivisionError: integer division or modulo by "
                                               "zero")


class UserErrors(UserFiles):
    def test_a_users_function_is_named_by_its_file(self):
        path = self.user_file("""
            def build():
                pass
        """)
        fn = load.load_function(f"{path}:build", "model")
        self.assertEqual(load.function_name(fn), f"{os.path.basename(path)}:build()")
        self.assertEqual(load.function_name(len), "len()")
        self.assertEqual(load.function_name(functools.partial(len)), "partial()")

    def test_a_raising_function_is_named_with_its_line(self):
        path = self.user_file("""
            def build():
                config = {}
                return config["depth"]
        """)
        name = os.path.basename(path)
        fn = load.load_function(f"{path}:build", "model")
        with self.assertRaises(UsageError) as e:
            load.call_user(fn)
        self.assertEqual(str(e.exception), f"{name}:build() raised KeyError: 'depth', at "
                                           f"{name}:4 in build: `return config[\"depth\"]`")
        with self.assertRaises(UsageError) as e:
            load.call_user(fn, "the batch function")
        self.assertTrue(str(e.exception).startswith("the batch function raised KeyError"))

    def test_the_innermost_user_frame_is_named(self):
        path = self.user_file("""
            def inner():
                raise ValueError("deep")
            def build():
                return inner()
        """)
        fn = load.load_function(f"{path}:build", "model")
        with self.assertRaises(UsageError) as e:
            load.call_user(fn)
        self.assertTrue(str(e.exception).endswith(
            f", at {os.path.basename(path)}:3 in inner: `raise ValueError(\"deep\")`"))

    def test_the_shipped_examples_are_user_code(self):
        # A frame in tools/examples/ is named (only torch and tools/recorder/ are skipped).
        example = os.path.join(TOOLS, "examples", "an_example.py")
        code = compile("def build():\n    raise ValueError('in an example')\n", example, "exec")
        scope = {}
        exec(code, scope)
        with self.assertRaises(UsageError) as e:
            load.call_user(scope["build"])
        self.assertIn(", at an_example.py:2 in build:", str(e.exception))

    def test_frames_of_torch_and_the_recorder_are_not_the_users(self):
        # torch.zeros raises in C++ under call_user (tools/recorder/load.py): no user frame.
        with self.assertRaises(UsageError) as e:
            load.call_user(functools.partial(torch.zeros, -1))
        self.assertTrue(str(e.exception).startswith("partial() raised RuntimeError: "))
        self.assertNotIn(", at ", str(e.exception))


class CommandLine(unittest.TestCase):
    def main(self, *argv):
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            status = cli.main(list(argv))
        return status, err.getvalue()

    def test_defaults(self):
        args = cli.make_parser().parse_args(["m.py:build", "--batch", "m.py:batch", "-o", "p.json"])
        self.assertEqual((args.model, args.batch, args.output), ("m.py:build", "m.py:batch",
                                                                 "p.json"))
        self.assertEqual((args.wrap, args.wrap_policy, args.no_flatten, args.device,
                          args.optimizer, args.optimizer_impl, args.weight_decay,
                          args.no_measure), ([], None, False, "cpu", None, None, None, False))

    def test_wrap_repeats(self):
        args = cli.make_parser().parse_args(["m.py:build", "--batch", "m.py:batch", "--wrap", "A",
                                             "--wrap", "B", "-o", "p.json"])
        self.assertEqual(args.wrap, ["A", "B"])

    def test_an_unknown_flag_gets_the_closest_one(self):
        base = ["m.py:build", "--batch", "m.py:batch", "-o", "p.json"]
        self.assertEqual(self.main(*base, "--wrapp", "Head"), (2, (
            "record_program: error: unknown flag '--wrapp'; did you mean '--wrap'? (see "
            "'record_program.py --help')\n")))
        self.assertEqual(self.main(*base, "--no-mesure=1"), (2, (
            "record_program: error: unknown flag '--no-mesure=1'; did you mean '--no-measure'? "
            "(see 'record_program.py --help')\n")))
        self.assertEqual(self.main(*base, "--zzzzzz"), (2, (
            "record_program: error: unknown flag '--zzzzzz' (see 'record_program.py --help')\n")))
        self.assertEqual(self.main(*base, "stray"), (2, (
            "record_program: error: unexpected argument 'stray' (see 'record_program.py "
            "--help')\n")))

    def test_usage_errors_exit_2_and_write_nothing(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "p.json")
            base = ["nope.py:build", "--batch", "nope.py:batch", "-o", out]
            self.assertEqual(self.main(*base, "--weight-decay", "0.1"), (2, (
                "record_program: error: --weight-decay needs --optimizer (the optimizer it "
                "sets)\n")))
            self.assertEqual(self.main(*base), (2, (
                "record_program: error: model: no such file 'nope.py'\n")))
            self.assertEqual(os.listdir(d), [])

    def test_record_program_py_and_python_m_recorder_are_the_command(self):
        for cmd, cwd in (([sys.executable, os.path.join(TOOLS, "record_program.py"), "--help"],
                          HERE),
                         ([sys.executable, "-m", "recorder", "--help"], TOOLS)):
            with self.subTest(cmd[1]):
                run = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
                self.assertEqual(run.returncode, 0, run.stderr)
                self.assertIn("Record a real PyTorch model's program for `bucketsim gen "
                              "program`.", run.stdout)
                self.assertIn("--wrap-policy FILE.py:FN", run.stdout)


class OptimizerKey(unittest.TestCase):
    def test_the_key_holds_what_was_given(self):
        self.assertIsNone(optimizer.optimizer_key(None, None, None))
        self.assertEqual(optimizer.optimizer_key("adam", None, None), {"name": "adam"})
        self.assertEqual(optimizer.optimizer_key("adamw", "foreach", 0.0),
                         {"name": "adamw", "impl": "foreach", "weight_decay": 0.0})

    def test_settings_need_the_optimizer_and_a_decay_of_0_or_more(self):
        for given, message in (((None, "fused", None), "--optimizer-impl needs --optimizer (the "
                                                       "optimizer it sets)"),
                               ((None, "fused", 0.1), "--optimizer-impl needs --optimizer"),
                               ((None, None, 0.1), "--weight-decay needs --optimizer"),
                               (("sgd", None, -0.5), "--weight-decay -0.5: must be 0 or more")):
            with self.subTest(given):
                with self.assertRaises(UsageError) as e:
                    optimizer.optimizer_key(*given)
                self.assertTrue(str(e.exception).startswith(message), str(e.exception))

    def test_the_measured_step_fills_in_the_devices_defaults(self):
        self.assertEqual(optimizer.measured_step(None, "cpu"),
                         {"name": "sgd", "impl": None, "weight_decay": None})
        self.assertEqual(optimizer.measured_step({"name": "adamw"}, "cpu"),
                         {"name": "adamw", "impl": "for-loop", "weight_decay": 0.01})
        self.assertEqual(optimizer.measured_step({"name": "adam", "impl": "foreach",
                                                  "weight_decay": 0.1}, "cpu"),
                         {"name": "adam", "impl": "foreach", "weight_decay": 0.1})

    def test_the_note_names_the_step(self):
        step_ = {"name": "adamw", "impl": "for-loop", "weight_decay": 0.01}
        self.assertEqual(optimizer.step_note(step_, {"name": "adamw"}),
                         "; optimizer adamw (for-loop, weight decay 0.01)")
        self.assertEqual(optimizer.step_note(optimizer.measured_step(None, "cpu"), None),
                         "; optimizer sgd")

    def test_make_optimizer_by_bucketsims_names(self):
        params = [nn.Parameter(torch.ones(2))]
        sgd = optimizer.make_optimizer("sgd-momentum", params)
        self.assertIsInstance(sgd, torch.optim.SGD)
        self.assertEqual(sgd.defaults["momentum"], 0.9)
        self.assertFalse(optimizer.make_optimizer("adam", params).defaults["foreach"])
        self.assertTrue(optimizer.make_optimizer("adamw", params, impl="foreach",
                                                 weight_decay=0.5).defaults["foreach"])
        with self.assertRaises(optimizer.OptimizerError) as e:
            optimizer.make_optimizer("adam", params, impl="vectorized")
        self.assertEqual(str(e.exception), "unknown optimizer implementation 'vectorized' "
                                           "(expected for-loop, foreach, fused)")
        with self.assertRaises(optimizer.OptimizerError):
            optimizer.make_optimizer("lamb", params)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(2, 2)


class Net(nn.Module):
    """embed, blocks.0, blocks.1, head: named_modules() order."""

    def __init__(self, tied=False):
        super().__init__()
        self.embed = nn.Linear(2, 2)
        self.blocks = nn.Sequential(Block(), Block())
        self.head = nn.Linear(2, 2)
        if tied:
            self.head.weight = self.embed.weight


class Instances(unittest.TestCase):
    def names(self, model, instances):
        named = {m: n or "root" for n, m in model.named_modules()}
        return [named[m] for m in instances]

    def test_wrap_by_class_in_named_modules_order(self):
        net = Net()
        self.assertEqual(self.names(net, modules.choose_instances(net, ["Block"], None)),
                         ["root", "blocks.0", "blocks.1"])

    def test_wrap_policy_and_wrap_together(self):
        net = Net()
        chosen = modules.choose_instances(net, ["Block"], lambda m, name: name == "head")
        self.assertEqual(self.names(net, chosen), ["root", "blocks.0", "blocks.1", "head"])
        self.assertEqual(self.names(net, modules.choose_instances(net, [], None)), ["root"])

    def test_a_class_the_model_lacks_lists_its_classes(self):
        with self.assertRaises(UsageError) as e:
            modules.choose_instances(Net(), ["Block", "TransformerBlock"], None)
        self.assertEqual(str(e.exception), "--wrap TransformerBlock: the model has no module of "
                                           "that class (its classes: Block, Linear, Net, "
                                           "Sequential)")

    def test_a_raising_policy_names_the_module(self):
        def policy(module, name):
            raise KeyError(name)
        with self.assertRaises(UsageError) as e:
            modules.choose_instances(Net(), [], policy)
        self.assertEqual(str(e.exception), "--wrap-policy failed on module 'embed': KeyError: "
                                           "'embed'")

    def test_the_innermost_instance_owns_a_parameter(self):
        net = Net()
        owned = modules.owned_params(net, [net, net.blocks[0]])
        self.assertEqual([(f, name) for f, name, _ in owned], [
            (0, "embed.weight"), (0, "embed.bias"), (1, "blocks.0.fc.weight"),
            (1, "blocks.0.fc.bias"), (0, "blocks.1.fc.weight"), (0, "blocks.1.fc.bias"),
            (0, "head.weight"), (0, "head.bias")])
        self.assertIs(owned[2][2], net.blocks[0].fc.weight)

    def test_a_tied_parameter_is_owned_once_by_its_first_name(self):
        net = Net(tied=True)
        owned = modules.owned_params(net, [net])
        self.assertEqual([name for _, name, _ in owned], [
            "embed.weight", "embed.bias", "blocks.0.fc.weight", "blocks.0.fc.bias",
            "blocks.1.fc.weight", "blocks.1.fc.bias", "head.bias"])
        modules.check_shared_params(net, [net])  # one instance around both users: fine
        modules.check_shared_params(net, [net, net.blocks[0]])

    def test_a_tied_parameter_split_across_instances_is_refused(self):
        net = Net(tied=True)
        with self.assertRaises(UsageError) as e:
            modules.check_shared_params(net, [net, net.embed])
        self.assertTrue(str(e.exception).startswith(
            "a parameter is shared across FSDP instances: 'embed.weight' (instance 'embed'), "
            "'head.weight' (instance 'root'). FSDP needs a shared parameter in one instance"))

    def test_a_wrapped_models_units_are_its_own(self):
        fsdp1 = {"implementation": "fsdp1", "settings": {"sharding_strategy": "FULL_SHARD"}}
        fsdp2 = {"implementation": "fsdp2", "settings": {}}
        self.assertTrue(modules.check_wrapped(fsdp1, [], None, True))
        self.assertFalse(modules.check_wrapped(fsdp2, [], None, False))
        for wrap, policy in ((["Block"], None), ([], lambda m, name: False)):
            with self.assertRaises(UsageError) as e:
                modules.check_wrapped(fsdp2, wrap, policy, True)
            self.assertEqual(str(e.exception), "build_model() returned a model already wrapped "
                                               "with fsdp2: its units are read from it; --wrap "
                                               "and --wrap-policy apply only to an unwrapped "
                                               "model")
        with self.assertRaises(UsageError) as e:
            modules.check_wrapped(fsdp1, [], None, False)
        self.assertIn("--no-flatten does not apply", str(e.exception))


class BatchAndLoss(unittest.TestCase):
    def test_the_batch_is_the_forwards_arguments(self):
        t = torch.ones(2)
        self.assertEqual(step.as_call(t), ([t], {}))
        self.assertEqual(step.as_call((t, 3, None)), ([t, 3, None], {}))
        self.assertEqual(step.as_call({"input_ids": t, "use_cache": False}),
                         ([], {"input_ids": t, "use_cache": False}))

    def test_a_batch_that_cannot_be_arguments_is_refused(self):
        with self.assertRaises(step.BatchError) as e:
            step.as_call({1: torch.ones(2)})
        self.assertEqual(str(e.exception), "make_batch() returned a dict with key 1: keyword "
                                           "arguments are named by strings")
        with self.assertRaises(step.BatchError) as e:
            step.as_call([torch.ones(2), [torch.ones(2)]])
        self.assertTrue(str(e.exception).startswith("make_batch()[1] is a list: the forward's "
                                                    "arguments must be tensors or plain values"))

    def test_the_loss_from_the_forwards_output(self):
        scalar = torch.tensor(2.0)
        self.assertIs(step.to_loss(scalar), scalar)
        self.assertEqual(step.to_loss(torch.tensor([1.0, 3.0])).item(), 2.0)
        self.assertIs(step.to_loss((scalar, torch.ones(3))), scalar)
        self.assertIs(step.to_loss({"logits": torch.ones(3), "loss": scalar}), scalar)

    def test_an_output_without_a_loss_says_what_it_held(self):
        for out, message in (({"logits": torch.ones(3)}, "the forward returned a dict without a "
                                                         "'loss' (its keys: 'logits'): give the "
                                                         "model what it computes its loss from"),
                             ([], "the forward returned an empty list"),
                             (3, "the forward returned int, not a tensor, a tuple or a dict with "
                                 "a 'loss'")):
            with self.subTest(message):
                with self.assertRaises(step.LossError) as e:
                    step.to_loss(out)
                self.assertTrue(str(e.exception).startswith(message), str(e.exception))


class Ops(unittest.TestCase):
    def test_flops_of_matmuls_from_shapes_else_one_per_output_element(self):
        x, w, bias = torch.ones(2, 8), torch.ones(8, 16), torch.ones(16)
        out = torch.ones(2, 16)
        self.assertEqual(ops.op_flops(torch.ops.aten.mm.default, (x, w), [out]), 512.0)
        self.assertEqual(ops.op_flops(torch.ops.aten.addmm.default, (bias, x, w), [out]), 512.0)
        self.assertEqual(ops.op_flops(torch.ops.aten.relu.default, (out,), [out]), 32.0)

    def test_what_the_backward_gives_each_input(self):
        a, row = torch.ones(2, 3), torch.ones(3)
        self.assertEqual(ops.grad_kind("view", a, torch.ones(6)), "pass")
        self.assertEqual(ops.grad_kind("add", a, a), "pass")
        self.assertEqual(ops.grad_kind("add", row, a), "new")  # broadcast: summed down
        self.assertEqual(ops.grad_kind("mm", a, a), "new")
        self.assertEqual(ops.grad_kind("detach", a, a), "none")
        self.assertEqual(ops.input_ref("t3", "new"), "t3")
        self.assertEqual(ops.input_ref("t3", "pass"), {"tensor": "t3", "grad": "pass"})


class Tensors(unittest.TestCase):
    def test_a_view_is_its_storage(self):
        base = torch.ones(4, 4)
        view = base[1:3]
        self.assertEqual(tensors.storage_key(view), tensors.storage_key(base))
        self.assertNotEqual(tensors.storage_key(base.clone()), tensors.storage_key(base))
        self.assertEqual(tensors.storage_bytes(view), 64)

    def test_dtypes_by_the_programs_names(self):
        self.assertEqual(tensors.dtype_name(torch.bfloat16), "bf16")
        self.assertEqual(tensors.dtype_name(torch.int64), "int64")
        self.assertEqual(tensors.dtype_name(torch.complex64), "complex64")
        self.assertEqual(tensors.dtype_name(torch.complex128), "complex128")
        with self.assertRaises(UsageError) as e:
            tensors.dtype_name(torch.quint8)
        self.assertEqual(str(e.exception), "a tensor of dtype torch.quint8 is not expressible "
                                           "in a program (it knows bf16, bool, complex128, "
                                           + ("complex32, " if hasattr(torch, "complex32") else "")
                                           + "complex64, fp16, fp32, fp64, int16, int32, int64, "
                                           "int8, uint8)")


class Meta(unittest.TestCase):
    def test_factories_that_name_no_device_make_meta_tensors(self):
        with meta.OnMeta():
            made = [torch.zeros(2, 3), torch.tensor([1, 2]), torch.ones(2, device="cpu")]
        self.assertEqual([t.device.type for t in made], ["meta", "meta", "cpu"])

    def test_an_op_without_a_meta_kernel_runs_on_all_ones(self):
        out = meta.meta_fallback(torch.ops.aten.nonzero.default,
                                 (torch.empty(3, device="meta"),), {})
        self.assertEqual((out.device.type, tuple(out.shape)), ("meta", (3, 1)))


TINY = textwrap.dedent("""\
    {
     "format": "bucketsim-program",
     "schema_version": 1,
     "description": "tiny",
     "instances": [
      {
       "name": "root",
       "params": [
        {
         "name": "fc.weight",
         "numel": 4
        }
       ]
      }
     ],
     "inputs": [
      {
       "id": "t0",
       "bytes": 8,
       "dtype": "fp32",
       "shape": [
        2
       ]
      }
     ],
     "forward": [
      {
       "op": "run",
       "name": "fc:mv",
       "flops": 8.0,
       "uses": [
        "root"
       ],
       "param_reads": [
        "fc.weight"
       ],
       "inputs": [
        "t0"
       ],
       "outputs": [
        {
         "id": "t1",
         "bytes": 8,
         "dtype": "fp32",
         "shape": [
          2
         ]
        }
       ]
      }
     ],
     "loss": "t1"
    }
""")


class Program(unittest.TestCase):
    def tiny(self, **extra):
        run = {"op": "run", "name": "fc:mv", "flops": 8.0, "uses": ["root"],
               "param_reads": ["fc.weight"], "inputs": ["t0"],
               "outputs": [{"id": "t1", "bytes": 8, "dtype": "fp32", "shape": [2]}],
               "saves": []}
        return program.program_of("tiny", [("root", [("fc.weight", 4, 4)])],
                                  [{"id": "t0", "bytes": 8, "dtype": "fp32", "shape": [2]}],
                                  [run], "t1", flatten=False, **extra)

    def test_a_tiny_program_is_written_byte_for_byte(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "tiny.json")
            program.write(self.tiny(), path)
            with open(path) as f:
                self.assertEqual(f.read(), TINY)
            self.assertEqual(os.listdir(d), ["tiny.json"])  # no PATH.tmp left

    def test_held_and_fsdp_only_where_there_are_any(self):
        p = self.tiny(held=["t0"], fsdp={"implementation": "fsdp2", "settings": {}})
        self.assertEqual(list(p)[-3:], ["loss", "held", "fsdp"])
        self.assertEqual(p["held"], ["t0"])
        self.assertNotIn("held", self.tiny(held=[]))

    def test_an_instance_flattens_its_parameters_into_one(self):
        # (name, numel, size in dim 0): a 2 x 2 weight says its dim 0, a 1-D bias need not.
        params = [("fc.weight", 4, 2), ("fc.bias", 2, 2)]
        self.assertEqual(program.instance_params(params, True), [
            {"name": "flat_param_0", "numel": 6,
             "views": [{"name": "fc.weight", "numel": 4, "dim0": 2},
                       {"name": "fc.bias", "numel": 2}]}])
        self.assertEqual(program.instance_params(params, False), [
            {"name": "fc.weight", "numel": 4, "dim0": 2}, {"name": "fc.bias", "numel": 2}])
        self.assertEqual(program.instance_params([], True), [])

    def test_empty_lists_are_dropped_but_outputs_and_param_reads(self):
        op = {"op": "run", "uses": [], "saves": [], "inputs": [], "outputs": [],
              "param_reads": [], "releases": ["t1"]}
        self.assertEqual(program.prune(op), {"op": "run", "outputs": [], "param_reads": [],
                                             "releases": ["t1"]})

    def test_an_unwritable_path_is_a_usage_error(self):
        with self.assertRaises(UsageError) as e:
            program.write(self.tiny(), "/nonexistent/dir/p.json")
        self.assertEqual(str(e.exception), "cannot write '/nonexistent/dir/p.json': No such "
                                           "file or directory")

    def test_the_summary_line(self):
        p = self.tiny()
        self.assertEqual(program.summary(p, "p.json"),
                         "record_program: p.json: 1 instance(s), 1 runs, 4 parameters")
        p["measured"] = {"device": "cpu"}
        self.assertEqual(program.summary(p, "p.json"),
                         "record_program: p.json: 1 instance(s), 1 runs, 4 parameters, measured "
                         "on cpu")


def sized_program(size, extra=0):
    """A program as the recorder writes it at batch size `size`: an input of 16 B per sample, a
    run of 100 + 50 per sample FLOPs making 8 + 32 per sample bytes, a fresh save of 4 B."""
    return {"format": "bucketsim-program", "schema_version": 1, "description": f"at {size}",
            "instances": [{"name": "root", "params": []}],
            "inputs": [{"id": "t0", "bytes": 16 * size, "dtype": "fp32", "shape": [size, 4]}],
            "forward": [{"op": "run", "name": "root:mm", "flops": 100.0 + 50 * size,
                         "inputs": ["t0"],
                         "outputs": [{"id": "t1", "bytes": 8 + 32 * size + extra,
                                      "dtype": "fp32"}],
                         "saves": [{"bytes": 4, "dtype": "bool"}]}],
            "loss": "t1"}


def shaped_program(size, length, scores=None):
    """A program as the recorder writes it at batch size `size` and sequence length `length`:
    tokens of 8 b s B, a causal mask of s x s bools, and scores of 16 b s^2 B (or `scores`) from
    a run of 10 b s^2 FLOPs."""
    b, s = size, length
    return {"format": "bucketsim-program", "schema_version": 1,
            "instances": [{"name": "root", "params": []}],
            "inputs": [{"id": "t0", "bytes": 8 * b * s, "dtype": "int64", "shape": [b, s]}],
            "forward": [{"op": "run", "name": "root:mask", "flops": 0.0, "inputs": ["t0"],
                         "outputs": [{"id": "t1", "bytes": s * s, "dtype": "bool"}]},
                        {"op": "run", "name": "root:bmm", "flops": 10.0 * b * s * s,
                         "inputs": ["t1"],
                         "outputs": [{"id": "t2", "dtype": "fp32",
                                      "bytes": 16 * b * s * s if scores is None else scores}]}],
            "loss": "t2"}


class SeqLens(unittest.TestCase):
    def refused(self, *fit_args):
        """The message of the UsageError batch.fit(*fit_args) raises."""
        with self.assertRaises(UsageError) as e:
            batch.fit(*fit_args)
        return str(e.exception)

    def test_lengths(self):
        self.assertEqual(batch.parse_lengths("64,16,24,32"), [64, 16, 24, 32])
        for bad in ("16,24,32", "16,16,24,32", "0,16,24,32", "a,b,c,d"):
            with self.assertRaises(UsageError) as e:
                batch.parse_lengths(bad)
            self.assertIn(f"--seq-lens {bad}: expected at least 4 distinct sequence lengths >= 1",
                          str(e.exception))

    def test_the_length_alone_a_quadratic(self):
        programs = {(None, s): shaped_program(2, s) for s in (16, 24, 32, 40)}
        p = batch.fit(programs, None, [24, 16, 32, 40])
        self.assertEqual(p["seq"], {"length": 24, "checked": [16, 24, 32, 40]})
        self.assertNotIn("batch", p)
        # About s0 = 24: 8 b s = 384 + 16 (s - 24); s^2 = 576 + 48 (s - 24) + (s - 24)^2.
        self.assertEqual(p["inputs"][0], {"id": "t0", "bytes": 384, "dtype": "int64",
                                          "shape": [2, 24], "bytes_per_token": 16})
        mask, scores = (op["outputs"][0] for op in p["forward"])
        self.assertEqual((mask["bytes_per_token"], mask["bytes_per_token2"]), (48, 1))
        self.assertEqual((scores["bytes_per_token"], scores["bytes_per_token2"]), (1536, 32))
        self.assertEqual(p["forward"][1]["flops_per_token2"], 20.0)

    def test_the_grid_of_both_gives_the_cross_terms(self):
        programs = {(b, s): shaped_program(b, s) for b in (2, 3, 4) for s in (16, 24, 32, 40)}
        p = batch.fit(programs, [2, 3, 4], [16, 24, 32, 40])
        self.assertEqual(p["batch"], {"size": 2, "checked": [2, 3, 4]})
        tokens = p["inputs"][0]
        self.assertEqual((tokens["bytes_per_sample"], tokens["bytes_per_token"],
                          tokens["bytes_per_sample_token"]), (128, 16, 8))
        self.assertNotIn("bytes_per_sample_token2", tokens)
        scores = p["forward"][1]["outputs"][0]
        self.assertEqual([scores[f"bytes_{t}"] for t, _, _ in batch.TERMS],
                         [16 * 256, 32 * 2 * 16, 16 * 2, 32 * 16, 16])
        self.assertNotIn("bytes_per_sample", p["forward"][0]["outputs"][0])  # the mask

    def test_what_is_not_such_a_polynomial_is_refused(self):
        programs = {(None, s): shaped_program(2, s, scores=s ** 3) for s in (16, 24, 32, 40)}
        message = self.refused(programs, None, [16, 24, 32, 40])
        self.assertEqual(message,
                         "--seq-lens: tensor t2 of op 1 (root:bmm) does not grow as a polynomial "
                         "of the sequence length (quadratic) with whole, non-negative "
                         "coefficients (4,096 at 16, 13,824 at 24, 32,768 at 32, 64,000 at 40): "
                         "it cannot be put at another sequence length")
        # A tensor that shrinks as the batch grows: a negative coefficient.
        programs = {(b, s): shaped_program(b, s, scores=100 - b) for b in (2, 3)
                    for s in (16, 24, 32, 40)}
        message = self.refused(programs, [2, 3], [16, 24, 32, 40])
        self.assertIn("--batch-sizes and --seq-lens: tensor t2 of op 1 (root:bmm) does not grow "
                      "as a polynomial of the batch size (linear) and the sequence length "
                      "(quadratic) with whole, non-negative coefficients (98 at (2, 16), ",
                      message)

    def test_every_point_is_checked_not_only_those_fitted(self):
        # (2, 3) x (16, 24, 32) fit; (4, 40) is one byte off the polynomial.
        points = [(b, s) for b in (2, 3, 4) for s in (16, 24, 32, 40)]
        programs = {(b, s): shaped_program(b, s, scores=16 * b * s * s + ((b, s) == (4, 40)))
                    for b, s in points}
        message = self.refused(programs, [2, 3, 4], [16, 24, 32, 40])
        self.assertTrue(message.startswith("--batch-sizes and --seq-lens: tensor t2 of op 1 "
                                           "(root:bmm) does not grow as a polynomial of the "
                                           "batch size (linear) and the sequence length "
                                           "(quadratic) with whole, non-negative coefficients "
                                           "(8,192 at (2, 16), 18,432 at (2, 24), "), message)
        self.assertTrue(message.endswith(", 102,401 at (4, 40)): it cannot be put at another "
                                         "batch size or sequence length"), message)

    def test_a_rounding_workspace_is_fitted_from_above(self):
        # CUDA's embedding backward (target.py): (numel // 10 + numel) rows of 64 fp32 columns,
        # numel = b s; off every polynomial by the floor, so fitted from above, within 10^-3.
        def rows(b, s):
            return (b * s // 10 + b * s) * 256
        points = [(b, s) for b in (2, 3, 4) for s in (1792, 2048, 2560, 3072)]

        def recorded(output=False):
            programs = {}
            for b, s in points:
                p = shaped_program(b, s, scores=rows(b, s) if output else None)
                p["forward"][1]["workspace"] = [{"bytes": rows(b, s), "dtype": "fp32",
                                                 "shape": [b * s // 10 + b * s, 64]}]
                programs[(b, s)] = p
            return programs
        fitted = batch.fit(recorded(), [2, 3, 4], [1792, 2048, 2560, 3072])
        w = fitted["forward"][1]["workspace"][0]
        for b, s in points:
            grown = w["bytes"] + sum(w.get(f"bytes_{t}", 0) * (b - 2) ** i * (s - 1792) ** j
                                     for t, i, j in batch.TERMS)
            self.assertGreaterEqual(grown, rows(b, s), (b, s))
            self.assertLessEqual(grown - rows(b, s), rows(b, s) / 1000, (b, s))
        # An output so rounded is still refused: only a kernel's workspace is a bound.
        self.assertIn("tensor t2 of op 1 (root:bmm) does not grow as a polynomial",
                      self.refused(recorded(output=True), [2, 3, 4], [1792, 2048, 2560, 3072]))

    def test_a_workspace_at_some_shapes_only_is_named(self):
        programs = {}
        for s in (16, 24, 32, 40):
            p = shaped_program(2, s)
            p["forward"][1]["name"] = "tok:embedding"
            if s > 24:
                p["forward"][1]["workspace"] = [{"bytes": 4 * s, "dtype": "fp32"}]
            programs[(None, s)] = p
        self.assertEqual(self.refused(programs, None, [16, 24, 32, 40]),
                         "--seq-lens: at sequence length 32 op 1 ('tok:embedding') is not the one "
                         "at sequence length 16: its 'workspace' differs; " + batch.EMBEDDING_HINT)

    def test_flops_need_not_grow_by_whole_numbers(self):
        # s (s + 1) / 2 FLOPs (whole at every length) about s0 = 16: 136 + 16.5 (s - 16)
        # + 0.5 (s - 16)^2; bytes so grown would be refused.
        programs = {(None, s): shaped_program(2, s) for s in (16, 24, 32, 40)}
        for (_, s), p in programs.items():
            p["forward"][1]["flops"] = s * (s + 1) // 2
        p = batch.fit(programs, None, [16, 24, 32, 40])
        self.assertEqual((p["forward"][1]["flops_per_token"], p["forward"][1]["flops_per_token2"]),
                         (16.5, 0.5))
        programs = {(None, s): shaped_program(2, s, scores=s * (s + 1) // 2)
                    for s in (16, 24, 32, 40)}
        message = self.refused(programs, None, [16, 24, 32, 40])
        self.assertIn("with whole, non-negative coefficients (136 at 16, ", message)

    def test_flops_that_shrink_are_refused(self):
        programs = {(None, s): shaped_program(2, s) for s in (16, 24, 32, 40)}
        for (_, s), p in programs.items():
            p["forward"][1]["flops"] = 1000.0 - s
        message = self.refused(programs, None, [16, 24, 32, 40])
        self.assertEqual(message,
                         "--seq-lens: the FLOPs of op 1 (root:bmm) does not grow as a polynomial "
                         "of the sequence length (quadratic) with non-negative coefficients "
                         "(984.0 at 16, 976.0 at 24, 968.0 at 32, 960.0 at 40): it cannot be put "
                         "at another sequence length")

    def test_other_ops_at_a_point_are_refused(self):
        programs = {(b, s): shaped_program(b, s) for b in (2, 3) for s in (16, 24, 32, 40)}
        programs[(3, 24)]["forward"][1]["name"] = "root:baddbmm"
        message = self.refused(programs, [2, 3], [16, 24, 32, 40])
        self.assertIn("--batch-sizes and --seq-lens: at batch size 3, sequence length 24 the "
                      "forward is not the one at batch size 2, sequence length 16 (op 1: "
                      "'root:baddbmm' where batch size 2, sequence length 16 has 'root:bmm')",
                      message)
        # The length alone: its points named by the length, the hint by the length.
        programs = {(None, s): shaped_program(2, s) for s in (1, 2, 3, 4)}
        programs[(None, 2)]["forward"][1]["name"] = "root:baddbmm"
        message = self.refused(programs, None, [1, 2, 3, 4])
        self.assertEqual(message,
                         "--seq-lens: at sequence length 2 the forward is not the one at sequence "
                         "length 1 (op 1: 'root:baddbmm' where sequence length 1 has 'root:bmm'): "
                         "the model runs other ops there; give lengths that run the same ones (at "
                         "length 1 PyTorch can take a view where a longer sequence copies: start "
                         "from 2)")

    def test_the_batch_function_is_called_as_the_flags_say(self):
        calls = []

        def make_batch(*args, **kwargs):
            calls.append((args, kwargs))
        for size, length in ((3, None), (None, 16), (3, 16)):
            batch.sized(make_batch, size, length)()
        self.assertEqual(calls, [((3,), {}), ((), {"seq_len": 16}), ((3,), {"seq_len": 16})])


class InDtype(unittest.TestCase):
    def test_the_model_and_the_floating_point_batch_are_converted(self):
        def build_model():
            return nn.Linear(4, 2)

        def make_batch(n=2):
            return {"x": torch.ones(n, 4), "ids": torch.zeros(n, dtype=torch.int64),
                    "pair": (torch.ones(1), 3)}
        build, make = step.in_dtype(build_model, make_batch, torch.bfloat16)
        self.assertEqual(build().weight.dtype, torch.bfloat16)
        made = make(5)
        self.assertEqual(made["x"].dtype, torch.bfloat16)
        self.assertEqual(made["x"].shape, (5, 4))
        self.assertEqual(made["ids"].dtype, torch.int64)
        self.assertEqual(made["pair"][0].dtype, torch.bfloat16)
        self.assertEqual(made["pair"][1], 3)
        # Errors name the user's function, not the recorder's wrappers around it.
        self.assertEqual(load.function_name(make), "recorder_unit_test.py:make_batch()")
        self.assertEqual(load.function_name(batch.sized(make, 3)),
                         "recorder_unit_test.py:make_batch()")


class Batch(unittest.TestCase):
    def test_sizes(self):
        self.assertEqual(batch.parse_sizes("4,2,8"), [4, 2, 8])
        for bad in ("2,4", "2,2,4", "0,2,4", "a,b,c", ""):
            with self.assertRaises(UsageError) as e:
                batch.parse_sizes(bad)
            self.assertIn(f"--batch-sizes {bad}: expected at least 3 distinct batch sizes >= 1",
                          str(e.exception))

    def test_fit_gives_what_each_sample_adds_at_the_first_size(self):
        programs = {s: sized_program(s) for s in (2, 3, 5)}
        p = batch.fit(programs, [3, 2, 5])
        self.assertEqual(p["description"], "at 3")
        self.assertEqual(p["batch"], {"size": 3, "checked": [2, 3, 5]})
        self.assertEqual(p["inputs"][0]["bytes"], 48)
        self.assertEqual(p["inputs"][0]["bytes_per_sample"], 16)
        run = p["forward"][0]
        self.assertEqual(run["flops_per_sample"], 50)
        self.assertEqual(run["outputs"][0]["bytes_per_sample"], 32)
        self.assertNotIn("bytes_per_sample", run["saves"][0])  # the same at every size

    def test_a_size_that_does_not_fit_is_refused(self):
        programs = {2: sized_program(2), 3: sized_program(3), 5: sized_program(5, extra=512)}
        with self.assertRaises(UsageError) as e:
            batch.fit(programs, [2, 3, 5])
        self.assertEqual(str(e.exception),
                         "--batch-sizes: tensor t1 of op 0 (root:mm) does not grow by the same "
                         "amount with each sample (72 at 2, 104 at 3, 680 at 5): it cannot be "
                         "put at another batch size")

    def test_other_ops_at_a_size_are_refused(self):
        programs = {s: sized_program(s) for s in (1, 2, 3)}
        programs[1]["forward"][0]["name"] = "root:addmm"
        with self.assertRaises(UsageError) as e:
            batch.fit(programs, [2, 1, 3])
        self.assertIn("--batch-sizes: at batch size 1 the forward is not the one at 2 (op 0: "
                      "'root:addmm' where 2 has 'root:mm'): the model runs other ops there",
                      str(e.exception))


class Record(unittest.TestCase):
    def test_a_linear_layer_on_meta(self):
        # addmm(bias, x, W^T) in the root instance, then the loss: its mean, outside every
        # module. AddmmBackward keeps the batch (x) and makes both parameters' gradients.
        p, rec = record(lambda: nn.Linear(4, 2), lambda: torch.ones(3, 4), [], None, "meta",
                        "unit", flatten=False)
        if rec.own_group:  # torch 2: the recorder's fake group, gone before others start theirs
            import torch.distributed as dist
            self.addCleanup(dist.destroy_process_group)
        self.assertEqual(p["instances"], [{"name": "root", "params": [
            {"name": "weight", "numel": 8, "dim0": 2}, {"name": "bias", "numel": 2}]}])
        self.assertEqual(p["inputs"], [{"id": "t0", "bytes": 48, "dtype": "fp32",
                                        "shape": [3, 4], "name": "batch[0]"}])
        self.assertEqual([(op["op"], op.get("name")) for op in p["forward"]], [
            ("gather", None), ("run", "root:addmm"), ("end_forward", None), ("run", "root:mean")])
        addmm = p["forward"][1]
        self.assertEqual((addmm["flops"], addmm["param_reads"], addmm["saves"]),
                         (48.0, ["weight", "bias"], [{"tensor": "t0"}]))
        self.assertEqual(p["loss"], p["forward"][3]["outputs"][0]["id"])
        self.assertEqual(rec.fallback_ops, set())
        json.dumps(p)  # a JSON document as it is

    def test_checkpoint_is_the_recorders_and_torchs_outside_a_recording(self):
        import torch.utils.checkpoint
        from recorder import checkpoint
        self.assertIs(torch.utils.checkpoint.checkpoint, checkpoint._checkpoint)
        x = torch.ones(2, requires_grad=True)
        y = torch.utils.checkpoint.checkpoint(lambda t: t * 3, x, use_reentrant=False)
        y.sum().backward()
        self.assertEqual(x.grad.tolist(), [3.0, 3.0])


if __name__ == "__main__":
    unittest.main()
