#!/usr/bin/python3
"""Runs Debian's onnx.checker.check_model (with shape inference) on each file given; exit 1 if any fails."""

import sys

import onnx

failed = 0
for name in sys.argv[1:]:
    try:
        onnx.checker.check_model(onnx.load(name), full_check=True)
        print("ok", name)
    except Exception as e:  # noqa: BLE001 - report every failure
        failed += 1
        print("FAILED", name, e)
sys.exit(1 if failed else 0)
