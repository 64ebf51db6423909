#!/usr/bin/env python3
"""Generates the Grafana dashboards in dashboards/*.json (what users import).

Python 3 standard library only, runs offline. `generate.py` rewrites the JSON files;
`generate.py --check` exits 1 when a checked-in file differs from what this script produces.
Every panel reads the `datasource` template variable: no datasource uid is hard-coded.
"""

import json
import os
import sys

OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
DS = {"type": "prometheus", "uid": "${datasource}"}
HOST = 'instance="$instance"'
FLEET = 'instance=~"$instance"'


class Layout:
    """Places panels left to right on Grafana's 24-column grid, wrapping rows."""

    def __init__(self):
        self.x = 0
        self.y = 0
        self.row_h = 0
        self.next_id = 1
        self.panels = []

    def _id(self):
        i = self.next_id
        self.next_id += 1
        return i

    def row(self, title):
        if self.x:
            self.y += self.row_h
        self.x = 0
        self.row_h = 0
        self.panels.append(
            {
                "type": "row",
                "id": self._id(),
                "title": title,
                "collapsed": False,
                "gridPos": {"h": 1, "w": 24, "x": 0, "y": self.y},
                "panels": [],
            }
        )
        self.y += 1

    def add(self, panel, w=12, h=8):
        if self.x + w > 24:
            self.x = 0
            self.y += self.row_h
            self.row_h = 0
        panel["id"] = self._id()
        panel["gridPos"] = {"h": h, "w": w, "x": self.x, "y": self.y}
        self.panels.append(panel)
        self.x += w
        self.row_h = max(self.row_h, h)


def target(expr, legend="", instant=False, fmt=None, ref="A"):
    t = {"datasource": DS, "refId": ref, "expr": expr, "legendFormat": legend}
    if instant:
        t["instant"] = True
        t["range"] = False
    else:
        t["range"] = True
    if fmt:
        t["format"] = fmt
    return t


def targets(*specs, **kw):
    """specs: (expr, legend) pairs; refIds A, B, C..."""
    return [target(e, l, ref=chr(ord("A") + i), **kw) for i, (e, l) in enumerate(specs)]


def timeseries(title, desc, tgts, unit="short", min_=None, max_=None, overrides=None, stack=False):
    defaults = {"unit": unit, "custom": {"drawStyle": "line", "lineWidth": 1, "fillOpacity": 10, "showPoints": "never"}}
    if stack:
        defaults["custom"]["stacking"] = {"mode": "normal", "group": "A"}
    if min_ is not None:
        defaults["min"] = min_
    if max_ is not None:
        defaults["max"] = max_
    return {
        "type": "timeseries",
        "title": title,
        "description": desc,
        "datasource": DS,
        "targets": tgts,
        "fieldConfig": {"defaults": defaults, "overrides": overrides or []},
        "options": {"legend": {"displayMode": "table", "placement": "bottom", "calcs": ["lastNotNull", "max"]}, "tooltip": {"mode": "multi", "sort": "desc"}},
    }


def stat(title, desc, tgts, unit="short", thresholds=None, decimals=None):
    defaults = {"unit": unit}
    if thresholds:
        defaults["thresholds"] = {"mode": "absolute", "steps": thresholds}
        defaults["color"] = {"mode": "thresholds"}
    if decimals is not None:
        defaults["decimals"] = decimals
    return {
        "type": "stat",
        "title": title,
        "description": desc,
        "datasource": DS,
        "targets": tgts,
        "fieldConfig": {"defaults": defaults, "overrides": []},
        "options": {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False}, "colorMode": "value", "graphMode": "none", "textMode": "auto"},
    }


def table(title, desc, tgts, unit="short", sort_by=None, desc_sort=True, hide=("Time",), rename=None):
    """Instant queries merged into one row per label set; `rename` names the value columns
    ("Value #A" ...), one per query. Grafana's merge joins two rows only where every column
    both have agrees, and a series' metric name is a column: with several queries, each drops
    it (an aggregation without grouping keeps every other label)."""
    if len(tgts) > 1:
        tgts = [dict(t, expr=f"max without () ({t['expr']})") for t in tgts]
    panel = {
        "type": "table",
        "title": title,
        "description": desc,
        "datasource": DS,
        "targets": tgts,
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "options": {"showHeader": True, "cellHeight": "sm"},
        "transformations": [
            {"id": "merge", "options": {}},
            {"id": "organize", "options": {"excludeByName": {h: True for h in hide}, "renameByName": rename or {}}},
        ],
    }
    if sort_by:
        panel["options"]["sortBy"] = [{"displayName": sort_by, "desc": desc_sort}]
    return panel


def xychart(title, desc, x_expr, x_name, ys, x_unit, y_unit, repeat=None, join="inner"):
    """Scatter of gauges over time, joined on the timestamp: x is one series (query A, legend
    `x_name`), each y query (expr, legend) adds one field per series it returns, so a y legend
    must tell its series apart ({{probe}}). With `repeat`, one panel per value of that variable,
    so x stays one series. `join` "inner" keeps only the times every series has a point at;
    "outer" keeps every time and leaves a field empty (no point) where its series has none:
    for y queries that split the runs between them, and so never have points at one time."""
    panel = {
        "type": "xychart",
        "title": title,
        "description": desc,
        "datasource": DS,
        "targets": [target(x_expr, x_name, ref="A")] + [target(e, l, ref=chr(ord("B") + i)) for i, (e, l) in enumerate(ys)],
        "transformations": [
            {"id": "joinByField", "options": {"byField": "Time", "mode": join}},
            {"id": "organize", "options": {"renameByName": {}}},
        ],
        "fieldConfig": {
            "defaults": {"unit": y_unit, "custom": {"show": "points", "pointSize": {"fixed": 5}}},
            "overrides": [{"matcher": {"id": "byName", "options": x_name}, "properties": [{"id": "unit", "value": x_unit}]}],
        },
        "options": {"seriesMapping": "auto", "dims": {"x": x_name}, "legend": {"showLegend": True, "displayMode": "list", "placement": "bottom"}},
    }
    if repeat:
        panel["repeat"] = repeat
        panel["repeatDirection"] = "h"
    return panel


def right_axis(name_regex, unit):
    return {
        "matcher": {"id": "byRegexp", "options": name_regex},
        "properties": [
            {"id": "custom.axisPlacement", "value": "right"},
            {"id": "unit", "value": unit},
            {"id": "min", "value": 0},
            {"id": "max", "value": 1},
            {"id": "custom.lineStyle", "value": {"fill": "dash", "dash": [10, 10]}},
        ],
    }


def var_datasource():
    return {"type": "datasource", "name": "datasource", "label": "Data source", "query": "prometheus", "current": {}, "hide": 0, "refresh": 1, "regex": "", "options": []}


def var_query(name, label, query, multi=False, include_all=False, all_value=None):
    v = {
        "type": "query",
        "name": name,
        "label": label,
        "datasource": DS,
        "query": {"query": query, "refId": "PrometheusVariableQueryEditor-VariableQuery"},
        "definition": query,
        "refresh": 2,
        "sort": 1,
        "multi": multi,
        "includeAll": include_all,
        "current": {},
        "hide": 0,
        "regex": "",
        "options": [],
    }
    if all_value:
        v["allValue"] = all_value
    return v


def var_custom(name, label, values, default):
    return {
        "type": "custom",
        "name": name,
        "label": label,
        "query": ",".join(values),
        "current": {"text": default, "value": default},
        "options": [{"text": v, "value": v, "selected": v == default} for v in values],
        "hide": 0,
        "multi": False,
        "includeAll": False,
    }


def annotation(name, expr, color, title, step="60s"):
    return {
        "name": name,
        "datasource": DS,
        "enable": True,
        "expr": expr,
        "iconColor": color,
        "step": step,
        "titleFormat": title,
        "tagKeys": "device",
        "useValueForTime": False,
    }


def dashboard(uid, title, desc, panels, variables, annotations=(), time_from="now-24h"):
    return {
        "uid": uid,
        "title": title,
        "description": desc,
        "tags": ["ssdwatch"],
        "timezone": "",
        "editable": True,
        "graphTooltip": 1,
        "schemaVersion": 39,
        "version": 1,
        "refresh": "1m",
        "time": {"from": time_from, "to": "now"},
        "links": [{"type": "dashboards", "tags": ["ssdwatch"], "asDropdown": True, "title": "ssdwatch", "includeVars": True, "keepTime": True}],
        "annotations": {
            "list": [
                {
                    "builtIn": 1,
                    "datasource": {"type": "grafana", "uid": "-- Grafana --"},
                    "enable": True,
                    "hide": True,
                    "iconColor": "rgba(0, 211, 255, 1)",
                    "name": "Annotations & Alerts",
                    "type": "dashboard",
                }
            ]
            + list(annotations)
        },
        "templating": {"list": variables},
        "panels": panels,
    }


def host():
    L = Layout()
    L.row("Filesystems")
    L.add(timeseries("Used space", "Each mount's effective fill (recording rule ssdwatch:filesystem_used_ratio): df's Use%, used / (used + avail), where nothing below the filesystem runs out first; where a layer does (a thin pool, btrfs, a ZFS pool: ssdwatch_filesystem_limiting_layer_info), what that layer has left is all the mount can still take, so a filesystem df shows at 23 % reads 94 % here when its thin pool is that close to full.",
                     targets((f"ssdwatch:filesystem_used_ratio{{{HOST}}}", "{{mountpoint}}")),
                     unit="percentunit", min_=0, max_=1))
    L.add(timeseries("Available bytes", "Bytes available to unprivileged users, per filesystem.",
                     targets((f"ssdwatch_filesystem_avail_bytes{{{HOST}}}", "{{mountpoint}}")), unit="bytes", min_=0))
    L.add(table("Days to full (forecast)",
                "Days until the mount is full (recording rule ssdwatch:filesystem_seconds_until_full: the daemon's forecast, the earliest of the filesystem's and its layers' dates, so a thin pool that runs out first gives the date; else the 6 h trend of the effective free space where it lost space over the last day, still fills and is fuller than its recurring peak). Only mounts that are filling appear.",
                targets((f"ssdwatch:filesystem_seconds_until_full{{{HOST}}} / 86400", ""), instant=True, fmt="table"),
                unit="d", sort_by="Value", desc_sort=False, hide=("Time", "__name__", "instance", "job")), w=8)
    L.add(timeseries("Available bytes in 24 h (linear trend)",
                     "Where the last 6 hours' trend puts each filesystem's available bytes a day from now; below zero means full within a day at this rate.",
                     targets((f"predict_linear(ssdwatch_filesystem_avail_bytes{{{HOST}}}[6h], 86400)", "{{mountpoint}}")), unit="bytes"), w=8)
    L.add(timeseries("Inodes used", "Share of inodes in use (filesystems with a fixed inode table; vfat and btrfs report none).",
                     targets((f"1 - ssdwatch_filesystem_files_free{{{HOST}}} / (ssdwatch_filesystem_files{{{HOST}}} > 0)", "{{mountpoint}}")),
                     unit="percentunit", min_=0, max_=1), w=8)
    # One row per mount: drive_info has a series per drive (an md or LVM volume spans several),
    # so it is counted here and listed in the next table.
    L.add(table("Filesystem state", "Per filesystem, one row each: read-only and stuck (statvfs did not return) flags, and how many drives it lives on (listed in the table on the right).",
                targets((f"ssdwatch_filesystem_readonly{{{HOST}}}", "read-only"),
                        (f"ssdwatch_filesystem_stuck{{{HOST}}}", "stuck"),
                        (f"count by (instance, job, mountpoint, device, fstype) (ssdwatch_filesystem_drive_info{{{HOST}}})", "drives"), instant=True, fmt="table"),
                hide=("Time", "__name__", "instance", "job"), rename={"Value #A": "read-only", "Value #B": "stuck", "Value #C": "drives"}), w=16)
    L.add(table("Drives under each filesystem", "The physical drives each filesystem lives on (ssdwatch_filesystem_drive_info), one row per filesystem and drive.",
                targets((f"ssdwatch_filesystem_drive_info{{{HOST}}}", ""), instant=True, fmt="table"),
                hide=("Time", "__name__", "instance", "job", "Value")), w=8)

    L.row("Layers below filesystems")
    # Mounts with a layer below them (a thin pool, btrfs, a ZFS dataset and pool): statvfs can't
    # see those run out.
    layered = f'and on (instance, mountpoint) count by (instance, mountpoint) (ssdwatch_filesystem_layer_avail_bytes{{{HOST}, layer!="filesystem"}})'
    L.add(timeseries("Effective vs statvfs free space",
                     "Per mount with a layer below it: the bytes it can really still take (the least of its filesystem's and every layer's, ssdwatch_filesystem_effective_avail_bytes) against what statvfs (df) shows. Apart when a thin pool, btrfs chunk allocation or a ZFS pool runs out first.",
                     targets((f"max by (instance, job, mountpoint) (ssdwatch_filesystem_effective_avail_bytes{{{HOST}}}) {layered}", "{{mountpoint}} effective"),
                             (f"max by (instance, job, mountpoint) (ssdwatch_filesystem_avail_bytes{{{HOST}}}) {layered}", "{{mountpoint}} statvfs")),
                     unit="bytes", min_=0,
                     overrides=[{"matcher": {"id": "byRegexp", "options": ".*statvfs"}, "properties": [{"id": "custom.lineStyle", "value": {"fill": "dash", "dash": [10, 10]}}]}]), w=16)
    L.add(table("Limiting layer", "Per mount, the layer that runs out first (ssdwatch_filesystem_limiting_layer_info: filesystem, thin_pool, btrfs, btrfs_metadata, zfs_dataset, zfs_pool) and its name, with the mount's effective free bytes.",
                targets((f"ssdwatch_filesystem_limiting_layer_info{{{HOST}}} * on (instance, mountpoint) group_left max by (instance, mountpoint) (ssdwatch_filesystem_effective_avail_bytes{{{HOST}}})", ""), instant=True, fmt="table"),
                unit="bytes", sort_by="effective free", desc_sort=False, hide=("Time", "__name__", "instance", "job"), rename={"Value": "effective free"}), w=8)
    L.add(timeseries("Thin pool data and metadata fill", "Share of each LVM thin pool's data and metadata space in use: at 100 % data every thin volume's writes fail (or queue), at 100 % metadata the pool goes read-only.",
                     targets((f"ssdwatch_thin_pool_data_used_bytes{{{HOST}}} / (ssdwatch_thin_pool_data_size_bytes{{{HOST}}} > 0)", "{{pool}} data"),
                             (f"ssdwatch_thin_pool_metadata_used_bytes{{{HOST}}} / (ssdwatch_thin_pool_metadata_size_bytes{{{HOST}}} > 0)", "{{pool}} metadata")),
                     unit="percentunit", min_=0, max_=1), w=8)
    L.add(timeseries("ZFS pool capacity", "Share of each ZFS pool allocated (zpool's CAP): past about 80 % ZFS slows down, and datasets lose their room before 100 % (the slop).",
                     targets((f"ssdwatch_zfs_pool_capacity_ratio{{{HOST}}}", "{{pool}}")), unit="percentunit", min_=0, max_=1), w=8)
    L.add(table("ZFS pool health", "Each ZFS pool's health as zpool reports it (ONLINE, DEGRADED, FAULTED, SUSPENDED...).",
                targets((f"ssdwatch_zfs_pool_health{{{HOST}}} == 1", ""), instant=True, fmt="table"),
                hide=("Time", "__name__", "instance", "job", "Value")), w=8)
    L.add(timeseries("btrfs unallocated", "Raw bytes of each btrfs's devices not allocated to any chunk: when none is left, metadata can't get a new chunk.",
                     targets((f"ssdwatch_btrfs_unallocated_bytes{{{HOST}}}", "{{uuid}}")), unit="bytes", min_=0), w=8)
    L.add(table("btrfs: metadata can grow", "Per btrfs: 1 while its unallocated space still holds a metadata chunk; 0 means writes fail with ENOSPC once the metadata chunks fill, whatever df shows. With its unallocated bytes.",
                targets((f"ssdwatch_btrfs_metadata_can_grow{{{HOST}}}", "can grow"),
                        (f"ssdwatch_btrfs_unallocated_bytes{{{HOST}}}", "unallocated"), instant=True, fmt="table"),
                sort_by="can grow", desc_sort=False, hide=("Time", "__name__", "instance", "job"),
                rename={"Value #A": "can grow", "Value #B": "unallocated"}), w=8)
    L.add(timeseries("md missing disks", "Members each md array lacks (degraded): above 0 the array has lost its redundancy.",
                     targets((f"ssdwatch_md_disks_missing{{{HOST}}}", "{{device}}")), unit="short", min_=0), w=8)
    L.add(timeseries("md sync progress", "How far each md array's running resync, recovery, check or reshape is (absent while idle).",
                     targets((f"ssdwatch_md_sync_progress_ratio{{{HOST}}} * on (instance, device) group_left (action) (ssdwatch_md_sync_action{{{HOST}}} == 1)", "{{device}} {{action}}")),
                     unit="percentunit", min_=0, max_=1), w=8)
    # Errors each layer counts of its own integrity (lifetime or since import/assembly): what
    # the last day added, as the integrity alerts look at growth, never the count.
    L.add(timeseries("Errors under the filesystem, new per day",
                     "What each layer counted in the last day: btrfs per device and type (corruption and generation are data that came back wrong; read, write, flush failed I/O), ZFS per vdev and type (READ, WRITE, CKSUM of zpool status), md members' corrected read errors. Flat at 0 on a healthy host; any rise is what the integrity alerts fire on.",
                     targets((f"increase(ssdwatch_btrfs_device_errors_total{{{HOST}}}[1d])", "btrfs {{device}} {{type}}"),
                             (f"increase(ssdwatch_zfs_vdev_errors_total{{{HOST}}}[1d])", "zfs {{pool}} {{vdev}} {{type}}"),
                             (f"increase(ssdwatch_md_member_corrected_read_errors_total{{{HOST}}}[1d])", "md {{device}} {{member}} corrected")),
                     unit="short", min_=0), w=16)
    L.add(table("ZFS pools: permanent data errors", "Per pool, the blocks its error log lists as unrepaired (zpool status's errors: line): above 0, files in the pool are damaged (zpool status -v lists them).",
                targets((f"ssdwatch_zfs_pool_data_errors{{{HOST}}}", ""), instant=True, fmt="table"),
                sort_by="Value", hide=("Time", "__name__", "instance", "job"), rename={"Value": "data errors"}), w=8)

    L.row("What is filling it")
    # Database components (the databases collector) on each mount, and their share of its growth
    # (recording rules of ssdwatch-databases.rules): docs/databases.md.
    L.add(timeseries("Database components by mount",
                     "Bytes of each database component (pg_wal, relations, the server log, binary logs, InnoDB files...) on the mount holding it (ssdwatch_database_component_bytes): a log or pg_wal moved to another disk counts there.",
                     targets((f"ssdwatch_database_component_bytes{{{HOST}}}", "{{mountpoint}} {{component}} ({{database}})")),
                     unit="bytes", min_=0), w=12)
    L.add(table("Share of each mount's growth (1 d)",
                "Per mount that grew in the last day, its top three database components by share of the growth (ssdwatch:database_component_mount_growth_ratio:1d): 0.9 for wal means nine tenths of what the filesystem gained is WAL. Above 1: the component grew while others shrank. Mounts that did not grow are not listed.",
                targets((f"topk by (instance, job, mountpoint) (3, ssdwatch:database_component_mount_growth_ratio:1d{{{HOST}}})", ""), instant=True, fmt="table"),
                unit="percentunit", sort_by="Value", hide=("Time", "__name__", "instance", "job")), w=12)
    L.add(timeseries("Database component growth over a day",
                     "What each component gained (or lost, below zero) over the last day (ssdwatch:database_component_growth_bytes:1d); a sudden rise is what SsdwatchDatabaseComponentGrowingFast fires on.",
                     targets((f"ssdwatch:database_component_growth_bytes:1d{{{HOST}}}", "{{mountpoint}} {{component}} ({{database}})")),
                     unit="bytes"), w=12)
    L.add(timeseries("WAL waiting for the archiver",
                     "PostgreSQL segments complete and not yet archived (pg_wal/archive_status/*.ready), kept in pg_wal until archive_command succeeds, and the oldest one's age (right axis). Both fall to 0 once the archiver catches up.",
                     targets((f"ssdwatch_postgres_archive_ready_segments{{{HOST}}}", "{{database}} segments"),
                             (f"ssdwatch_postgres_archive_oldest_ready_age_seconds{{{HOST}}}", "{{database}} oldest")),
                     min_=0,
                     overrides=[{"matcher": {"id": "byRegexp", "options": ".* oldest"}, "properties": [
                         {"id": "custom.axisPlacement", "value": "right"}, {"id": "unit", "value": "s"}, {"id": "min", "value": 0}]}]), w=12)
    L.add(timeseries("Replication slots: retained WAL",
                     "WAL each replication slot keeps in pg_wal that the next checkpoint would otherwise remove (ssdwatch_postgres_replication_slot_retained_bytes): a slot whose consumer is gone grows without end.",
                     targets((f"ssdwatch_postgres_replication_slot_retained_bytes{{{HOST}}}", "{{database}} {{slot}} ({{type}})")),
                     unit="bytes", min_=0), w=12)
    L.add(timeseries("MySQL binary logs: oldest kept against retention",
                     "Age of the oldest binary log each MySQL/MariaDB server keeps, against the retention expected (collectors.databases.mysql_binlog_retention, dashed): above it, logs are not being purged.",
                     targets((f"ssdwatch_mysql_binlog_oldest_age_seconds{{{HOST}}}", "{{database}} oldest"),
                             (f"ssdwatch_mysql_binlog_retention_seconds{{{HOST}}}", "{{database}} retention")),
                     unit="s", min_=0,
                     overrides=[{"matcher": {"id": "byRegexp", "options": ".*retention"}, "properties": [{"id": "custom.lineStyle", "value": {"fill": "dash", "dash": [10, 10]}}]}]), w=12)

    L.row("Drives: wear and health (SMART)")
    L.add(timeseries("Wear used", "Share of the rated write endurance used (NVMe Percentage Used, ATA/SCSI equivalents); may exceed 100%.",
                     targets((f"ssdwatch_device_wear_used_ratio{{{HOST}}}", "{{device}} {{serial}}")), unit="percentunit", min_=0), w=8)
    L.add(timeseries("Spare available", "Spare blocks left, with the threshold the drive itself declares (dashed).",
                     targets((f"ssdwatch_device_spare_available_ratio{{{HOST}}}", "{{device}} spare"),
                             (f"ssdwatch_device_spare_threshold_ratio{{{HOST}}}", "{{device}} threshold")),
                     unit="percentunit", min_=0, max_=1,
                     overrides=[{"matcher": {"id": "byRegexp", "options": ".*threshold"}, "properties": [{"id": "custom.lineStyle", "value": {"fill": "dash", "dash": [10, 10]}}]}]), w=8)
    L.add(table("Predicted wear-out (days)", "Days until wear used reaches 100% at the last 7 days' rate (ssdwatch:device_seconds_until_worn_out). Only drives whose wear grew appear.",
                targets((f"ssdwatch:device_seconds_until_worn_out{{{HOST}}} / 86400", ""), instant=True, fmt="table"),
                unit="d", sort_by="Value", desc_sort=False, hide=("Time", "__name__", "instance", "job")), w=8)
    L.add(timeseries("Media errors", "Unrecovered media and data-integrity errors the drive counted over its life; any growth is bad.",
                     targets((f"ssdwatch_device_media_errors_total{{{HOST}}}", "{{device}} {{serial}}")), unit="short", min_=0), w=8)
    L.add(timeseries("Temperature", "Composite temperature the drive reports.",
                     targets((f"ssdwatch_device_temperature_celsius{{{HOST}}}", "{{device}}")), unit="celsius"), w=8)
    L.add(timeseries("Temperature against the drive's own limits", "Each drive's temperature with the warning and critical limits it declares (NVMe WCTEMP/CCTEMP, ATA SCT operating limit, SCSI drive trip; dashed). Drives that declare none show no limit.",
                     targets((f"ssdwatch_device_temperature_celsius{{{HOST}}} and on (instance, job, device) ssdwatch_device_temperature_limit_celsius", "{{device}}"),
                             (f"ssdwatch_device_temperature_limit_celsius{{{HOST}}}", "{{device}} {{limit}} limit")),
                     unit="celsius",
                     overrides=[{"matcher": {"id": "byRegexp", "options": ".*limit"}, "properties": [{"id": "custom.lineStyle", "value": {"fill": "dash", "dash": [10, 10]}}]}]), w=8)
    L.add(timeseries("Time above the temperature limits, per day", "Minutes a day the drive itself counted above its warning or critical temperature (NVMe): catches heat between two SMART samples. Any is worth a look.",
                     targets((f"increase(ssdwatch_device_temperature_above_limit_seconds_total{{{HOST}}}[1d])", "{{device}} above {{limit}}")),
                     unit="s", min_=0), w=8)
    L.add(timeseries("Thermal throttling, per day", "Time a day the drive slowed itself by host-controlled thermal management (NVMe TMT1 light, TMT2 heavy): latency without errors.",
                     targets((f"increase(ssdwatch_device_thermal_throttle_seconds_total{{{HOST}}}[1d])", "{{device}} {{level}}")),
                     unit="s", min_=0), w=8)
    L.add(timeseries("Error-log entries, new per day", "Entries the drive added to its own error log (NVMe error information log, ATA SMART error log) per day. The lifetime count means little; growth means failing commands.",
                     targets((f"increase(ssdwatch_device_error_log_entries_total{{{HOST}}}[1d])", "{{device}} {{serial}}")),
                     unit="short", min_=0), w=8)
    L.add(table("ATA attributes at their threshold", "Attributes whose normalized value is at or below the threshold now (failing now) or was (failed in the past): a pre-failure one is the drive predicting its own failure. Empty on healthy drives.",
                targets((f"ssdwatch_device_smart_attribute_failing_now{{{HOST}}} == 1", "now"),
                        (f"ssdwatch_device_smart_attribute_failed_in_past{{{HOST}}} == 1", "past"), instant=True, fmt="table"),
                hide=("Time", "__name__", "instance", "job"), rename={"Value #A": "failing now", "Value #B": "failed in the past"}), w=8)
    L.add(table("Latest self-test", "The newest entry of each drive's self-test log (ssdwatch never starts one): type, result and power-on days since it ran.",
                targets((f"ssdwatch_device_self_test_last_age_seconds{{{HOST}}} / 86400 * on (instance, job, device) group_left (type, result) ssdwatch_device_self_test_last_result{{{HOST}}}", ""), instant=True, fmt="table"),
                unit="d", hide=("Time", "__name__", "instance", "job", "wwn"), rename={"Value": "days since (power-on)"}), w=8)
    L.add(table("Is fsync durable?", "Per drive: the kernel's cache mode (1 write back: flushes sent; 0 write through: none) and the judgement (docs/durability.md): cache_flushes_off, sync_faster_than_medium, none, unknown.",
                targets((f"ssdwatch_device_durability_risk_info{{{HOST}}} * on (instance, job, device) group_left () ssdwatch_disk_write_cache_volatile{{{HOST}}}", ""), instant=True, fmt="table"),
                hide=("Time", "__name__", "instance", "job", "wwn"), rename={"Value": "kernel write back"}), w=8)
    L.add(timeseries("Write amplification", "NAND bytes written / host bytes written: over the drive's life and over the last day (1 is ideal).",
                     targets((f"ssdwatch_device_write_amplification_ratio{{{HOST}}}", "{{device}} {{window}}")), unit="short", min_=0), w=8)
    L.add(timeseries("Host and NAND bytes written per day (SMART)", "Bytes the host wrote to the drive and bytes the drive wrote to flash, per day (increase over 1 d).",
                     targets((f"increase(ssdwatch_device_host_written_bytes_total{{{HOST}}}[1d])", "{{device}} host"),
                             (f"increase(ssdwatch_device_nand_written_bytes_total{{{HOST}}}[1d])", "{{device}} NAND")), unit="bytes", min_=0))
    L.add(timeseries("Bytes written per day (block layer)", "Bytes written to each drive as the kernel counts them (/sys/block/*/stat), per day: available without SMART.",
                     targets((f"increase(ssdwatch_disk_written_bytes_total{{{HOST}}}[1d])", "{{device}}")), unit="bytes", min_=0))
    L.add(table("Drives", "Identity of every drive (ssdwatch_disk_info): kind, model, serial, firmware, WWN, rotational.",
                targets((f"ssdwatch_disk_info{{{HOST}}}", ""), instant=True, fmt="table"),
                hide=("Time", "__name__", "instance", "job", "Value")), w=24)

    L.row("TRIM health")
    L.add(table("TRIM path and discard option", "Per filesystem: whether every layer down to the drives passes discards (1) and whether it is mounted with the discard option.",
                targets((f"ssdwatch_filesystem_trim_capable{{{HOST}}}", "TRIM-capable"),
                        (f"ssdwatch_filesystem_discard_mount_option{{{HOST}}}", "discard option"), instant=True, fmt="table"),
                hide=("Time", "__name__", "instance", "job"), rename={"Value #A": "TRIM-capable", "Value #B": "discard option"}))
    # One tile per drive: the time is labelled by how it is known (observed, state after a
    # restart, fstrim_timer), and a restart turns one source into another.
    L.add(stat("Time since last discard", "Per drive: time since its last discard as best known (the daemon saw its discarded-bytes counter grow, an earlier run of it did, or systemd's fstrim.timer last ran): fstrim, discard mount option, or the database's own discards.",
               targets((f"time() - max by (instance, job, device) (ssdwatch_disk_last_discard_timestamp_seconds{{{HOST}}})", "{{device}}")), unit="s",
               thresholds=[{"color": "green", "value": None}, {"color": "orange", "value": 8 * 86400}, {"color": "red", "value": 14 * 86400}]))
    L.add(timeseries("Bytes discarded per day", "Bytes each drive was told are free, per day: what fstrim or online discard handed back to the SSD.",
                     targets((f"increase(ssdwatch_disk_discarded_bytes_total{{{HOST}}}[1d])", "{{device}}")), unit="bytes", min_=0))
    L.add(timeseries("Discard rate", "Discarded bytes per second: fstrim runs show as bursts.",
                     targets((f"rate(ssdwatch_disk_discarded_bytes_total{{{HOST}}}[$__rate_interval])", "{{device}}")), unit="Bps", min_=0))

    L.row("Probes (details in the Degradation dashboard)")
    L.add(timeseries("Probe latency per run", "Each probe target's last run: its p50 per probe kind (ssdwatch_probe_last_latency_seconds, quantile 0.5), so a step is one run. The Degradation dashboard sets it against fill, TRIM and idle time.",
                     targets((f'ssdwatch_probe_last_latency_seconds{{{HOST}, quantile="0.5"}}', "{{probe}} {{mountpoint}} p50")), unit="s", min_=0), w=12)
    L.add(table("Probe targets", "Per probe target (its filesystem and drive): time since its last completed run, and 1 when it has gone 3 attempts in a row without one (ssdwatch_probe_target_failing, the SsdwatchProbeTargetFailing alert).",
                targets((f"time() - ssdwatch_probe_last_run_timestamp_seconds{{{HOST}}}", "since last run"),
                        (f"max by (instance, job, mountpoint, device) (ssdwatch_probe_target_failing{{{HOST}}})", "failing"), instant=True, fmt="table"),
                hide=("Time", "__name__", "instance", "job"), rename={"Value #A": "since last run (s)", "Value #B": "failing"}), w=6)
    L.add(timeseries("Probe runs and skips per hour", "Runs per hour, and skips per hour by reason, per probe target.",
                     targets((f"increase(ssdwatch_probe_runs_total{{{HOST}}}[1h])", "{{mountpoint}} runs"),
                             (f"increase(ssdwatch_probe_skipped_total{{{HOST}}}[1h]) > 0", "{{mountpoint}} skipped: {{reason}}")), min_=0), w=6)

    L.row("Exporter")
    L.add(timeseries("Collector success", "1 when the collector's last sample succeeded.",
                     targets((f"ssdwatch_collector_success{{{HOST}}}", "{{collector}}")), min_=0, max_=1), w=8)
    L.add(timeseries("Collector duration", "Time each collector's last sample took.",
                     targets((f"ssdwatch_collector_duration_seconds{{{HOST}}}", "{{collector}}")), unit="s", min_=0), w=8)
    L.add(timeseries("Collector errors", "Per-device errors per second (a bad device does not fail its collector; see the daemon's log).",
                     targets((f"rate(ssdwatch_collector_errors_total{{{HOST}}}[$__rate_interval])", "{{collector}}")), min_=0), w=8)
    return dashboard(
        "ssdwatch-host", "ssdwatch / Host",
        "One host: filesystem fill and forecasts, the layers below filesystems, what is filling them (database components), drive wear and health, TRIM health.",
        L.panels,
        [var_datasource(), var_query("instance", "Instance", "label_values(ssdwatch_collector_success, instance)")],
    )


def degradation():
    L = Layout()
    sel = 'instance="$instance", probe=~"$probe", mountpoint=~"$mountpoint"'
    # The context gauges, runs and skips describe a target (its filesystem and drive), not one
    # probe kind: one run does every configured kind, so they carry no `probe` label.
    ctx = 'instance="$instance", mountpoint=~"$mountpoint"'
    # Per-run gauges: each value belongs to one run, and they change together when a run ends,
    # so "now" and the points of the XY charts are runs, whatever the probe interval.
    p50 = f'ssdwatch_probe_last_latency_seconds{{{sel}, quantile="0.5"}}'
    run_max = f'ssdwatch_probe_last_latency_seconds{{{sel}, quantile="1"}}'

    def per_target(metric):
        # One series per target even when its device label changed during the range (a target
        # is first published with the configured path and no device, until it is resolved).
        return f"max by (instance, mountpoint) ({metric}{{{ctx}}})"

    # Recovery around events, over the dashboard's range, at the rule evaluation interval
    # (finer than probe intervals). A run is known by its start time (last_run_timestamp) and
    # its p50 is read at the steps where it is the run shown; `@ end()` pins the event to the
    # latest one in the range. ("The run right after" is found in one pass, below; an `@`
    # nested three levels deep, in an `@ end()` subquery inside another subquery, finds
    # nothing in Prometheus 2.42.)
    runs = f"ssdwatch_probe_last_run_timestamp_seconds{{{ctx}}}"
    # The discard is read from the drive's counter by this run of the daemon (observed) or an
    # earlier one (state: what a restart exports until the next discard), never from the
    # fstrim.timer hint, which is not a reading of the drive.
    discard = f'max by (instance, device) (ssdwatch_disk_last_discard_timestamp_seconds{{instance="$instance", source=~"observed|state"}} @ end())'
    # The last run before the discard: the latest step whose run started before it.
    before_trim = f"last_over_time(({p50} and on (instance, mountpoint) ({runs} < on (instance, device) group_left {discard}))[$__range:])"
    # The first run after it: the earliest step whose run started after it. Prometheus has no
    # first_over_time, so each such step's key is its p50 (capped below 16 s) minus 16 × the
    # tenths of seconds from the discard to the run's start: the largest key is the earliest
    # run (runs start at least 0.5 s apart), and its p50 is the key modulo 16.
    after_key = f"max_over_time((clamp_max({p50}, 15) - on (instance, mountpoint) group_left () (16 * floor(10 * (({runs} - on (instance, device) group_left {discard}) >= 0))))[$__range:])"
    after_trim = f"((({after_key}) % 16) + 16) % 16"
    # Idle: the latest run after a long rest, one at least half as long as the longest a run
    # saw in the $__range before it (probe context idle_seconds; a run with no rest before it,
    # 0 s, is after none, even when no run of the range rested), is known by its start time;
    # the run before it is the latest shown before that start. Both are read at the steps
    # where they are the run shown, so neither depends on where a step falls between two
    # scrapes, and the answer is the same whenever it is asked. (The longest rest is "in the
    # range before it", not "in the dashboard's range": that would take an `@ end()` three
    # levels deep, see above.)
    idle = f"ssdwatch_probe_context_idle_seconds{{{ctx}}}"
    rest_run = f"max by (instance, mountpoint) (max_over_time(({runs} and on (instance, mountpoint) (({idle} > 0) >= 0.5 * max_over_time({idle}[$__range])))[$__range:] @ end()))"
    after_idle = f"last_over_time(({p50} and on (instance, mountpoint) ({runs} == on (instance, mountpoint) group_left {rest_run}))[$__range:])"
    before_idle = f"last_over_time(({p50} and on (instance, mountpoint) ({runs} < on (instance, mountpoint) group_left {rest_run}))[$__range:])"
    idle_len = f"last_over_time(({idle} and on (instance, mountpoint) ({runs} == on (instance, mountpoint) group_left {rest_run}))[$__range:])"

    L.row("Probe latency and its context")
    L.add(timeseries("Probe latency per run with fill ratio",
                     "Each probe's last run: its p50 and its slowest I/O (ssdwatch_probe_last_latency_seconds, quantiles 0.5 and 1), so a step is one run, however far apart runs are; the filesystem's fill ratio at each run on the right axis (dashed). TRIM events and idle periods are annotations.",
                     targets((p50, "{{probe}} {{mountpoint}} p50 (run)"),
                             (run_max, "{{probe}} {{mountpoint}} max (run)"),
                             (f"ssdwatch_probe_context_fill_ratio{{{ctx}}}", "{{mountpoint}} fill")),
                     unit="s", overrides=[right_axis(".* fill", "percentunit")]), w=24, h=10)
    # A p99 of fewer than 100 I/Os is the bucket of the slowest one, not a p99: shown only for
    # windows that hold 100 (the same rule as a run's own p99, docs/metrics.md).
    ios = f"sum by (probe, mountpoint) (increase(ssdwatch_probe_latency_seconds_count{{{sel}}}[$__rate_interval]))"
    L.add(timeseries("Latency distribution (histogram)",
                     "p50 and p99 of every probe I/O in each $__rate_interval window (ssdwatch_probe_latency_seconds): the window follows the graph's resolution, so zooming in does not smear runs together. A window without a run has no point. A window of fewer than 100 I/Os of a kind (e.g. under 2 runs of 64 writes) has no p99, only a p50: its 99th percentile would be the bucket of its slowest I/O, not a p99. Zoom out for a p99; each run's slowest I/O is its max (run) in the panel above.",
                     targets((f"histogram_quantile(0.5, sum by (probe, mountpoint, le) (rate(ssdwatch_probe_latency_seconds_bucket{{{sel}}}[$__rate_interval]))) > 0", "{{probe}} {{mountpoint}} p50"),
                             (f"histogram_quantile(0.99, sum by (probe, mountpoint, le) (rate(ssdwatch_probe_latency_seconds_bucket{{{sel}}}[$__rate_interval]))) > 0 and on (probe, mountpoint) ({ios} >= 100)", "{{probe}} {{mountpoint}} p99")),
                     unit="s", min_=0))
    L.add(table("Latency over the time range (histogram)", "p50 and p99 of every probe I/O in the dashboard's time range, from the histogram (increase over $__range).",
                targets((f"histogram_quantile(0.5, sum by (probe, mountpoint, le) (increase(ssdwatch_probe_latency_seconds_bucket{{{sel}}}[$__range])))", "{{probe}} {{mountpoint}} p50"),
                        (f"histogram_quantile(0.99, sum by (probe, mountpoint, le) (increase(ssdwatch_probe_latency_seconds_bucket{{{sel}}}[$__range])))", "{{probe}} {{mountpoint}} p99"),
                        instant=True, fmt="table"),
                unit="s", hide=("Time",), rename={"Value #A": "p50", "Value #B": "p99"}, sort_by="p99"), w=6)
    L.add(timeseries("Sequential write throughput", "Throughput of the seq_write probe's last burst.",
                     targets((f"ssdwatch_probe_throughput_bytes_per_second{{{sel}}}", "{{probe}} {{mountpoint}}")), unit="Bps", min_=0), w=6)

    L.row("Recovery around events: the latest TRIM and the longest idle period in the range")
    L.add(stat("Latency after the latest TRIM / before it",
               "Per probe: p50 of the first run that started after the drive's latest discard (ssdwatch_disk_last_discard_timestamp_seconds, as this daemon saw it or, after a restart, as the earlier one did: source observed or state) divided by the p50 of the last run that started before it. Below 1: the TRIM helped. Runs in the dashboard's time range only.",
               targets((f"{after_trim} / {before_trim}", "{{probe}} {{mountpoint}}"), instant=True), unit="short", decimals=2,
               thresholds=[{"color": "green", "value": None}, {"color": "orange", "value": 0.9}, {"color": "red", "value": 1.1}]), w=8)
    L.add(table("Latest TRIM: last run before, first run after",
                "Per probe: p50 of the last run that started before the drive's latest discard (source observed or state), and of the first run that started after it, with the discard's time. The runs are found by their start times, not by a clock window, so the first run after is compared however long it came after the discard.",
                targets((before_trim, "{{probe}} {{mountpoint}} before"),
                        (after_trim, "{{probe}} {{mountpoint}} after"),
                        instant=True, fmt="table"),
                unit="s", hide=("Time", "__name__", "instance", "job", "quantile"), rename={"Value #A": "p50 last run before", "Value #B": "p50 first run after"}), w=8)
    L.add(table("Idle recovery: last run before a long rest, the run after",
                "Per probe: the latest long rest of the drive in the time range, one at least half as long as the longest a run saw in the time range's length before it (probe context ssdwatch_probe_context_idle_seconds, shown as idle before), the p50 of the run right after it and of the run right before it, found by their start times; a target whose drive never rested in the range has no row, and one whose longest rest came before its first run in the range shows no run before. An SSD collects garbage while idle: a lower p50 after the rest is that. Compare with the TRIM table.",
                targets((before_idle, "{{probe}} {{mountpoint}} before"),
                        (after_idle, "{{probe}} {{mountpoint}} after"),
                        # The rest's length on each probe's row (same labels as the p50s, so the rows merge).
                        (f"{after_idle} * 0 + on (instance, mountpoint) group_left max by (instance, mountpoint) ({idle_len})", "{{probe}} {{mountpoint}} idle before"),
                        instant=True, fmt="table"),
                unit="s", hide=("Time", "__name__", "instance", "job", "quantile"),
                rename={"Value #A": "p50 run before", "Value #B": "p50 run after", "Value #C": "idle before (s)"}), w=8)

    L.row("Latency against fill, TRIM and idle: one point per run ($mountpoint)")
    L.add(xychart("Run p50 vs fill ratio: trimmed vs deleted, not trimmed",
                  "Each point: one run's p50 (y) at the filesystem's fill ratio then (x). Runs while more than 1% of the filesystem was deleted but not yet trimmed (ssdwatch_filesystem_freed_untrimmed_bytes) are a series of their own: at the same fill they are the ones the drive still holds as live data. A curve bending up past a fill ratio is the drive running out of clean blocks.",
                  per_target("ssdwatch_probe_context_fill_ratio"), "fill ratio",
                  [(f"{p50} unless on (instance, mountpoint) (ssdwatch_filesystem_freed_untrimmed_bytes{{{ctx}}} / ssdwatch_filesystem_size_bytes{{{ctx}}} > 0.01)", "{{probe}} p50, trimmed"),
                   (f"{p50} and on (instance, mountpoint) (ssdwatch_filesystem_freed_untrimmed_bytes{{{ctx}}} / ssdwatch_filesystem_size_bytes{{{ctx}}} > 0.01)", "{{probe}} p50, deleted not trimmed")],
                  # A run is either trimmed or not: the two y queries never share a time, so an
                  # inner join would leave no row at all.
                  "percentunit", "s", repeat="mountpoint", join="outer"), w=12)
    L.add(xychart("Run p50 vs bytes written since TRIM",
                  "Each point: one run's p50 (y) against what the drive had absorbed since its last discard when the run started (x, ssdwatch_probe_context_written_since_discard_bytes): the clean blocks a TRIM gives back are used up by writes, not by time. No points until a discard of the drive is known.",
                  per_target("ssdwatch_probe_context_written_since_discard_bytes"), "written since TRIM",
                  [(p50, "{{probe}} p50")], "bytes", "s", repeat="mountpoint"), w=12)
    L.add(xychart("Run p50 vs time since TRIM",
                  "Each point: one run's p50 (y) against the time since the drive's last discard when the run started (x, ssdwatch_probe_context_since_discard_seconds, hours). Every TRIM cycle in the range starts again at the left, so cycles lie on top of each other.",
                  f'{per_target("ssdwatch_probe_context_since_discard_seconds")} / 3600', "hours since TRIM",
                  [(p50, "{{probe}} p50")], "h", "s", repeat="mountpoint"), w=12)
    L.add(xychart("Run p50 vs idle time before the run",
                  "Each point: one run's p50 (y) against how long the drive had been idle before it (x, ssdwatch_probe_context_idle_seconds): runs after a longer rest are faster when the drive collects garbage while idle.",
                  per_target("ssdwatch_probe_context_idle_seconds"), "idle before the run",
                  [(p50, "{{probe}} p50")], "s", "s", repeat="mountpoint"), w=12)

    L.row("Performance-full: the fill at which commits get slow")
    slow_sel = 'instance="$instance", mountpoint=~"$mountpoint"'
    L.add(table("Performance-full per target",
                "From the daemon's history (docs/probes.md): the fill from which the sync_write_4k median on the trimmed latency-by-fill curve passed the target's slow level (3x its low-fill baseline unless configured), and the days until the fill forecast gets there (0: past it already). A target whose curve never crossed shows only the highest fill seen: not reached at that fill; nothing is guessed beyond it.",
                targets((f"ssdwatch_probe_slow_fill_ratio{{{slow_sel}}}", ""),
                        (f"ssdwatch_probe_curve_max_fill_ratio{{{slow_sel}}}", ""),
                        (f"ssdwatch_probe_slow_baseline_seconds{{{slow_sel}}}", ""),
                        (f"ssdwatch_probe_slow_level_seconds{{{slow_sel}}}", ""),
                        (f"clamp_min(ssdwatch_probe_predicted_slow_timestamp_seconds{{{slow_sel}}} - time(), 0) / 86400", ""), instant=True, fmt="table"),
                hide=("Time", "job", "instance"),
                rename={"Value #A": "slow from fill", "Value #B": "not reached at fill", "Value #C": "baseline p50 (s)",
                        "Value #D": "slow level (s)", "Value #E": "days until slow"}), w=24, h=6)

    L.row("Drive activity: discards and idle time")
    L.add(timeseries("Discard bursts", "Discarded bytes per second per drive: each fstrim is a burst.",
                     targets((f'rate(ssdwatch_disk_discarded_bytes_total{{instance="$instance"}}[$__rate_interval])', "{{device}}")), unit="Bps", min_=0), w=8)
    L.add(timeseries("Drive idle time", "Seconds since each drive last did I/O (its io time stopped growing): SSDs do garbage collection when idle.",
                     targets((f'ssdwatch_disk_idle_seconds{{instance="$instance"}}', "{{device}}")), unit="s", min_=0), w=8)
    L.add(timeseries("Drive utilization", "Share of time each drive was busy (io time per second).",
                     targets((f'rate(ssdwatch_disk_io_time_seconds_total{{instance="$instance"}}[$__rate_interval])', "{{device}}")), unit="percentunit", min_=0, max_=1), w=8)
    L.add(timeseries("Probe context at the last run", "The context each run recorded: time since the drive's last discard and the drive's idle time before the run.",
                     targets((f"ssdwatch_probe_context_since_discard_seconds{{{ctx}}}", "{{mountpoint}} since discard"),
                             (f"ssdwatch_probe_context_idle_seconds{{{ctx}}}", "{{mountpoint}} idle before")), unit="s", min_=0))
    L.add(timeseries("Probe runs and skips", "Runs per hour, and skips per hour by reason (budget, budget_unrecorded, busy, low_space, readonly, unsafe, error), per target: one run does every probe kind of its target, so these are not split by kind.",
                     targets((f"increase(ssdwatch_probe_runs_total{{{ctx}}}[1h])", "{{mountpoint}} runs"),
                             (f"increase(ssdwatch_probe_skipped_total{{{ctx}}}[1h])", "{{mountpoint}} skipped: {{reason}}")), min_=0))
    anns = [
        # One event per discard: around a restart the time is exported as observed, then as
        # state, with scrapes in between that find no daemon (the last value bridges them).
        annotation("TRIM events", 'time() - max by (instance, device) (last_over_time(ssdwatch_disk_last_discard_timestamp_seconds{instance="$instance",source=~"observed|state"}[5m])) < 60', "green", "discard on {{device}}"),
        # Only the drives under the probe targets shown: a spare or unused drive is idle all day.
        annotation("Idle periods", f'ssdwatch_disk_idle_seconds{{instance="$instance"}} > $idle_min and on (instance, device) ssdwatch_probe_runs_total{{{ctx}}}', "purple", "{{device}} idle"),
    ]
    return dashboard(
        "ssdwatch-degradation", "ssdwatch / Degradation",
        "Does latency degrade as the filesystem fills, and does TRIM or idle time bring it back? Probe latency with its context.",
        L.panels,
        [
            var_datasource(),
            var_query("instance", "Instance", "label_values(ssdwatch_collector_success, instance)"),
            # The latency series carry the probe kind; runs_total does not (a run does every kind).
            var_query("probe", "Probe", 'label_values(ssdwatch_probe_latency_seconds_count{instance="$instance"}, probe)', multi=True, include_all=True, all_value=".*"),
            var_query("mountpoint", "Mount point", 'label_values(ssdwatch_probe_runs_total{instance="$instance"}, mountpoint)', multi=True, include_all=True, all_value=".*"),
            # Seconds: the idle annotation marks rests at least this long.
            var_custom("idle_min", "Idle periods of at least (s)", ["600", "1800", "3600"], "600"),
        ],
        annotations=anns,
        time_from="now-7d",
    )


def fleet():
    L = Layout()
    L.row("Fleet summary")
    L.add(stat("Hosts scraped", "ssdwatch exporters up.", targets((f'count(up{{job=~"ssdwatch.*", {FLEET}}} == 1) or vector(0)', ""))), w=6, h=4)
    L.add(stat("Exporters down", "ssdwatch exporters Prometheus cannot scrape.", targets((f'count(up{{job=~"ssdwatch.*", {FLEET}}} == 0) or vector(0)', "")),
               thresholds=[{"color": "green", "value": None}, {"color": "red", "value": 1}]), w=6, h=4)
    L.add(stat("Filesystems over 90%", "Mounts whose effective fill (ssdwatch:filesystem_used_ratio: df's Use%, or more where a layer below runs out first) is over 90%.", targets((f"count(ssdwatch:filesystem_used_ratio{{{FLEET}}} > 0.9) or vector(0)", "")),
               thresholds=[{"color": "green", "value": None}, {"color": "orange", "value": 1}]), w=6, h=4)
    L.add(stat("Firing ssdwatch alerts", "Alerts of the ssdwatch rules firing now.", targets((f'count(ALERTS{{alertname=~"Ssdwatch.*", alertstate="firing", {FLEET}}}) or vector(0)', "")),
               thresholds=[{"color": "green", "value": None}, {"color": "red", "value": 1}]), w=6, h=4)

    L.row("Filesystems")
    L.add(table("Fullest filesystems", "Top $topn mounts by effective fill (recording rule ssdwatch:filesystem_used_ratio: df's Use%, or more where a layer below, a thin pool or a ZFS pool, runs out first).",
                targets((f"topk($topn, ssdwatch:filesystem_used_ratio{{{FLEET}}})", ""), instant=True, fmt="table"),
                unit="percentunit", sort_by="Value", hide=("Time", "__name__", "job")))
    L.add(table("Soonest predicted full (days)", "Mounts predicted full soonest (ssdwatch:filesystem_seconds_until_full: the daemon's date is the earliest of the filesystem's and its layers').",
                targets((f"bottomk($topn, ssdwatch:filesystem_seconds_until_full{{{FLEET}}}) / 86400", ""), instant=True, fmt="table"),
                unit="d", sort_by="Value", desc_sort=False, hide=("Time", "__name__", "job")))
    L.add(table("SSD filesystems that cannot TRIM", "A layer between the filesystem and its SSD drops discards (ssdwatch:filesystem_trim_incapable).",
                targets((f"ssdwatch:filesystem_trim_incapable{{{FLEET}}}", ""), instant=True, fmt="table"),
                hide=("Time", "__name__", "job", "Value")))
    L.add(table("SSD filesystems without TRIM in 8 days", "No discard option and no discard seen on their drives for 8 days (ssdwatch:filesystem_trim_overdue).",
                targets((f"ssdwatch:filesystem_trim_overdue{{{FLEET}}}", ""), instant=True, fmt="table"),
                hide=("Time", "__name__", "job", "Value")))

    L.row("Drives")
    L.add(table("Most worn drives", "Top $topn drives by wear used.",
                targets((f"topk($topn, ssdwatch_device_wear_used_ratio{{{FLEET}}})", ""), instant=True, fmt="table"),
                unit="percentunit", sort_by="Value", hide=("Time", "__name__", "job")))
    L.add(table("Soonest predicted wear-out (days)", "Drives predicted to reach 100% wear soonest (ssdwatch:device_seconds_until_worn_out).",
                targets((f"bottomk($topn, ssdwatch:device_seconds_until_worn_out{{{FLEET}}}) / 86400", ""), instant=True, fmt="table"),
                unit="d", sort_by="Value", desc_sort=False, hide=("Time", "__name__", "job")))

    L.row("Probes")
    L.add(table("Worst latency regressions", "Probes whose last hour's p99 is the most times above their 7-day baseline (ssdwatch:probe_latency_seconds:p99_regression_ratio).",
                targets((f"topk($topn, ssdwatch:probe_latency_seconds:p99_regression_ratio{{{FLEET}}})", ""), instant=True, fmt="table"),
                unit="short", sort_by="Value", hide=("Time", "__name__", "job")))
    L.add(table("Slowest probes now (p99, last hour)", "Top $topn probes by p99 latency over the last hour (ssdwatch:probe_latency_seconds:p99_1h).",
                targets((f"topk($topn, ssdwatch:probe_latency_seconds:p99_1h{{{FLEET}}})", ""), instant=True, fmt="table"),
                unit="s", sort_by="Value", hide=("Time", "__name__", "job")))
    return dashboard(
        "ssdwatch-fleet", "ssdwatch / Fleet",
        "All hosts: the fullest filesystems, the soonest full and worn out, TRIM gaps, latency regressions. Reads recording rules only, so it stays fast with thousands of hosts.",
        L.panels,
        [
            var_datasource(),
            var_query("instance", "Instance", "label_values(ssdwatch_collector_success, instance)", multi=True, include_all=True, all_value=".*"),
            var_custom("topn", "Top N", ["10", "20", "50", "100"], "20"),
        ],
        time_from="now-6h",
    )


DASHBOARDS = {"ssdwatch-host.json": host, "ssdwatch-degradation.json": degradation, "ssdwatch-fleet.json": fleet}


def render(build):
    return json.dumps(build(), indent=2, ensure_ascii=False) + "\n"


def main(argv):
    check = "--check" in argv[1:]
    stale = []
    for name, build in DASHBOARDS.items():
        path = os.path.join(OUT_DIR, name)
        text = render(build)
        if check:
            try:
                with open(path, encoding="utf-8") as f:
                    current = f.read()
            except OSError as e:
                current = None
                print(f"{path}: {e}", file=sys.stderr)
            if current != text:
                stale.append(path)
        else:
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
    if stale:
        print("out of date (run dashboards/gen/generate.py): " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
