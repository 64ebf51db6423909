//! Every metric family ssdwatch exports, declared once: name, type, unit, help and label names.
//! Collectors, the history's forecasts, the OpenMetrics export, the Prometheus-backed report and
//! docs/metrics.md all refer to these entries; nothing else names a family (a test checks that).

/// Prometheus metric types we emit (text format 0.0.4 names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricKind {
    Gauge,
    Counter,
    Histogram,
    Summary,
}

impl MetricKind {
    pub fn as_str(self) -> &'static str {
        match self {
            MetricKind::Gauge => "gauge",
            MetricKind::Counter => "counter",
            MetricKind::Histogram => "histogram",
            MetricKind::Summary => "summary",
        }
    }
}

/// One metric family as exported: the name (with `_total` for counters, as text format 0.0.4
/// writes it), its type, the unit its name ends with ("" for counts, states and `_info`), the
/// `# HELP` text, and the label names of every series in the order they are written (`le` and
/// `quantile` of histograms and summaries come on top).
#[derive(Debug, PartialEq, Eq)]
pub struct Family {
    pub name: &'static str,
    pub kind: MetricKind,
    pub unit: &'static str,
    pub help: &'static str,
    pub labels: &'static [&'static str],
}

macro_rules! catalogue {
    ($($(#[$doc:meta])* $id:ident: $kind:ident $name:literal [$($label:literal),*] unit $unit:literal $help:literal;)*) => {
        $($(#[$doc])* pub(crate) static $id: Family = Family {
            name: $name,
            kind: MetricKind::$kind,
            unit: $unit,
            help: $help,
            labels: &[$($label),*],
        };)*
        /// Every family, in the order of the sections below: what the tests check against
        /// docs/metrics.md, the golden scrapes, the rules and the dashboards.
        #[cfg_attr(not(test), allow(dead_code))]
        pub(crate) static ALL: &[&Family] = &[$(&$id),*];
    };
}

catalogue! {
    // The daemon itself, rendered at each scrape (src/snapshot.rs).
    COLLECTOR_SUCCESS: Gauge "ssdwatch_collector_success" ["collector"] unit ""
        "Whether the collector's last sample succeeded (1) or failed (0); 0 also while its next one is overdue.";
    COLLECTOR_DURATION_SECONDS: Gauge "ssdwatch_collector_duration_seconds" ["collector"] unit "seconds"
        "How long the collector's last sample took.";
    COLLECTOR_LAST_SUCCESS_TIMESTAMP_SECONDS: Gauge "ssdwatch_collector_last_success_timestamp_seconds" ["collector"] unit "seconds"
        "When the collector last sampled successfully (Unix time).";
    COLLECTOR_ERRORS_TOTAL: Counter "ssdwatch_collector_errors_total" ["collector"] unit ""
        "Errors met by the collector: failed samples and per-device errors.";
    COLLECTOR_FAILING_ITEMS: Gauge "ssdwatch_collector_failing_items" ["collector"] unit ""
        "Items (mounts, devices, targets) the collector could not sample in its last sample.";
    BUILD_INFO: Gauge "ssdwatch_build_info" ["version"] unit ""
        "Version of the running ssdwatch; always 1.";
    CONFIG_LAST_RELOAD_SUCCESSFUL: Gauge "ssdwatch_config_last_reload_successful" ["file"] unit ""
        "Whether the last load of the config file succeeded (1) or failed (0, the previous config stays); file is config (--config) or web_config (--web.config.file).";
    CONFIG_LAST_RELOAD_SUCCESS_TIMESTAMP_SECONDS: Gauge "ssdwatch_config_last_reload_success_timestamp_seconds" ["file"] unit "seconds"
        "When the config file was last loaded successfully (Unix time): at start, or the last good reload.";
    COLLECTOR_SAMPLE_AGE_SECONDS: Gauge "ssdwatch_collector_sample_age_seconds" ["collector"] unit "seconds"
        "Seconds since the collector last published a sample, at the scrape.";
    // Calls that may hang, through one door (src/door.rs), rendered at each scrape.
    BLOCKING_THREADS: Gauge "ssdwatch_blocking_threads" ["collector"] unit ""
        "Threads the collector holds in calls that may hang (stat, readdir, ioctl), running or hung.";
    BLOCKING_STUCK_CALLS: Gauge "ssdwatch_blocking_stuck_calls" ["collector"] unit ""
        "The collector's calls past their deadline that have not returned (a hung call holds a thread; a child stuck in the kernel holds none).";
    BLOCKING_TIMEOUTS_TOTAL: Counter "ssdwatch_blocking_timeouts_total" ["collector"] unit ""
        "The collector's calls that gave no answer by their deadline.";
    BLOCKING_REFUSED_TOTAL: Counter "ssdwatch_blocking_refused_total" ["collector"] unit ""
        "The collector's calls not started: the item's earlier call had not returned, or no thread was left.";
    BLOCKING_PANICS_TOTAL: Counter "ssdwatch_blocking_panics_total" ["collector"] unit ""
        "The collector's calls that panicked (a defect).";
    // The web layer, rendered at each scrape (src/web/routes.rs).
    SCRAPES_TOTAL: Counter "ssdwatch_scrapes_total" ["encoding"] unit ""
        "Responses to /metrics by content encoding: gzip (the client accepts it, as Prometheus does) or identity.";
    // The main process, named as every Prometheus client library names these (src/process.rs).
    PROCESS_CPU_SECONDS_TOTAL: Counter "process_cpu_seconds_total" [] unit "seconds"
        "Total user and system CPU time spent in seconds.";
    PROCESS_VIRTUAL_MEMORY_BYTES: Gauge "process_virtual_memory_bytes" [] unit "bytes"
        "Virtual memory size in bytes.";
    PROCESS_RESIDENT_MEMORY_BYTES: Gauge "process_resident_memory_bytes" [] unit "bytes"
        "Resident memory size in bytes.";
    PROCESS_START_TIME_SECONDS: Gauge "process_start_time_seconds" [] unit "seconds"
        "Start time of the process since unix epoch in seconds.";
    PROCESS_OPEN_FDS: Gauge "process_open_fds" [] unit ""
        "Number of open file descriptors.";
    PROCESS_MAX_FDS: Gauge "process_max_fds" [] unit ""
        "Maximum number of open file descriptors.";
    // Collector `topology`: the block stack from /sys.
    DISK_INFO: Gauge "ssdwatch_disk_info" ["device", "kind", "model", "serial", "firmware", "wwn", "rotational"] unit ""
        "Identity of a physical drive (bottom of the block stack); always 1. Join on device.";
    DISK_LAYER_INFO: Gauge "ssdwatch_disk_layer_info" ["device", "kind", "parent", "dm_name", "dm_target", "md_level"] unit ""
        "A layer of the block stack above the drives (partition, dm, md); always 1.";
    DISK_LAYER_SLAVE_INFO: Gauge "ssdwatch_disk_layer_slave_info" ["device", "slave"] unit ""
        "Edge of the block stack: device is built on slave; always 1.";
    DISK_SIZE_BYTES: Gauge "ssdwatch_disk_size_bytes" ["device"] unit "bytes"
        "Size of the block device in bytes.";
    DISK_ROTATIONAL: Gauge "ssdwatch_disk_rotational" ["device"] unit ""
        "Whether the kernel reports the device as rotational (virtio disks report 1 even on SSDs).";
    DISK_LOGICAL_BLOCK_SIZE_BYTES: Gauge "ssdwatch_disk_logical_block_size_bytes" ["device"] unit "bytes"
        "Logical block size of the device.";
    DISK_PHYSICAL_BLOCK_SIZE_BYTES: Gauge "ssdwatch_disk_physical_block_size_bytes" ["device"] unit "bytes"
        "Physical block size of the device.";
    DISK_DISCARD_MAX_BYTES: Gauge "ssdwatch_disk_discard_max_bytes" ["device"] unit "bytes"
        "Largest discard the device's queue accepts; 0 means this layer drops discards.";
    DISK_DISCARD_GRANULARITY_BYTES: Gauge "ssdwatch_disk_discard_granularity_bytes" ["device"] unit "bytes"
        "Discard granularity of the device's queue.";
    DISK_WRITE_CACHE_VOLATILE: Gauge "ssdwatch_disk_write_cache_volatile" ["device"] unit ""
        "The kernel's queue/write_cache: 1 for write back (it sends cache flushes), 0 for write through (it sends none).";
    DISK_FUA: Gauge "ssdwatch_disk_fua" ["device"] unit ""
        "The kernel's queue/fua: 1 when the device takes Force Unit Access writes.";
    DISK_SOLID_STATE: Gauge "ssdwatch_disk_solid_state" ["device", "source"] unit ""
        "1 when the drive is taken for solid-state (flash), 0 for spinning; source says from what: config, smart (rotation rate), nvme, rotational (the kernel's flag), virtual_discard (a virtual disk that passes discards).";
    // Collector `diskstats`: I/O, discard and idle counters from /sys/block/*/stat.
    DISK_READS_COMPLETED_TOTAL: Counter "ssdwatch_disk_reads_completed_total" ["device"] unit ""
        "Reads completed.";
    DISK_READS_MERGED_TOTAL: Counter "ssdwatch_disk_reads_merged_total" ["device"] unit ""
        "Adjacent reads merged.";
    DISK_READ_BYTES_TOTAL: Counter "ssdwatch_disk_read_bytes_total" ["device"] unit "bytes"
        "Bytes read.";
    DISK_READ_TIME_SECONDS_TOTAL: Counter "ssdwatch_disk_read_time_seconds_total" ["device"] unit "seconds"
        "Time spent by all reads.";
    DISK_WRITES_COMPLETED_TOTAL: Counter "ssdwatch_disk_writes_completed_total" ["device"] unit ""
        "Writes completed.";
    DISK_WRITES_MERGED_TOTAL: Counter "ssdwatch_disk_writes_merged_total" ["device"] unit ""
        "Adjacent writes merged.";
    DISK_WRITTEN_BYTES_TOTAL: Counter "ssdwatch_disk_written_bytes_total" ["device"] unit "bytes"
        "Bytes written.";
    DISK_WRITE_TIME_SECONDS_TOTAL: Counter "ssdwatch_disk_write_time_seconds_total" ["device"] unit "seconds"
        "Time spent by all writes.";
    DISK_IO_NOW: Gauge "ssdwatch_disk_io_now" ["device"] unit ""
        "I/Os currently in flight.";
    DISK_IO_TIME_SECONDS_TOTAL: Counter "ssdwatch_disk_io_time_seconds_total" ["device"] unit "seconds"
        "Time the device had I/O in flight (busy time).";
    DISK_IO_TIME_WEIGHTED_SECONDS_TOTAL: Counter "ssdwatch_disk_io_time_weighted_seconds_total" ["device"] unit "seconds"
        "Busy time weighted by the number of I/Os in flight.";
    DISK_DISCARDS_COMPLETED_TOTAL: Counter "ssdwatch_disk_discards_completed_total" ["device"] unit ""
        "Discards (TRIM/UNMAP/deallocate) completed.";
    DISK_DISCARDS_MERGED_TOTAL: Counter "ssdwatch_disk_discards_merged_total" ["device"] unit ""
        "Adjacent discards merged.";
    DISK_DISCARDED_BYTES_TOTAL: Counter "ssdwatch_disk_discarded_bytes_total" ["device"] unit "bytes"
        "Bytes discarded.";
    DISK_DISCARD_TIME_SECONDS_TOTAL: Counter "ssdwatch_disk_discard_time_seconds_total" ["device"] unit "seconds"
        "Time spent by all discards.";
    DISK_FLUSH_REQUESTS_TOTAL: Counter "ssdwatch_disk_flush_requests_total" ["device"] unit ""
        "Cache flush requests completed.";
    DISK_FLUSH_TIME_SECONDS_TOTAL: Counter "ssdwatch_disk_flush_time_seconds_total" ["device"] unit "seconds"
        "Time spent by all flush requests.";
    DISK_IOSTATS_ENABLED: Gauge "ssdwatch_disk_iostats_enabled" ["device"] unit ""
        "1 when the kernel accounts the device's I/O (queue/iostats); 0 when turned off: its counters then stay frozen, so idle time, the last-discard time and the probes' utilization context are absent.";
    DISK_LAST_DISCARD_TIMESTAMP_SECONDS: Gauge "ssdwatch_disk_last_discard_timestamp_seconds" ["device", "source"] unit "seconds"
        "Last time (Unix) the device received a discard; source: observed (this run saw its discarded bytes grow), state (an earlier run did), fstrim_timer (systemd's fstrim.timer last ran then: a hint).";
    DISK_LAST_DISCARD_BURST_BYTES: Gauge "ssdwatch_disk_last_discard_burst_bytes" ["device"] unit "bytes"
        "Bytes discarded in the device's newest discard burst (consecutive samples in which discarded bytes grew: one fstrim, one mkfs).";
    DISK_WRITTEN_SINCE_DISCARD_BYTES: Gauge "ssdwatch_disk_written_since_discard_bytes" ["device"] unit "bytes"
        "Bytes written to the device since its last discard: what the drive has had to absorb without a TRIM.";
    DISK_IDLE_SECONDS: Gauge "ssdwatch_disk_idle_seconds" ["device"] unit "seconds"
        "How long the device's busy time has not moved (idle time for garbage collection); 0 when busy in the last interval.";
    // Collector `filesystem`: statvfs and the mount table.
    FILESYSTEM_STATFS_HUNG_THREADS: Gauge "ssdwatch_filesystem_statfs_hung_threads" [] unit ""
        "Threads blocked in a statvfs call past the timeout (one per hung mount at most).";
    FILESYSTEM_FREED_UNTRIMMED_BYTES: Gauge "ssdwatch_filesystem_freed_untrimmed_bytes" ["mountpoint", "device", "fstype"] unit "bytes"
        "Estimate of bytes freed since the last discard reached the filesystem's drives (deleted, not trimmed): the fall in used bytes from their peak since then, or since the daemon started when no discard is known.";
    FILESYSTEM_ALERT_THRESHOLD_RATIO: Gauge "ssdwatch_filesystem_alert_threshold_ratio" ["mountpoint", "severity"] unit "ratio"
        "Used ratio above which the low-space alert of this severity may fire (config: collectors.filesystem.alert_thresholds).";
    FILESYSTEM_ALERT_THRESHOLD_AVAIL_BYTES: Gauge "ssdwatch_filesystem_alert_threshold_avail_bytes" ["mountpoint", "severity"] unit "bytes"
        "Bytes available under which the low-space alert of this severity may fire once above its used ratio.";
    FILESYSTEM_ALERT_THRESHOLD_FULL_SECONDS: Gauge "ssdwatch_filesystem_alert_threshold_full_seconds" ["mountpoint", "severity"] unit "seconds"
        "Seconds to full under which the low-space alert of this severity may fire once above its used ratio.";
    FILESYSTEM_INFO: Gauge "ssdwatch_filesystem_info" ["mountpoint", "device", "fstype", "mount_source"] unit ""
        "Identity of a filesystem; always 1. device is the kernel name, as on the other ssdwatch_filesystem_* series; mount_source is the source in the mount table (/dev/vda1, /dev/mapper/vg-data, server:/export), which node_exporter labels device on node_filesystem_*: join on mountpoint and mount_source to match the two on a host.";
    FILESYSTEM_STUCK: Gauge "ssdwatch_filesystem_stuck" ["mountpoint", "device", "fstype"] unit ""
        "Whether statvfs on the mount has not returned within the timeout (a hung NFS/FUSE mount).";
    FILESYSTEM_DEVICE_ERROR: Gauge "ssdwatch_filesystem_device_error" ["mountpoint", "device", "fstype"] unit ""
        "Whether the last statvfs of the mount failed, hung or could not run.";
    FILESYSTEM_DISCARD_MOUNT_OPTION: Gauge "ssdwatch_filesystem_discard_mount_option" ["mountpoint", "device", "fstype"] unit ""
        "Whether the filesystem is mounted with the discard option (online TRIM).";
    FILESYSTEM_TRIM_CAPABLE: Gauge "ssdwatch_filesystem_trim_capable" ["mountpoint", "device", "fstype"] unit ""
        "Whether every layer from the filesystem's device down to each drive passes discards.";
    FILESYSTEM_DRIVE_INFO: Gauge "ssdwatch_filesystem_drive_info" ["mountpoint", "device", "fstype", "drive"] unit ""
        "The filesystem lives (in part) on this physical drive; always 1. Join drive to device of drive metrics.";
    FILESYSTEM_SIZE_BYTES: Gauge "ssdwatch_filesystem_size_bytes" ["mountpoint", "device", "fstype"] unit "bytes"
        "Filesystem size in bytes.";
    FILESYSTEM_FREE_BYTES: Gauge "ssdwatch_filesystem_free_bytes" ["mountpoint", "device", "fstype"] unit "bytes"
        "Free bytes, including those reserved for root.";
    FILESYSTEM_AVAIL_BYTES: Gauge "ssdwatch_filesystem_avail_bytes" ["mountpoint", "device", "fstype"] unit "bytes"
        "Bytes available to unprivileged users.";
    FILESYSTEM_FILES: Gauge "ssdwatch_filesystem_files" ["mountpoint", "device", "fstype"] unit ""
        "Inodes in the filesystem.";
    FILESYSTEM_FILES_FREE: Gauge "ssdwatch_filesystem_files_free" ["mountpoint", "device", "fstype"] unit ""
        "Free inodes.";
    FILESYSTEM_READONLY: Gauge "ssdwatch_filesystem_readonly" ["mountpoint", "device", "fstype"] unit ""
        "Whether the filesystem is mounted read-only (mount or superblock option ro).";
    FILESYSTEM_STATFS_NO_THREAD_MOUNTS: Gauge "ssdwatch_filesystem_statfs_no_thread_mounts" [] unit ""
        "Mounts not sampled in the last sample because no statvfs thread was left: the filesystem collector's share of the door's threads (64, of which 8 are kept for mounts that answered before) or the daemon's task limit (the cgroup's pids.max, systemd's TasksMax), which the door shares with the rest of the daemon.";
    FILESYSTEM_EFFECTIVE_AVAIL_BYTES: Gauge "ssdwatch_filesystem_effective_avail_bytes" ["mountpoint", "device", "fstype"] unit "bytes"
        "Bytes the mount can still take: the least of its filesystem's available bytes and what every layer under it still has (a thin pool's free data space, a ZFS dataset's available bytes and its pool's free space, btrfs's allocatable space, none when btrfs metadata can't grow). ssdwatch_filesystem_limiting_layer_info names the layer.";
    FILESYSTEM_LIMITING_LAYER_INFO: Gauge "ssdwatch_filesystem_limiting_layer_info" ["mountpoint", "layer", "name"] unit ""
        "The layer that runs out first under the mount (filesystem, thin_pool, btrfs, btrfs_metadata, zfs_dataset, zfs_pool) and its name (a pool, a btrfs UUID, a dataset); always 1.";
    FILESYSTEM_LAYER_AVAIL_BYTES: Gauge "ssdwatch_filesystem_layer_avail_bytes" ["mountpoint", "layer", "name"] unit "bytes"
        "What each layer under the mount still has, the mount's stack of layers: the filesystem itself and each pool or allocator below it.";
    // Collector `layers`: capacity below statvfs and md arrays.
    THIN_POOL_DATA_SIZE_BYTES: Gauge "ssdwatch_thin_pool_data_size_bytes" ["pool"] unit "bytes"
        "Data space of a device-mapper thin pool (LVM thin), from dmsetup status; pool is its device-mapper name (LVM: vg-pool-tpool).";
    THIN_POOL_DATA_USED_BYTES: Gauge "ssdwatch_thin_pool_data_used_bytes" ["pool"] unit "bytes"
        "Data space of the thin pool in use: when it reaches the size, every write to its thin volumes fails or queues whatever their filesystems show.";
    THIN_POOL_METADATA_SIZE_BYTES: Gauge "ssdwatch_thin_pool_metadata_size_bytes" ["pool"] unit "bytes"
        "Metadata space of the thin pool.";
    THIN_POOL_METADATA_USED_BYTES: Gauge "ssdwatch_thin_pool_metadata_used_bytes" ["pool"] unit "bytes"
        "Metadata space of the thin pool in use: a full metadata device turns the pool read-only.";
    THIN_POOL_VIRTUAL_SIZE_BYTES: Gauge "ssdwatch_thin_pool_virtual_size_bytes" ["pool"] unit "bytes"
        "Sum of the sizes of the pool's thin volumes: the space promised.";
    THIN_POOL_OVERCOMMIT_RATIO: Gauge "ssdwatch_thin_pool_overcommit_ratio" ["pool"] unit "ratio"
        "Space promised over data space (virtual size / data size); above 1 the pool is overcommitted.";
    THIN_POOL_OUT_OF_DATA_SPACE: Gauge "ssdwatch_thin_pool_out_of_data_space" ["pool"] unit ""
        "Whether the pool is out of data space (its status says out_of_data_space).";
    THIN_POOL_READ_ONLY: Gauge "ssdwatch_thin_pool_read_only" ["pool"] unit ""
        "Whether the pool is read-only (metadata full or damaged, or set so).";
    THIN_POOL_FAILED: Gauge "ssdwatch_thin_pool_failed" ["pool"] unit ""
        "Whether the pool has failed: no I/O to any of its volumes.";
    THIN_POOL_NEEDS_CHECK: Gauge "ssdwatch_thin_pool_needs_check" ["pool"] unit ""
        "Whether the pool's metadata is flagged for thin_check before it can be used read-write again.";
    THIN_POOL_ERROR_IF_NO_SPACE: Gauge "ssdwatch_thin_pool_error_if_no_space" ["pool"] unit ""
        "1 when writes fail at once once the pool is out of data space, 0 when they queue (60 s by default, then fail).";
    THIN_VOLUME_SIZE_BYTES: Gauge "ssdwatch_thin_volume_size_bytes" ["volume", "pool"] unit "bytes"
        "Size of a thin volume (device-mapper name) of the pool.";
    THIN_VOLUME_MAPPED_BYTES: Gauge "ssdwatch_thin_volume_mapped_bytes" ["volume", "pool"] unit "bytes"
        "Bytes of the thin volume backed by pool space (written and not discarded).";
    BTRFS_INFO: Gauge "ssdwatch_btrfs_info" ["uuid", "label"] unit ""
        "A btrfs filesystem; always 1.";
    BTRFS_SIZE_BYTES: Gauge "ssdwatch_btrfs_size_bytes" ["uuid"] unit "bytes"
        "Raw bytes of all the filesystem's devices.";
    BTRFS_UNALLOCATED_BYTES: Gauge "ssdwatch_btrfs_unallocated_bytes" ["uuid"] unit "bytes"
        "Raw bytes not allocated to any chunk: what new data or metadata chunks come from.";
    BTRFS_GLOBAL_RESERVE_BYTES: Gauge "ssdwatch_btrfs_global_reserve_bytes" ["uuid"] unit "bytes"
        "Metadata space held back for the filesystem's own critical updates.";
    BTRFS_METADATA_CAN_GROW: Gauge "ssdwatch_btrfs_metadata_can_grow" ["uuid"] unit ""
        "Whether the unallocated space still holds one metadata chunk at its profile's copies; at 0 metadata can't grow and writes fail with ENOSPC once its chunks are full, whatever df shows.";
    BTRFS_ALLOCATED_BYTES: Gauge "ssdwatch_btrfs_allocated_bytes" ["uuid", "type"] unit "bytes"
        "Logical bytes in chunks of the type (data, metadata, system).";
    BTRFS_USED_BYTES: Gauge "ssdwatch_btrfs_used_bytes" ["uuid", "type"] unit "bytes"
        "Logical bytes used inside chunks of the type.";
    BTRFS_DISK_ALLOCATED_BYTES: Gauge "ssdwatch_btrfs_disk_allocated_bytes" ["uuid", "type"] unit "bytes"
        "Raw bytes the type's chunks take on the devices (allocated times the profile's copies).";
    BTRFS_DISK_USED_BYTES: Gauge "ssdwatch_btrfs_disk_used_bytes" ["uuid", "type"] unit "bytes"
        "Raw bytes used inside the type's chunks.";
    BTRFS_PROFILE_INFO: Gauge "ssdwatch_btrfs_profile_info" ["uuid", "type", "profile"] unit ""
        "A profile (single, dup, raid1…) the type's chunks use; two while a balance converts; always 1.";
    BTRFS_DEVICE_SIZE_BYTES: Gauge "ssdwatch_btrfs_device_size_bytes" ["uuid", "device"] unit "bytes"
        "Bytes of the device the filesystem may use.";
    BTRFS_DEVICE_UNALLOCATED_BYTES: Gauge "ssdwatch_btrfs_device_unallocated_bytes" ["uuid", "device"] unit "bytes"
        "Raw bytes of the device not allocated to chunks (from the filesystem's device query; absent where it could not be asked).";
    BTRFS_DEVICE_ERRORS_TOTAL: Counter "ssdwatch_btrfs_device_errors_total" ["uuid", "device", "type"] unit ""
        "Errors btrfs counted on the device (devinfo/<devid>/error_stats, kernel 5.14 and later; btrfs device stats): type write, read, flush (failed I/O the device returned), corruption (checksum mismatch), generation (a write the device lost). Kept on disk over the filesystem's life until btrfs device stats -z: alert on growth. device is devid<N> where the filesystem could not be asked which device that is.";
    ZFS_POOL_SIZE_BYTES: Gauge "ssdwatch_zfs_pool_size_bytes" ["pool"] unit "bytes"
        "Size of a ZFS pool (zpool list).";
    ZFS_POOL_ALLOCATED_BYTES: Gauge "ssdwatch_zfs_pool_allocated_bytes" ["pool"] unit "bytes"
        "Space allocated in the pool.";
    ZFS_POOL_FREE_BYTES: Gauge "ssdwatch_zfs_pool_free_bytes" ["pool"] unit "bytes"
        "Free space of the pool, shared by all its datasets.";
    ZFS_POOL_FRAGMENTATION_RATIO: Gauge "ssdwatch_zfs_pool_fragmentation_ratio" ["pool"] unit "ratio"
        "Fragmentation of the pool's free space, 0 to 1.";
    ZFS_POOL_CAPACITY_RATIO: Gauge "ssdwatch_zfs_pool_capacity_ratio" ["pool"] unit "ratio"
        "Allocated over size, as zpool rounds it; ZFS slows down past about 0.8.";
    ZFS_POOL_CHECKPOINT_BYTES: Gauge "ssdwatch_zfs_pool_checkpoint_bytes" ["pool"] unit "bytes"
        "Space held by the pool's checkpoint (0 without one).";
    ZFS_POOL_EXPANDABLE_BYTES: Gauge "ssdwatch_zfs_pool_expandable_bytes" ["pool"] unit "bytes"
        "Space the pool could grow into (0 when none).";
    ZFS_POOL_HEALTH: Gauge "ssdwatch_zfs_pool_health" ["pool", "state"] unit ""
        "1 for the pool's health state (ONLINE, DEGRADED, FAULTED, OFFLINE, UNAVAIL, REMOVED, SUSPENDED), 0 for the others.";
    ZFS_POOL_DATA_ERRORS: Gauge "ssdwatch_zfs_pool_data_errors" ["pool"] unit ""
        "Blocks of the pool with permanent (unrepaired) errors in its error log: zpool status's errors: line (0 for No known data errors). Files are damaged; it falls only once they are restored or removed and two scrubs have run.";
    ZFS_VDEV_ERRORS_TOTAL: Counter "ssdwatch_zfs_vdev_errors_total" ["pool", "vdev", "type"] unit ""
        "Errors ZFS counted on a vdev (the root, a mirror or raidz group, a leaf device) since the pool was imported or cleared (zpool clear): type read and write (I/O errors the device returned), checksum (data that came back wrong). Alert on growth.";
    ZFS_VDEV_STATE: Gauge "ssdwatch_zfs_vdev_state" ["pool", "vdev", "state"] unit ""
        "1 for the vdev's state (ONLINE, DEGRADED, FAULTED, OFFLINE, UNAVAIL, REMOVED), 0 for the others; no series for a state zpool names otherwise.";
    ZFS_VDEV_INFO: Gauge "ssdwatch_zfs_vdev_info" ["pool", "vdev", "leaf"] unit ""
        "A vdev of the pool as zpool status names it; leaf is true for a device (disk, partition, file), false for the root and groups (mirror, raidz); always 1.";
    ZFS_VDEV_DRIVE_INFO: Gauge "ssdwatch_zfs_vdev_drive_info" ["pool", "vdev", "device", "drive"] unit ""
        "A leaf vdev lies on this physical drive: device is the block device zpool uses (its kernel name, through the /dev link zpool names), drive a physical drive under it; always 1. Join drive to device of drive metrics (SMART). No series for a vdev the block topology can't place (a file).";
    ZFS_DATASET_USED_BYTES: Gauge "ssdwatch_zfs_dataset_used_bytes" ["dataset", "pool"] unit "bytes"
        "Space the dataset and its descendants use.";
    ZFS_DATASET_AVAILABLE_BYTES: Gauge "ssdwatch_zfs_dataset_available_bytes" ["dataset", "pool"] unit "bytes"
        "Space the dataset can still take: its quota's room or the pool's free space, which every dataset of the pool shares (never add these up).";
    ZFS_DATASET_REFERENCED_BYTES: Gauge "ssdwatch_zfs_dataset_referenced_bytes" ["dataset", "pool"] unit "bytes"
        "Data the dataset itself refers to.";
    ZFS_DATASET_QUOTA_BYTES: Gauge "ssdwatch_zfs_dataset_quota_bytes" ["dataset", "pool"] unit "bytes"
        "The dataset's quota; absent without one.";
    ZFS_DATASET_RESERVATION_BYTES: Gauge "ssdwatch_zfs_dataset_reservation_bytes" ["dataset", "pool"] unit "bytes"
        "Space reserved for the dataset (0 without a reservation).";
    MD_INFO: Gauge "ssdwatch_md_info" ["device", "level"] unit ""
        "An md array and its RAID level; always 1.";
    MD_ARRAY_STATE: Gauge "ssdwatch_md_array_state" ["device", "state"] unit ""
        "1 for the array's state (array_state: clean, active, readonly, inactive…), 0 for the others.";
    MD_DISKS_REQUIRED: Gauge "ssdwatch_md_disks_required" ["device"] unit ""
        "Members the array is made of (raid_disks).";
    MD_DISKS_MISSING: Gauge "ssdwatch_md_disks_missing" ["device"] unit ""
        "Members missing from the array (degraded); above 0 it runs without its full redundancy.";
    MD_DISKS: Gauge "ssdwatch_md_disks" ["device", "state"] unit ""
        "Member devices by state: active (in sync), failed, spare (including one being rebuilt into).";
    MD_SYNC_ACTION: Gauge "ssdwatch_md_sync_action" ["device", "action"] unit ""
        "1 for the sync action running (idle, resync, recover, check, repair, reshape, frozen), 0 for the others.";
    MD_SYNC_PROGRESS_RATIO: Gauge "ssdwatch_md_sync_progress_ratio" ["device"] unit "ratio"
        "Progress of the running sync action, 0 to 1; absent when idle.";
    MD_MISMATCH_SECTORS: Gauge "ssdwatch_md_mismatch_sectors" ["device"] unit ""
        "Sectors found inconsistent by the last check or repair (mismatch_cnt).";
    MD_MEMBER_CORRECTED_READ_ERRORS_TOTAL: Counter "ssdwatch_md_member_corrected_read_errors_total" ["device", "member"] unit ""
        "Read errors on the member (its kernel name) that md corrected from the other copies without evicting it (dev-*/errors), since the array was assembled: a drive going bad under a redundant array. Alert on growth.";
    // Collector `databases`: what fills the disk, by database component.
    DATABASE_INFO: Gauge "ssdwatch_database_info" ["database", "kind", "version", "mountpoint"] unit ""
        "A data directory watched: a PostgreSQL or MySQL/MariaDB server found from its process (database is the data directory) or a path named under collectors.databases.watch (database is its name, kind watch); mountpoint is the mount holding it, as on ssdwatch_filesystem_*; always 1.";
    DATABASE_UP: Gauge "ssdwatch_database_up" ["database"] unit ""
        "Whether the server of a data directory found from its process runs (1), or stopped while its directory is still there (0; its WAL, slots and archive backlog are still read from disk).";
    DATABASE_COMPONENT_BYTES: Gauge "ssdwatch_database_component_bytes" ["database", "component", "mountpoint"] unit "bytes"
        "Bytes allocated to a component of the database's files. PostgreSQL: wal (pg_wal), replication_slots (pg_replslot), temp (pgsql_tmp), relations (base and global), log, other (tablespaces: ssdwatch_postgres_tablespace_bytes); MySQL/MariaDB: binlog, relay_log, innodb_system, innodb_undo, innodb_redo, innodb_temp, schemas, other; a watched path: all. mountpoint is the mount holding the component (pg_wal or the binary logs may live on another). wal, temp, replication_slots, the logs and InnoDB's files are read every sample, the others by the last completed sizing (ssdwatch_database_size_completed_timestamp_seconds).";
    DATABASE_SIZE_COMPLETED_TIMESTAMP_SECONDS: Gauge "ssdwatch_database_size_completed_timestamp_seconds" ["database"] unit "seconds"
        "When the last sizing of the database's big trees completed (Unix time); a sizing runs in bounded passes, one a sample, every collectors.databases.size_interval.";
    DATABASE_SIZE_ENTRIES: Gauge "ssdwatch_database_size_entries" ["database"] unit ""
        "Files and directories the last completed sizing counted.";
    POSTGRES_WAL_SEGMENTS: Gauge "ssdwatch_postgres_wal_segments" ["database"] unit ""
        "WAL segment files in pg_wal, recycled ones included.";
    POSTGRES_ARCHIVE_READY_SEGMENTS: Gauge "ssdwatch_postgres_archive_ready_segments" ["database"] unit ""
        "WAL segments waiting for the archiver (pg_wal/archive_status/*.ready): each stays in pg_wal until archive_command succeeds for it.";
    POSTGRES_ARCHIVE_OLDEST_READY_AGE_SECONDS: Gauge "ssdwatch_postgres_archive_oldest_ready_age_seconds" ["database"] unit "seconds"
        "Age of the oldest segment waiting for the archiver (its .ready marker's modification time); 0 when none waits.";
    POSTGRES_REPLICATION_SLOT_RETAINED_BYTES: Gauge "ssdwatch_postgres_replication_slot_retained_bytes" ["database", "slot", "type"] unit "bytes"
        "WAL in pg_wal kept only for the slot: the segment files from its restart_lsn (its on-disk state, saved at each checkpoint) up to the last checkpoint's redo segment; type is physical or logical.";
    POSTGRES_TABLESPACE_BYTES: Gauge "ssdwatch_postgres_tablespace_bytes" ["database", "tablespace", "location", "mountpoint"] unit "bytes"
        "Bytes allocated under a tablespace (its oid; location is where pg_tblspc links it, mountpoint the mount holding it), by the last completed sizing.";
    MYSQL_BINLOG_FILES: Gauge "ssdwatch_mysql_binlog_files" ["database"] unit ""
        "Binary logs the MySQL/MariaDB server keeps (named in its binlog index); their bytes are ssdwatch_database_component_bytes{component=\"binlog\"}.";
    MYSQL_BINLOG_OLDEST_AGE_SECONDS: Gauge "ssdwatch_mysql_binlog_oldest_age_seconds" ["database"] unit "seconds"
        "Age of the oldest binary log kept (its last write): past the server's expiry it is not being purged (a replica or a backup holds it, or expiry is off).";
    MYSQL_BINLOG_RETENTION_SECONDS: Gauge "ssdwatch_mysql_binlog_retention_seconds" ["database"] unit "seconds"
        "How long binary logs are expected to be kept: the server's binlog_expire_logs_seconds or expire_logs_days, or collectors.databases.mysql_binlog_retention where set (30 days where neither says).";
    // Collector `smart`: each drive's SMART data, normalized.
    DEVICE_SMART_SAMPLE_OK: Gauge "ssdwatch_device_smart_sample_ok" ["device", "serial", "wwn"] unit ""
        "1 if the last smartctl run on this drive gave usable data (or found it in standby).";
    DEVICE_IN_STANDBY: Gauge "ssdwatch_device_in_standby" ["device", "serial", "wwn"] unit ""
        "1 if the drive was in standby at the last attempt; values are then from the last awake sample.";
    DEVICE_SMARTCTL_ESCAPED_PROCESSES_TOTAL: Counter "ssdwatch_device_smartctl_escaped_processes_total" ["device", "serial", "wwn"] unit ""
        "Processes a smartctl run of this drive left running after it exited (they left its process group, e.g. with setsid), found and killed.";
    DEVICE_SMARTCTL_EXIT_STATUS_BIT: Gauge "ssdwatch_device_smartctl_exit_status_bit" ["device", "serial", "wwn", "bit"] unit ""
        "smartctl exit-status bits of the last run (smartctl(8) RETURN VALUES), 1 when set.";
    DEVICE_INFO: Gauge "ssdwatch_device_info" ["device", "serial", "wwn", "model", "firmware", "model_family", "family_source", "device_type", "backend"] unit ""
        "Identity of a drive as its SMART backend (smartctl or libatasmart) reports it; always 1. Join on device.";
    DEVICE_SMART_SUPPORTED: Gauge "ssdwatch_device_smart_supported" ["device", "serial", "wwn"] unit ""
        "1 if the drive answers SMART/health commands, 0 if it has none (virtio, RAID volume).";
    DEVICE_SMART_SAMPLE_AGE_SECONDS: Gauge "ssdwatch_device_smart_sample_age_seconds" ["device", "serial", "wwn"] unit "seconds"
        "Age of the SMART values shown for this drive.";
    DEVICE_SMART_INTERVAL_SECONDS: Gauge "ssdwatch_device_smart_interval_seconds" ["device", "serial", "wwn"] unit "seconds"
        "Configured time between smartctl runs for this drive (its device class's interval).";
    DEVICE_WEAR_USED_RATIO: Gauge "ssdwatch_device_wear_used_ratio" ["device", "serial", "wwn"] unit "ratio"
        "Rated endurance used (0..1, may exceed 1): NVMe percentage used, SCSI/ATA endurance indicator or the vendor attribute.";
    DEVICE_SPARE_AVAILABLE_RATIO: Gauge "ssdwatch_device_spare_available_ratio" ["device", "serial", "wwn"] unit "ratio"
        "Spare blocks remaining (0..1).";
    DEVICE_SPARE_THRESHOLD_RATIO: Gauge "ssdwatch_device_spare_threshold_ratio" ["device", "serial", "wwn"] unit "ratio"
        "Spare level below which the drive reports a critical condition (0..1).";
    DEVICE_HOST_WRITTEN_BYTES_TOTAL: Counter "ssdwatch_device_host_written_bytes_total" ["device", "serial", "wwn"] unit "bytes"
        "Bytes written by the host over the drive's life.";
    DEVICE_HOST_READ_BYTES_TOTAL: Counter "ssdwatch_device_host_read_bytes_total" ["device", "serial", "wwn"] unit "bytes"
        "Bytes read by the host over the drive's life.";
    DEVICE_NAND_WRITTEN_BYTES_TOTAL: Counter "ssdwatch_device_nand_written_bytes_total" ["device", "serial", "wwn"] unit "bytes"
        "Bytes written to flash (host plus internal writes), where the vendor reports it.";
    DEVICE_ERASE_COUNT_AVG: Gauge "ssdwatch_device_erase_count_avg" ["device", "serial", "wwn"] unit ""
        "Average program/erase cycles per block.";
    DEVICE_ERASE_COUNT_MAX: Gauge "ssdwatch_device_erase_count_max" ["device", "serial", "wwn"] unit ""
        "Maximum program/erase cycles of any block.";
    DEVICE_MEDIA_ERRORS_TOTAL: Counter "ssdwatch_device_media_errors_total" ["device", "serial", "wwn"] unit ""
        "Unrecovered media/data-integrity errors (NVMe media errors, SCSI uncorrected, ATA reported uncorrectable).";
    DEVICE_CRITICAL_WARNING: Gauge "ssdwatch_device_critical_warning" ["device", "serial", "wwn"] unit ""
        "NVMe critical warning bit mask (0 = none).";
    DEVICE_SMART_PASSED: Gauge "ssdwatch_device_smart_passed" ["device", "serial", "wwn"] unit ""
        "1 if the drive's overall SMART self-assessment passed, 0 if it failed.";
    DEVICE_TEMPERATURE_CELSIUS: Gauge "ssdwatch_device_temperature_celsius" ["device", "serial", "wwn"] unit "celsius"
        "Current drive temperature.";
    DEVICE_POWER_ON_SECONDS_TOTAL: Counter "ssdwatch_device_power_on_seconds_total" ["device", "serial", "wwn"] unit "seconds"
        "Power-on time over the drive's life.";
    DEVICE_POWER_CYCLES_TOTAL: Counter "ssdwatch_device_power_cycles_total" ["device", "serial", "wwn"] unit ""
        "Power cycles over the drive's life.";
    DEVICE_UNSAFE_SHUTDOWNS_TOTAL: Counter "ssdwatch_device_unsafe_shutdowns_total" ["device", "serial", "wwn"] unit ""
        "Power losses without a clean shutdown over the drive's life.";
    DEVICE_REALLOCATED_SECTORS: Gauge "ssdwatch_device_reallocated_sectors" ["device", "serial", "wwn"] unit ""
        "Reallocated sectors/blocks (ATA attribute 5, SCSI grown defect list).";
    DEVICE_PENDING_SECTORS: Gauge "ssdwatch_device_pending_sectors" ["device", "serial", "wwn"] unit ""
        "Sectors waiting for reallocation (ATA attribute 197).";
    DEVICE_WRITE_AMPLIFICATION_RATIO: Gauge "ssdwatch_device_write_amplification_ratio" ["device", "serial", "wwn", "window"] unit "ratio"
        "Flash bytes written per host byte written, over the drive's life or the last day.";
    DEVICE_SMART_ATTRIBUTE_VALUE: Gauge "ssdwatch_device_smart_attribute_value" ["device", "serial", "id", "name"] unit ""
        "ATA SMART attribute normalized value (vendor scale, usually 100 or 200 = new).";
    DEVICE_SMART_ATTRIBUTE_RAW: Gauge "ssdwatch_device_smart_attribute_raw" ["device", "serial", "id", "name"] unit ""
        "ATA SMART attribute raw value (48-bit; meaning and unit depend on the drive family).";
    DEVICE_SMART_ATTRIBUTE_THRESHOLD: Gauge "ssdwatch_device_smart_attribute_threshold" ["device", "serial", "id", "name"] unit ""
        "ATA SMART attribute threshold on the normalized scale: a value at or below it is the drive's own failure verdict for the attribute (0: never fails).";
    DEVICE_SMART_ATTRIBUTE_FAILING_NOW: Gauge "ssdwatch_device_smart_attribute_failing_now" ["device", "serial", "id", "name", "type"] unit ""
        "1 when the ATA attribute's normalized value is at or below its threshold now (smartctl WHEN_FAILED FAILING_NOW). type prefail: the drive predicts its own failure; old_age: worn past its rating; empty where the backend gives no flags.";
    DEVICE_SMART_ATTRIBUTE_FAILED_IN_PAST: Gauge "ssdwatch_device_smart_attribute_failed_in_past" ["device", "serial", "id", "name", "type"] unit ""
        "1 when the ATA attribute's worst value was at or below its threshold but its value now is above it (smartctl WHEN_FAILED In_the_past).";
    DEVICE_ERROR_LOG_ENTRIES_TOTAL: Counter "ssdwatch_device_error_log_entries_total" ["device", "serial", "wwn"] unit ""
        "Errors the drive's own error log has counted over its life (NVMe error information log entries, ATA SMART error log count); alert on growth, not on the lifetime value.";
    DEVICE_NON_MEDIUM_ERRORS_TOTAL: Counter "ssdwatch_device_non_medium_errors_total" ["device", "serial", "wwn"] unit ""
        "SCSI non-medium errors over the drive's life (transport, hardware and firmware faults, not the medium).";
    DEVICE_SELF_TEST_LAST_RESULT: Gauge "ssdwatch_device_self_test_last_result" ["device", "serial", "wwn", "type", "result"] unit ""
        "The newest entry of the drive's self-test log, always 1: type (short, extended, conveyance, selective, offline, other) and result (passed, failed, aborted, in_progress, other).";
    DEVICE_SELF_TEST_LAST_AGE_SECONDS: Gauge "ssdwatch_device_self_test_last_age_seconds" ["device", "serial", "wwn"] unit "seconds"
        "Power-on time since the newest self-test ran (the drive's hour counter now minus the log entry's; not wall time).";
    DEVICE_SELF_TEST_LAST_FAILING_LBA: Gauge "ssdwatch_device_self_test_last_failing_lba" ["device", "serial", "wwn"] unit ""
        "The first failing LBA the newest self-test logged, when it logged one.";
    DEVICE_SELF_TEST_IN_PROGRESS: Gauge "ssdwatch_device_self_test_in_progress" ["device", "serial", "wwn"] unit ""
        "1 while the drive reports a self-test running (ATA self-test status, NVMe current operation).";
    DEVICE_TEMPERATURE_LIMIT_CELSIUS: Gauge "ssdwatch_device_temperature_limit_celsius" ["device", "serial", "wwn", "limit"] unit "celsius"
        "The drive's own temperature limits: warning (NVMe WCTEMP, ATA SCT operating limit) and critical (NVMe CCTEMP, SCSI drive trip).";
    DEVICE_TEMPERATURE_ABOVE_LIMIT_SECONDS_TOTAL: Counter "ssdwatch_device_temperature_above_limit_seconds_total" ["device", "serial", "wwn", "limit"] unit "seconds"
        "Time the drive spent above its warning or critical composite temperature over its life (NVMe counts minutes).";
    DEVICE_THERMAL_THROTTLE_TRANSITIONS_TOTAL: Counter "ssdwatch_device_thermal_throttle_transitions_total" ["device", "serial", "wwn", "level"] unit ""
        "Times the drive entered host-controlled thermal management: level light (TMT1) or heavy (TMT2).";
    DEVICE_THERMAL_THROTTLE_SECONDS_TOTAL: Counter "ssdwatch_device_thermal_throttle_seconds_total" ["device", "serial", "wwn", "level"] unit "seconds"
        "Time the drive spent throttled by host-controlled thermal management: level light (TMT1) or heavy (TMT2).";
    DEVICE_DURABILITY_RISK_INFO: Gauge "ssdwatch_device_durability_risk_info" ["device", "serial", "wwn", "reason"] unit ""
        "Whether an fsync on the drive may return before the data is durable, always 1: reason cache_flushes_off, sync_faster_than_medium, none or unknown.";
    // Collector `smart`: the runs of smartctl.
    DEVICE_SMARTCTL_STUCK: Gauge "ssdwatch_device_smartctl_stuck" ["device"] unit ""
        "1 while a smartctl of this drive, killed at its timeout, is still stuck in the kernel (a failing drive or controller); no new run starts meanwhile.";
    // Collector `probe`: latency probes.
    PROBE_LATENCY_SECONDS: Histogram "ssdwatch_probe_latency_seconds" ["probe", "mountpoint", "device"] unit "seconds"
        "Latency of each probe I/O (seconds), since the daemon started.";
    PROBE_LAST_LATENCY_SECONDS: Summary "ssdwatch_probe_last_latency_seconds" ["probe", "mountpoint", "device"] unit "seconds"
        "Latency quantiles of the last run of each probe (seconds); quantile 1 is the maximum.";
    PROBE_THROUGHPUT_BYTES_PER_SECOND: Gauge "ssdwatch_probe_throughput_bytes_per_second" ["probe", "mountpoint", "device"] unit "bytes_per_second"
        "Throughput of the last sequential-write probe, fdatasync included.";
    PROBE_RUNS_TOTAL: Counter "ssdwatch_probe_runs_total" ["mountpoint", "device"] unit ""
        "Probe runs completed.";
    PROBE_SKIPPED_TOTAL: Counter "ssdwatch_probe_skipped_total" ["mountpoint", "device", "reason"] unit ""
        "Probe runs skipped, by reason (budget, busy, low_space, readonly, unsafe, error, budget_unrecorded).";
    PROBE_WRITTEN_BYTES_TOTAL: Counter "ssdwatch_probe_written_bytes_total" ["mountpoint", "device"] unit "bytes"
        "Bytes written by probes, probe file creation included.";
    PROBE_LAST_RUN_TIMESTAMP_SECONDS: Gauge "ssdwatch_probe_last_run_timestamp_seconds" ["mountpoint", "device"] unit "seconds"
        "Unix time the last completed probe run started.";
    PROBE_TARGET_UNSAFE: Gauge "ssdwatch_probe_target_unsafe" ["mountpoint", "device"] unit ""
        "1 when the last attempt refused the probe directory or file (symlink, owner, links).";
    PROBE_TARGET_FAILING: Gauge "ssdwatch_probe_target_failing" ["mountpoint", "device", "reason"] unit ""
        "1 for the reason of the last attempt once a target has gone 3 attempts in a row without a completed run; 0 otherwise.";
    PROBE_CONTEXT_FILL_RATIO: Gauge "ssdwatch_probe_context_fill_ratio" ["mountpoint", "device"] unit "ratio"
        "Filesystem fill (0..1) at the last probe run, as df shows it: used / (used + avail).";
    PROBE_CONTEXT_SINCE_DISCARD_SECONDS: Gauge "ssdwatch_probe_context_since_discard_seconds" ["mountpoint", "device"] unit "seconds"
        "Seconds since the drive last received a discard, at the last probe run.";
    PROBE_CONTEXT_WRITTEN_SINCE_DISCARD_BYTES: Gauge "ssdwatch_probe_context_written_since_discard_bytes" ["mountpoint", "device"] unit "bytes"
        "Bytes written to the drive since its last discard, at the last probe run.";
    PROBE_CONTEXT_IDLE_SECONDS: Gauge "ssdwatch_probe_context_idle_seconds" ["mountpoint", "device"] unit "seconds"
        "Seconds the drive had been idle before the last probe run.";
    PROBE_CONTEXT_UTILIZATION_RATIO: Gauge "ssdwatch_probe_context_utilization_ratio" ["mountpoint", "device"] unit "ratio"
        "Drive utilization (0..1) during the last probe run, the probe's own I/O included.";
    // The history: the store's own figures and the forecasts.
    FILESYSTEM_GROWTH_BYTES_PER_DAY: Gauge "ssdwatch_filesystem_growth_bytes_per_day" ["mountpoint", "device", "window"] unit "bytes_per_day"
        "Growth of used bytes a day over the window, a robust slope (Theil-Sen) of daily low points since the last big drop; from the daemon's history.";
    FILESYSTEM_PREDICTED_FULL_TIMESTAMP_SECONDS: Gauge "ssdwatch_filesystem_predicted_full_timestamp_seconds" ["mountpoint", "device"] unit "seconds"
        "When the mount is predicted full (Unix time), from the daemon's history: the earliest of its filesystem's date and the dates of the layers below it (a thin pool, btrfs, a ZFS dataset or pool), each forecast from its own history; absent when none is growing or all are too new to tell.";
    FILESYSTEM_PREDICTED_FULL_BOUND_TIMESTAMP_SECONDS: Gauge "ssdwatch_filesystem_predicted_full_bound_timestamp_seconds" ["mountpoint", "device", "bound"] unit "seconds"
        "Earliest (bound=\"earliest\") and latest (bound=\"latest\") predicted full date (Unix time), from the 95 % confidence interval of the Theil-Sen growth slope (of the mount's filesystem and layers: the earliest of their earliest dates, the earliest of their latest); present only with ssdwatch_filesystem_predicted_full_timestamp_seconds, the latest absent when the slowest plausible growth is none or beyond 10 years.";
    DEVICE_WEAR_RATE_RATIO_PER_DAY: Gauge "ssdwatch_device_wear_rate_ratio_per_day" ["device", "serial", "wwn"] unit "ratio_per_day"
        "Rated endurance used a day (wear ratio per day) over the recent window, from the daemon's history.";
    DEVICE_PREDICTED_WEAROUT_TIMESTAMP_SECONDS: Gauge "ssdwatch_device_predicted_wearout_timestamp_seconds" ["device", "serial", "wwn"] unit "seconds"
        "When the drive is predicted to reach 100 % of its rated wear (Unix time), from the daemon's history.";
    DEVICE_PREDICTED_WEAROUT_BOUND_TIMESTAMP_SECONDS: Gauge "ssdwatch_device_predicted_wearout_bound_timestamp_seconds" ["device", "serial", "wwn", "bound"] unit "seconds"
        "Earliest (bound=\"earliest\") and latest (bound=\"latest\") predicted wear-out date (Unix time), from the 95 % confidence interval of the wear rate (Theil-Sen pairwise slopes over the fitted window); present only with ssdwatch_device_predicted_wearout_timestamp_seconds, the latest absent when the slowest plausible rate is none or beyond 10 years.";
    DEVICE_HOST_WRITTEN_BYTES_PER_DAY: Gauge "ssdwatch_device_host_written_bytes_per_day" ["device", "serial", "wwn", "window"] unit "bytes_per_day"
        "Bytes the host wrote to the drive a day over the window, from the daemon's history.";
    DEVICE_RECENT_WRITE_AMPLIFICATION_RATIO: Gauge "ssdwatch_device_recent_write_amplification_ratio" ["device", "serial", "wwn", "window"] unit "ratio"
        "NAND bytes / host bytes written over the window, from the daemon's history (drives that report NAND writes).";
    DEVICE_ENDURANCE_USED_RATIO: Gauge "ssdwatch_device_endurance_used_ratio" ["device", "serial", "wwn"] unit "ratio"
        "Share of the rated endurance (history.endurance in the config: TBW, or DWPD over the warranty) the host has written.";
    DEVICE_PREDICTED_ENDURANCE_TIMESTAMP_SECONDS: Gauge "ssdwatch_device_predicted_endurance_timestamp_seconds" ["device", "serial", "wwn"] unit "seconds"
        "When the host's writes are predicted to reach the rated endurance (Unix time).";
    HISTORY_STORE_BYTES: Gauge "ssdwatch_history_store_bytes" [] unit "bytes"
        "Size of the history store (state_dir/history.db and its WAL).";
    HISTORY_RECORDS_WRITTEN_TOTAL: Counter "ssdwatch_history_records_written_total" [] unit ""
        "Records the history store has written since the daemon started.";
    HISTORY_RECORDS_DROPPED_TOTAL: Counter "ssdwatch_history_records_dropped_total" [] unit ""
        "Records not kept: the queue was full, or the store could not be opened or written.";
    HISTORY_LAST_WRITE_TIMESTAMP_SECONDS: Gauge "ssdwatch_history_last_write_timestamp_seconds" [] unit "seconds"
        "When the history store last committed records (Unix time).";
    // The history: latency by fill.
    DEGRADATION_LATENCY_SECONDS: Summary "ssdwatch_degradation_latency_seconds" ["device", "mountpoint", "probe", "fill_bin"] unit "seconds"
        "Probe latency by the filesystem's fill ratio when the probe ran, over the whole history, of runs on a trimmed filesystem (not more than 1 % of it deleted and not trimmed): the median of the runs' p50 (quantile 0.5) or of the p99 of runs of 100 I/Os or more (quantile 0.99; none when no run in the bin had one), within 1 %.";
    // The history: the latest TRIM and idle recovery of each probe target and kind.
    TRIM_RECOVERY_RATIO: Gauge "ssdwatch_trim_recovery_ratio" ["device", "mountpoint", "probe"] unit "ratio"
        "Probe p50 latency in the hour after the drive's last discard burst ÷ in the hour before it, each hour cut at the neighbouring discard bursts and idle periods (below 1: the TRIM made it faster), from the daemon's history.";
    TRIM_RECOVERY_EVENT_TIMESTAMP_SECONDS: Gauge "ssdwatch_trim_recovery_event_timestamp_seconds" ["device", "mountpoint", "probe"] unit "seconds"
        "When the discard burst behind ssdwatch_trim_recovery_ratio began (Unix time).";
    TRIM_RECOVERY_BEFORE_SECONDS: Gauge "ssdwatch_trim_recovery_before_seconds" ["device", "mountpoint", "probe"] unit "seconds"
        "Median probe p50 latency in the hour before the drive's last discard burst.";
    TRIM_RECOVERY_AFTER_SECONDS: Gauge "ssdwatch_trim_recovery_after_seconds" ["device", "mountpoint", "probe"] unit "seconds"
        "Median probe p50 latency in the hour after the drive's last discard burst.";
    IDLE_RECOVERY_RATIO: Gauge "ssdwatch_idle_recovery_ratio" ["device", "mountpoint", "probe"] unit "ratio"
        "Probe p50 latency in the hour after the drive's last idle period of at least 10 minutes ÷ in the hour before it, each hour cut at the neighbouring discard bursts and idle periods (below 1: the rest made it faster), from the daemon's history.";
    IDLE_RECOVERY_EVENT_TIMESTAMP_SECONDS: Gauge "ssdwatch_idle_recovery_event_timestamp_seconds" ["device", "mountpoint", "probe"] unit "seconds"
        "When the idle period behind ssdwatch_idle_recovery_ratio began (Unix time).";
    IDLE_RECOVERY_BEFORE_SECONDS: Gauge "ssdwatch_idle_recovery_before_seconds" ["device", "mountpoint", "probe"] unit "seconds"
        "Median probe p50 latency in the hour before the drive's last idle period of at least 10 minutes.";
    IDLE_RECOVERY_AFTER_SECONDS: Gauge "ssdwatch_idle_recovery_after_seconds" ["device", "mountpoint", "probe"] unit "seconds"
        "Median probe p50 latency in the hour after the drive's last idle period of at least 10 minutes.";
    // The history: performance-full, from the trimmed sync_write_4k curve of each probe target.
    PROBE_SLOW_FILL_RATIO: Gauge "ssdwatch_probe_slow_fill_ratio" ["device", "mountpoint"] unit "ratio"
        "Fill ratio (0..1, the lower bound of its fill bin) from which the commit probe's median latency (sync_write_4k p50, runs on a trimmed filesystem) exceeded the target's slow level; absent while the curve has not crossed it.";
    PROBE_SLOW_BASELINE_SECONDS: Gauge "ssdwatch_probe_slow_baseline_seconds" ["device", "mountpoint"] unit "seconds"
        "The commit probe's median latency in the lowest fill bin with 10 runs: the baseline the slow level is a multiple of.";
    PROBE_SLOW_LEVEL_SECONDS: Gauge "ssdwatch_probe_slow_level_seconds" ["device", "mountpoint"] unit "seconds"
        "The commit probe's slow level: slow_latency when the target sets it, else slow_latency_factor (3) x the baseline.";
    PROBE_CURVE_MAX_FILL_RATIO: Gauge "ssdwatch_probe_curve_max_fill_ratio" ["device", "mountpoint"] unit "ratio"
        "The highest fill ratio a commit probe run on a trimmed filesystem was made at: how far the latency-by-fill curve has seen (\"not reached at N % fill\").";
    PROBE_PREDICTED_SLOW_TIMESTAMP_SECONDS: Gauge "ssdwatch_probe_predicted_slow_timestamp_seconds" ["device", "mountpoint"] unit "seconds"
        "When the filesystem's fill forecast reaches ssdwatch_probe_slow_fill_ratio (Unix time; the forecast pass's time when it is there already); absent when the curve has not crossed, the filesystem is not growing or it is beyond 10 years.";
    // Only in `ssdwatch history export`, beside the live families.
    PROBE_RUN_FILL_RATIO: Gauge "ssdwatch_probe_run_fill_ratio" ["mountpoint", "device", "probe"] unit "ratio"
        "Fill ratio of the probed filesystem when a probe run ran, at the run's time.";
    PROBE_RUN_UNTRIMMED_RATIO: Gauge "ssdwatch_probe_run_untrimmed_ratio" ["mountpoint", "device", "probe"] unit "ratio"
        "Share of the probed filesystem's size deleted but not trimmed when a probe run ran, at the run's time.";
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{BTreeMap, BTreeSet};
    use std::path::{Path, PathBuf};

    fn repo() -> &'static Path {
        Path::new(env!("CARGO_MANIFEST_DIR"))
    }

    #[test]
    fn each_family_is_declared_once_and_named_by_the_conventions() {
        let mut seen = BTreeSet::new();
        for f in ALL {
            assert!(seen.insert(f.name), "{} is declared twice", f.name);
            let base = match f.kind {
                MetricKind::Counter => f
                    .name
                    .strip_suffix("_total")
                    .unwrap_or_else(|| panic!("counter {} does not end in _total", f.name)),
                _ => {
                    assert!(!f.name.ends_with("_total"), "{} is not a counter", f.name);
                    f.name
                }
            };
            if !f.unit.is_empty() {
                assert!(
                    base.ends_with(&format!("_{}", f.unit)),
                    "{} does not end in its unit {}",
                    f.name,
                    f.unit
                );
            }
            assert!(
                f.name.starts_with("ssdwatch_") || f.name.starts_with("process_"),
                "{}",
                f.name
            );
            assert!(!f.help.is_empty(), "{} has no help", f.name);
        }
    }

    /// Every `.rs` file under `dir`, with its `#[cfg(test)] mod tests` cut off.
    fn sources(dir: &Path, out: &mut Vec<(PathBuf, String)>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                sources(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let s = std::fs::read_to_string(&p).unwrap();
                let body = match s.find("#[cfg(test)]\nmod tests") {
                    Some(i) => s[..i].to_string(),
                    None => s,
                };
                out.push((p, body));
            }
        }
    }

    /// `ssdwatch_…` and `process_…` words in `line` (whole words: a prefix such as
    /// `ssdwatch_disk_` in prose is one too).
    fn metric_words(line: &str) -> Vec<&str> {
        let mut v = Vec::new();
        let b = line.as_bytes();
        let mut i = 0;
        while i < b.len() {
            let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
            if word(b[i]) && (i == 0 || !word(b[i - 1])) {
                let mut j = i;
                while j < b.len() && word(b[j]) {
                    j += 1;
                }
                let w = &line[i..j];
                if w.starts_with("ssdwatch_") || w.starts_with("process_") {
                    v.push(w);
                }
                i = j;
            } else {
                i += 1;
            }
        }
        v
    }

    #[test]
    fn no_code_outside_the_catalogue_names_a_family() {
        let names: BTreeSet<&str> = ALL.iter().map(|f| f.name).collect();
        let mut files = Vec::new();
        sources(&repo().join("src"), &mut files);
        let mut found = Vec::new();
        for (path, body) in &files {
            if path.ends_with("catalogue.rs") {
                continue;
            }
            for (n, line) in body.lines().enumerate() {
                let code = line.trim_start();
                if code.starts_with("//") {
                    continue;
                }
                for w in metric_words(line) {
                    if names.contains(w) {
                        found.push(format!("{}:{}: {w}", path.display(), n + 1));
                    }
                }
            }
        }
        assert!(
            found.is_empty(),
            "families named outside src/catalogue.rs (refer to the catalogue entry instead):\n{}",
            found.join("\n")
        );
    }

    /// The families docs/metrics.md documents in its tables (first column; several names may
    /// share a row), with the type of the row where the table has a type column.
    fn documented() -> BTreeMap<String, Option<String>> {
        let text = std::fs::read_to_string(repo().join("docs/metrics.md")).unwrap();
        let mut out = BTreeMap::new();
        for line in text.lines().filter(|l| l.starts_with("| `")) {
            let cols: Vec<&str> = line.split(" | ").collect();
            let kind = cols
                .get(1)
                .map(|c| c.trim())
                .filter(|c| ["gauge", "counter", "histogram", "summary"].contains(c))
                .map(str::to_string);
            for w in metric_words(cols[0]) {
                out.insert(w.to_string(), kind.clone());
            }
        }
        out
    }

    #[test]
    fn docs_metrics_md_documents_every_family_and_no_other() {
        let docs = documented();
        let mut missing = Vec::new();
        for f in ALL {
            match docs.get(f.name) {
                None => missing.push(f.name.to_string()),
                Some(Some(k)) => assert_eq!(
                    k,
                    f.kind.as_str(),
                    "docs/metrics.md gives {} the wrong type",
                    f.name
                ),
                Some(None) => {}
            }
        }
        assert!(
            missing.is_empty(),
            "not in docs/metrics.md: {}",
            missing.join(", ")
        );
        let names: BTreeSet<&str> = ALL.iter().map(|f| f.name).collect();
        let prefixes = [
            "ssdwatch_disk_",
            "ssdwatch_device_",
            "ssdwatch_filesystem_",
            "ssdwatch_probe_",
            "ssdwatch_collector_",
            "ssdwatch_config_",
        ];
        let unknown: Vec<&String> = docs
            .keys()
            .filter(|d| !names.contains(d.as_str()) && !prefixes.contains(&d.as_str()))
            .collect();
        assert!(
            unknown.is_empty(),
            "docs/metrics.md lists families that do not exist: {unknown:?}"
        );
    }

    #[test]
    fn every_family_in_the_golden_scrapes_is_in_the_catalogue() {
        let names: BTreeSet<&str> = ALL.iter().map(|f| f.name).collect();
        for e in std::fs::read_dir(repo().join("tests/golden")).unwrap() {
            let p = e.unwrap().path();
            let text = std::fs::read_to_string(&p).unwrap();
            for l in text.lines().filter(|l| l.starts_with("# TYPE ")) {
                let name = l.split(' ').nth(2).unwrap();
                assert!(
                    names.contains(name),
                    "{}: {name} is not in the catalogue",
                    p.display()
                );
            }
        }
    }

    /// Families no golden scrape can show, each with why. The golden scrapes are `ssdwatch
    /// sample` on fixture host trees: one pass of every collector, no HTTP server, no history
    /// thread, no reload. Everything else belongs in a golden.
    const NOT_IN_A_GOLDEN: &[(&str, &str)] = &[
        (
            "ssdwatch_scrapes_total",
            "counted by the HTTP server per scrape; `sample` serves none",
        ),
        (
            "ssdwatch_config_last_reload_successful",
            "set by the daemon's config loader and reloads, which `sample` does not run",
        ),
        (
            "ssdwatch_config_last_reload_success_timestamp_seconds",
            "set by the daemon's config loader and reloads, which `sample` does not run",
        ),
        (
            "ssdwatch_disk_idle_seconds",
            "idle time is the gap between two samples of a device's stat; `sample` takes one",
        ),
        (
            "ssdwatch_device_non_medium_errors_total",
            "SCSI/SAS only, from the non-medium error page (`scsi_nonmedium_error`); no capture of tests/fixtures/smart carries that page (smart::normalize's unit test reads the field)",
        ),
        (
            "ssdwatch_btrfs_device_unallocated_bytes",
            "from the device-info ioctl on the mounted btrfs; a fixture tree has no filesystem to ask (tests/it/layers asks a real one)",
        ),
        (
            "ssdwatch_probe_run_fill_ratio",
            "only in `ssdwatch history export`, from stored probe runs",
        ),
        (
            "ssdwatch_probe_run_untrimmed_ratio",
            "only in `ssdwatch history export`, from stored probe runs",
        ),
        // No capture of tests/fixtures/smart shows these (smart::normalize's unit tests read
        // the fields): a golden drive answers with a real capture only.
        (
            "ssdwatch_device_self_test_last_failing_lba",
            "no capture of tests/fixtures/smart has a failed self-test with a failing LBA (every self-test log there shows completed tests)",
        ),
        (
            "ssdwatch_device_thermal_throttle_transitions_total",
            "no capture of tests/fixtures/smart has NVMe thermal management counters (thermal_temp1/2_transition_count)",
        ),
        (
            "ssdwatch_device_thermal_throttle_seconds_total",
            "no capture of tests/fixtures/smart has NVMe thermal management counters (thermal_temp1/2_total_time)",
        ),
        // Published by the history thread from stored records and forecasts; `sample` runs no
        // history (tests/it/history covers them on recorded histories).
        ("ssdwatch_filesystem_growth_bytes_per_day", "history thread"),
        (
            "ssdwatch_filesystem_predicted_full_timestamp_seconds",
            "history thread",
        ),
        (
            "ssdwatch_filesystem_predicted_full_bound_timestamp_seconds",
            "history thread",
        ),
        ("ssdwatch_device_wear_rate_ratio_per_day", "history thread"),
        (
            "ssdwatch_device_predicted_wearout_timestamp_seconds",
            "history thread",
        ),
        (
            "ssdwatch_device_predicted_wearout_bound_timestamp_seconds",
            "history thread",
        ),
        (
            "ssdwatch_device_host_written_bytes_per_day",
            "history thread",
        ),
        (
            "ssdwatch_device_recent_write_amplification_ratio",
            "history thread",
        ),
        ("ssdwatch_device_endurance_used_ratio", "history thread"),
        (
            "ssdwatch_device_predicted_endurance_timestamp_seconds",
            "history thread",
        ),
        ("ssdwatch_history_store_bytes", "history thread"),
        ("ssdwatch_history_records_written_total", "history thread"),
        ("ssdwatch_history_records_dropped_total", "history thread"),
        (
            "ssdwatch_history_last_write_timestamp_seconds",
            "history thread",
        ),
        ("ssdwatch_degradation_latency_seconds", "history thread"),
        ("ssdwatch_trim_recovery_ratio", "history thread"),
        (
            "ssdwatch_trim_recovery_event_timestamp_seconds",
            "history thread",
        ),
        ("ssdwatch_trim_recovery_before_seconds", "history thread"),
        ("ssdwatch_trim_recovery_after_seconds", "history thread"),
        ("ssdwatch_idle_recovery_ratio", "history thread"),
        (
            "ssdwatch_idle_recovery_event_timestamp_seconds",
            "history thread",
        ),
        ("ssdwatch_idle_recovery_before_seconds", "history thread"),
        ("ssdwatch_idle_recovery_after_seconds", "history thread"),
        ("ssdwatch_probe_slow_fill_ratio", "history thread"),
        ("ssdwatch_probe_slow_baseline_seconds", "history thread"),
        ("ssdwatch_probe_slow_level_seconds", "history thread"),
        ("ssdwatch_probe_curve_max_fill_ratio", "history thread"),
        (
            "ssdwatch_probe_predicted_slow_timestamp_seconds",
            "history thread",
        ),
    ];

    /// Families of the golden scrapes (their `# TYPE` lines; volatile families keep theirs).
    fn in_goldens() -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        for e in std::fs::read_dir(repo().join("tests/golden")).unwrap() {
            let text = std::fs::read_to_string(e.unwrap().path()).unwrap();
            for l in text.lines().filter(|l| l.starts_with("# TYPE ")) {
                out.insert(l.split(' ').nth(2).unwrap().to_string());
            }
        }
        out
    }

    #[test]
    fn every_family_is_in_a_golden_scrape_or_exempt_with_a_reason() {
        let goldens = in_goldens();
        let exempt: BTreeMap<&str, &str> = NOT_IN_A_GOLDEN.iter().copied().collect();
        assert_eq!(
            exempt.len(),
            NOT_IN_A_GOLDEN.len(),
            "an exemption is listed twice"
        );
        let missing: Vec<&str> = ALL
            .iter()
            .map(|f| f.name)
            .filter(|n| !goldens.contains(*n) && !exempt.contains_key(n))
            .collect();
        assert!(
            missing.is_empty(),
            "in no golden scrape (tests/golden/*.prom) and not in NOT_IN_A_GOLDEN: {}",
            missing.join(", ")
        );
        let names: BTreeSet<&str> = ALL.iter().map(|f| f.name).collect();
        for (name, why) in NOT_IN_A_GOLDEN {
            assert!(
                names.contains(name),
                "exempt {name} is not in the catalogue"
            );
            assert!(!why.is_empty(), "exempt {name} gives no reason");
            assert!(
                !goldens.contains(*name),
                "{name} is in a golden scrape now: take it off NOT_IN_A_GOLDEN"
            );
        }
    }

    #[test]
    fn every_family_the_rules_and_dashboards_use_exists() {
        let names: BTreeSet<&str> = ALL.iter().map(|f| f.name).collect();
        let mut files = vec![
            repo().join("packaging/prometheus/ssdwatch.rules.yml"),
            repo().join("packaging/prometheus/ssdwatch.alerts.yml"),
            repo().join("packaging/prometheus/ssdwatch.optional.alerts.yml"),
        ];
        for e in std::fs::read_dir(repo().join("dashboards")).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "json") {
                files.push(p);
            }
        }
        for p in files {
            let text = std::fs::read_to_string(&p).unwrap();
            for (n, line) in text.lines().enumerate() {
                for w in metric_words(line) {
                    let base = ["_bucket", "_sum", "_count"]
                        .iter()
                        .find_map(|s| w.strip_suffix(s).filter(|b| names.contains(b)))
                        .unwrap_or(w);
                    assert!(
                        names.contains(base) || w.ends_with('_'),
                        "{}:{}: {w} is not a family of the catalogue",
                        p.display(),
                        n + 1
                    );
                }
            }
        }
    }
}
