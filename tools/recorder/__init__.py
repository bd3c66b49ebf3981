"""The recorder: a real PyTorch model's program for bucketsim (tools/record_program.py)."""
