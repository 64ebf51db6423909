#!/usr/bin/env python3
"""Generates a large fixture host for benchmarks: 64 drives (32 NVMe, 32 SATA), each with
partitions, and 500 mounted filesystems, as sys/, proc/self/mountinfo and statvfs.yaml (what
ssdwatch reads), and the same drives and mounts as node_exporter reads them: proc/diskstats,
proc/1/mounts and a directory under rootfs/ for each mount point (statfs answers for it with the
filesystem that holds the fixture).
Usage: gen_big_host.py DIR"""
import os
import sys

root = sys.argv[1]
sysb = os.path.join(root, "sys", "block")
os.makedirs(sysb, exist_ok=True)


def w(p, t):
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "w") as f:
        f.write(t + "\n")


STAT = "182934 1021 30912344 48211 903211 98133 184021992 1401222 0 811230 1523011 412 0 93810688 2101 201933 9012"
mounts = []
diskstats = []
statvfs = ["# generated"]
n_mounts = 0
for i in range(64):
    nvme = i < 32
    name = f"nvme{i}n1" if nvme else f"sd{chr(ord('a') + (i - 32) // 26)}{chr(ord('a') + (i - 32) % 26)}"
    major = 259 if nvme else 8
    d = os.path.join(sysb, name)
    w(os.path.join(d, "dev"), f"{major}:{i * 16}")
    w(os.path.join(d, "size"), "7501476528")
    w(os.path.join(d, "stat"), STAT)
    diskstats.append(f"{major:4d} {i * 16:7d} {name} {STAT}")
    for k, v in dict(rotational="0", logical_block_size="512", physical_block_size="4096",
                     discard_max_bytes="2199023255040", discard_granularity="4096").items():
        w(os.path.join(d, "queue", k), v)
    if nvme:
        w(os.path.join(d, "device", "model"), "SAMSUNG MZQL23T8HCLS-00A07")
        w(os.path.join(d, "device", "serial"), f"S64HNE0R6{i:05d}")
        w(os.path.join(d, "device", "firmware_rev"), "GDC5602Q")
        w(os.path.join(d, "wwid"), f"eui.3634473052603453002538450000{i:04d}")
    else:
        w(os.path.join(d, "device", "vendor"), "ATA")
        w(os.path.join(d, "device", "model"), "SAMSUNG MZ7LH1T9")
        w(os.path.join(d, "device", "rev"), "904Q")
        w(os.path.join(d, "device", "wwid"), f"naa.5002538e4{i:07d}")
    parts = 8
    for p in range(1, parts + 1):
        pname = f"{name}p{p}" if nvme else f"{name}{p}"
        pd = os.path.join(d, pname)
        w(os.path.join(pd, "partition"), str(p))
        w(os.path.join(pd, "dev"), f"{major}:{i * 16 + p}")
        w(os.path.join(pd, "size"), "937684566")
        w(os.path.join(pd, "stat"), STAT)
        diskstats.append(f"{major:4d} {i * 16 + p:7d} {pname} {STAT}")
        if n_mounts < 500:
            mp = f"/srv/db{n_mounts:03d}"
            mounts.append(f"{100 + n_mounts} 1 {major}:{i * 16 + p} / {mp} rw,noatime - ext4 /dev/{pname} rw,discard")
            os.makedirs(os.path.join(root, "rootfs", mp.lstrip("/")), exist_ok=True)
            statvfs += [f'"{mp}":', "  frsize: 4096", "  blocks: 117210570", "  bfree: 60000000",
                        "  bavail: 54000000", "  files: 29302784", "  ffree: 29000000"]
            n_mounts += 1
mounts.insert(0, "1 0 0:30 / / rw - overlay overlay rw")
w(os.path.join(root, "proc", "self", "mountinfo"), "\n".join(mounts))
# node_exporter: /proc/diskstats, and /proc/1/mounts ("source mountpoint fstype options 0 0").
w(os.path.join(root, "proc", "diskstats"), "\n".join(diskstats))
fstab = []
for m in mounts:
    f = m.split()
    sep = f.index("-")
    fstab.append(f"{f[sep + 2]} {f[4]} {f[sep + 1]} {f[5]} 0 0")
w(os.path.join(root, "proc", "1", "mounts"), "\n".join(fstab))
w(os.path.join(root, "statvfs.yaml"), "\n".join(statvfs))
os.makedirs(os.path.join(root, "rootfs"), exist_ok=True)
