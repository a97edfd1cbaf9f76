"""Several drivers opening one new SQLite store at the same moment (issue 17, item 3).

Each process calls `sweeper.tracking.server.open_store` for the same spec on a fresh
output_dir, released together from a barrier file, so MLflow's schema creation and
migration race for real. Every process must get the store and the one experiment id,
with no traceback.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.reliability import record
from tests.support.sweeps import sweeper_env

pytestmark = pytest.mark.integration

DRIVERS = 3
OPEN = """
import sys, time
from pathlib import Path
from sweeper.specio import load_spec
from sweeper.tracking.server import open_store
from sweeper.tracking.store import tracking_uri

spec = load_spec(Path(sys.argv[1]))
go = Path(sys.argv[2])
while not go.exists():
    time.sleep(0.005)
client, experiment_id = open_store(spec, tracking_uri(spec))
print("experiment", experiment_id, len(client.search_experiments()))
"""


def test_concurrent_first_use_gives_one_store(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "name: race\noutput_dir: out\n"
        "data: {source: generated, dir: corpus, generate: {seed: 0}}\n"
        "model: {sentencepiece: corpus/sp.model, dictionary: corpus/dict.txt,\n"
        "        arch: {layers: 1, embed_dim: 16, ffn_dim: 32, heads: 2, max_positions: 32}}\n"
        "grid: {init: [random]}\n",
        encoding="utf-8",
    )
    go = tmp_path / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", OPEN, str(spec), str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=sweeper_env(),
        )
        for _ in range(DRIVERS)
    ]
    time.sleep(8)  # every process has imported mlflow and waits at the barrier
    go.touch()
    results = [(p.wait(timeout=120), *p.communicate()) for p in procs]
    codes = [code for code, _, _ in results]
    outputs = sorted(out.strip() for _, out, _ in results)
    tracebacks = sum("Traceback" in err for _, _, err in results)
    record(
        "store: concurrent first use of one SQLite file",
        f"{DRIVERS} processes open the same new store at once (MLflow creates its schema)",
        f"exit codes {codes}; experiment ids {sorted({o.split()[1] for o in outputs if o})}; "
        f"tracebacks {tracebacks}",
        passed=codes == [0] * DRIVERS and tracebacks == 0,
    )
    assert codes == [0] * DRIVERS, [err[-2000:] for _, _, err in results]
    assert tracebacks == 0
    assert len(set(outputs)) == 1 and outputs[0].startswith("experiment ")
    assert Path(tmp_path / "out" / "mlflow.db").is_file()
