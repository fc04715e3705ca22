"""Reporter test script: logs a step every 20 ms (printing "step N" on stdout) until stopped, for
at most 20 s; a SIGTERM must end it as a cancelled run (exit status 130)."""
import time

import ringmaster

ringmaster.init()
for step in range(1, 1000):
    time.sleep(0.02)
    ringmaster.log(step, loss=1.0, lr=0.01, samples=1)
    print("step %d" % step, flush=True)
