"""A stand-in for a grid unit that a Slurm job runs (`python tests/slurm_fake_unit.py STATE STEPS [FAIL]`):
it counts STEPS steps of 0.2 s, and stops as a harness run does (foundation/training/stop.py): the first
SIGTERM saves its step to STATE at the next step and exits 143, a second exits at once; run again, it
resumes from STATE. Each start appends the step it started from to STATE.starts. FAIL: exit 1 at the end.
Torch-free, so the Slurm executor's signal and requeue plumbing is tested in seconds."""

from __future__ import annotations

import json
import signal
import sys
import time
from pathlib import Path

state, steps, fail = Path(sys.argv[1]), int(sys.argv[2]), len(sys.argv) > 3
asked: list[int] = []


def on_sigterm(signum, frame):
    if asked:
        sys.exit(130)  # asked twice: at once, nothing saved
    asked.append(signum)


signal.signal(signal.SIGTERM, on_sigterm)
start = json.loads(state.read_text())["step"] if state.exists() else 0
with open(f"{state}.starts", "a") as starts:
    starts.write(f"{start}\n")
print(f"resume from step {start}" if start else "start at step 0", flush=True)
for step in range(start, steps):
    if asked:
        state.write_text(json.dumps({"step": step}))
        print(f"stopped at step {step}", flush=True)
        sys.exit(128 + signal.SIGTERM)
    print(f"step {step}", flush=True)
    time.sleep(0.2)
state.write_text(json.dumps({"step": steps}))
print("done", flush=True)
sys.exit(1 if fail else 0)
