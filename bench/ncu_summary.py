#!/usr/bin/env python3
"""One table from bench/ncu_profile.sh's CSV files: a row per profiled kernel launch."""
import csv
import io
import os
import re
import sys

SHORT = {
    "gpu__time_duration.sum": "us",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "DRAM%",
    "lts__throughput.avg.pct_of_peak_sustained_elapsed": "L2%",
    "l1tex__throughput.avg.pct_of_peak_sustained_active": "L1%",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "SM%",
    "lts__t_sector_hit_rate.pct": "L2hit%",
    "l1tex__t_sector_hit_rate.pct": "L1hit%",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "occ%",
    "launch__registers_per_thread": "regs",
    "launch__grid_size": "grid",
    "sm__cycles_active.avg": "SMcyc_avg",
    "sm__cycles_active.max": "SMcyc_max",
    "dram__bytes_read.sum": "DRAM_MB",
    "lts__t_bytes.sum": "L2_MB",
    "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio": "stall_lsb",
    "smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio": "stall_lgt",
    "smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio": "stall_ssb",
}


def to_unit(name, unit, value):
    try:
        v = float(value.replace(",", ""))
    except ValueError:
        return value
    if name == "gpu__time_duration.sum":
        scale = {"ns": 1e-3, "nsecond": 1e-3, "us": 1, "usecond": 1, "ms": 1e3, "msecond": 1e3,
                 "s": 1e6, "second": 1e6}.get(unit, 1)
        return v * scale
    if name.endswith("bytes.sum") or name.endswith("bytes_read.sum"):
        scale = {"byte": 1e-6, "Kbyte": 1e-3, "Mbyte": 1, "Gbyte": 1e3, "Tbyte": 1e6}.get(unit, 1)
        return v * scale
    return v


def rows_of(path):
    text = open(path, encoding="utf-8", errors="replace").read()
    start = text.find('"ID"')
    if start < 0:
        return []
    launches = {}
    for r in csv.DictReader(io.StringIO(text[start:])):
        key = (r["ID"], r["Kernel Name"])
        d = launches.setdefault(key, {})
        d[r["Metric Name"]] = to_unit(r["Metric Name"], r.get("Metric Unit", ""), r["Metric Value"])
    return [(k[1], v) for k, v in sorted(launches.items(), key=lambda kv: int(kv[0][0]))]


def main(paths):
    cols = list(SHORT.values())
    status = 0
    for p in paths:
        rows = rows_of(p)
        print(f"\n### {os.path.basename(p)[:-4]}")
        if not rows:
            print("(no kernel rows: see the .err file next to it)")
            status = 1
            continue
        print("| kernel | " + " | ".join(cols) + " |")
        print("|---|" + "---:|" * len(cols))
        for name, d in rows:
            # "void spgnn::<unnamed>::gnnone_spmm_kernel<int, 4>(Args)" -> "spgnn::gnnone_spmm_kernel"
            short = re.sub(r"\(anonymous namespace\)::|<unnamed>::", "", name.replace("void ", ""))
            short = re.split(r"[<(]", short)[0][-40:]
            cells = []
            for m, s in SHORT.items():
                v = d.get(m, "")
                cells.append(f"{v:.1f}" if isinstance(v, float) else str(v))
            print(f"| {short} | " + " | ".join(cells) + " |")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
