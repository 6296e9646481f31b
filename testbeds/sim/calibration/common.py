"""Shared loading and cleaning of LatencyLab TSC run files (f_runNN.csv)."""
import numpy as np, pandas as pd

INTERVAL_NS = 2e6  # 500 pps

def clean(d: pd.DataFrame, remap=True):
    """Return DataFrame(pkt_id, diff) of valid probes.

    Quirks handled (see fixtures README):
    - row with rx2_ts_ns == 0 (first probe after idle gap, id 1) dropped;
    - ids ending ...78 whose timestamps are ~1/10 of (id-1)*2 ms are misparsed ids: the true probe is
      id // 10 (e.g. 178 -> 17, 20178 -> 2017); remapped if `remap`, else dropped;
    - ids > 20000 are invalid unless remapped.
    """
    d = d.copy()
    d = d[(d.rx2_ts_ns > 0) & (d.rx1_ts_ns > 0)]
    t = d.rx2_ts_ns.astype(float)
    # the clock origin is the run's first stamp (probe 1): expected t ~ (id-1)*2ms
    r = t / ((d.pkt_id - 1).clip(lower=1) * INTERVAL_NS)
    mis = (d.pkt_id % 100 == 78) & (r < 0.5)
    if remap:
        tid = d.pkt_id // 10
        r2 = t / ((tid - 1).clip(lower=1) * INTERVAL_NS)
        ok = mis & (r2 > 0.9) & (r2 < 1.1)
        d.loc[ok, 'pkt_id'] = tid[ok]
        d = d[~mis | ok]
    else:
        d = d[~mis]
    d = d[(d.pkt_id >= 2) & (d.pkt_id <= 20000)]
    d = d.drop_duplicates('pkt_id', keep=False)
    return pd.DataFrame({'pkt_id': d.pkt_id.astype(int).values, 'diff': d.diff_latency_ns.astype(float).values,
                         'rx2': d.rx2_ts_ns.values})

def q(x, p):
    return float(np.percentile(np.asarray(x, float), p))  # numpy default (type 7, linear)
