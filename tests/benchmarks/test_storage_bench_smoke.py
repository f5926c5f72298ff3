"""Smoke test of benchmarks/storage_bench.py: a tiny size proves the script runs end to end and
prints one row per form and a verdict. Nothing is timed here (the script measures)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_storage_bench_reports_every_form_and_a_verdict() -> None:
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "storage_bench.py"),
                           "--quick", "--no-yaml-load"],
                          cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    out = proc.stdout
    sizes = {}
    for form in ("plain .jsonl", "zstd .jsonl.zst", "compact .jsonl", "compact + zstd",
                 "vcrpy YAML"):
        match = re.search(rf"^{re.escape(form)}\s+([\d,]+)\s", out, re.M)
        assert match, (form, out)
        sizes[form] = int(match.group(1).replace(",", ""))
    # compression and compaction each shrink the file; the YAML is the largest
    assert sizes["zstd .jsonl.zst"] < sizes["plain .jsonl"] < sizes["vcrpy YAML"]
    assert sizes["compact .jsonl"] < sizes["plain .jsonl"]
    assert re.search(r"^(PASS|FAIL)  zstd cassette <= 5% of vcrpy YAML: [\d.]+%", out, re.M)
