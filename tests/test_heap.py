"""Freed tensor memory goes back to the system between batches (``scoring.heap``)."""
from __future__ import annotations

import subprocess
import sys

from conftest import ROOT

# In a fresh process: 8 MB blocks that glibc serves from its heap (its mmap threshold rises to 8 MB
# once one such block is freed), each followed by a small block that pins the heap behind it.
PROGRAM = """
import sys
sys.path.insert(0, {root!r})
from scoring import heap
def rss():
    return int(open("/proc/self/statm").read().split()[1]) * 4096 // 2**20
big, small = [], []
for i in range(60):
    big.append(bytearray(8 * 2**20))
    small.append(bytearray(1000))
    if i == 0:
        del big[0]
big.clear()
freed = rss()
heap.release("cuda")
kept = rss()
heap.release("cpu")
print(freed, kept, rss())
"""


def test_freed_heap_memory_is_returned_after_a_cpu_batch():
    out = subprocess.run([sys.executable, "-c", PROGRAM.format(root=str(ROOT))], capture_output=True, text=True,
                         check=True).stdout.split()
    freed, after_gpu_batch, after_cpu_batch = map(int, out)
    assert freed > 400 and after_gpu_batch > 400  # 472 MB freed by Python, still resident
    assert after_cpu_batch < freed - 400, out


def test_every_scoring_batch_releases_the_heap(tmp_path, monkeypatch):
    from conftest import small_workspace
    from scoring import heap
    from scoring.run import Score
    from scoring.text_run import TextScores
    calls = []
    monkeypatch.setattr(heap, "release", lambda device: calls.append(str(device)))
    ws = small_workspace(tmp_path / "ws", 3)
    Score.with_options(ws, model="smollm2-135m", modes=["full"], batch_tokens=64, quiet=True, self_check=0).run()
    assert len(calls) >= 2 and set(calls) == {"cpu"}  # one per batch
    calls.clear()
    TextScores.with_options(ws, model="smollm2-135m", batch_tokens=64, quiet=True).run()
    assert len(calls) >= 2
