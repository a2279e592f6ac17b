"""A tandem that starts itself again for the portable CPU kernels keeps its name: ps, top, pkill
and mpirun's reports see "tandem", not "exe". OPENBLAS_CORETYPE=SkylakeX makes OpenBLAS choose
other kernels than the portable ones, so the program starts again on every machine.
Usage: own_name_check.py TANDEM_BINARY"""
import os
import subprocess
import sys
import time

env = dict(os.environ, OPENBLAS_CORETYPE="SkylakeX")
job = subprocess.Popen([sys.argv[1], "train", "--model", "mlp", "--width", "8", "--blocks", "0",
                        "--steps", "1000000", "--progress", "line", "--devices", "1",
                        "--microbatches", "1"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True)
try:
    deadline = time.time() + 120
    seen = ""
    for line in job.stdout:
        seen += line
        if line.startswith("step ") or time.time() > deadline:
            break
    if not seen or "step " not in seen:
        sys.exit(f"the run never reached a step:\n{seen}")
    with open(f"/proc/{job.pid}/comm") as f:
        name = f.read().strip()
    with open(f"/proc/{job.pid}/environ", "rb") as f:
        restarted = b"OPENBLAS_CORETYPE=Haswell" in f.read()
finally:
    job.kill()
    job.wait()
if not restarted:
    sys.exit("the run did not start again with the portable kernels (OPENBLAS_CORETYPE=Haswell)")
if name != "tandem":
    sys.exit(f"after starting again the process is called '{name}', not 'tandem'")
print("started again with the portable kernels, still called tandem")
