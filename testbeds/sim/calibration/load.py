"""Load all data: the fixture's full runs + the transcribed chunks in data/*.txt (beside this file)."""
import glob, os, re
import numpy as np, pandas as pd
from common import clean

# The three full runs: the repository's copy of the LatencyLab sample (the same files as
# ../shared/fixtures/latencylab/data/).
FIX = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../../orchestrator/tests/fixtures/latencylab/data/")
LOCAL = {("FWD", 1, 4): FIX + "tsc/programs/FWD_s1/f_run04.csv",
         ("NF", 1, 1): FIX + "tsc/null/NF_s1/f_run01.csv"}

def load_all(max_id=None, drop78=True):
    """Long DataFrame: tag, session, run, pkt_id, diff, source ('full'|'head').

    drop78: drop ids ≡ 78 (mod 100) everywhere (the transcribed chunks omit them), so that every
    run contributes the same id set.
    """
    out = []
    for (tag, s, r), f in LOCAL.items():
        d = clean(pd.read_csv(f), remap=False)[['pkt_id', 'diff']]
        d = d.assign(tag=tag, session=s, run=r, source='full')
        out.append(d)
    for f in sorted(glob.glob(os.path.join(os.path.dirname(__file__), 'data', '*.txt'))):
        m = re.match(r'([A-Z]+)_s(\d+)_run(\d+)\.txt', os.path.basename(f))
        tag, s, r = m.group(1), int(m.group(2)), int(m.group(3))
        if (tag, s, r) in LOCAL:
            continue
        d = pd.read_csv(f, sep=' ', comment='#', names=['pkt_id', 'diff'])
        out.append(d.assign(tag=tag, session=s, run=r, source='head'))
    a = pd.concat(out, ignore_index=True)
    a = a[a.pkt_id >= 2]
    if drop78:
        a = a[a.pkt_id % 100 != 78]
    if max_id is not None:
        a = a[a.pkt_id <= max_id]
    return a
