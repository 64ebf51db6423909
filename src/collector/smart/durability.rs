//! Whether an fsync on a drive may return before its data is durable: a pure judgement of what
//! the kernel, the drive and the sync-write probe showed. No I/O here; the caller gathers them.

/// The evidence about one drive. Unknown is `None`.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(super) struct Evidence {
    /// The kernel's `queue/write_cache`: true "write back" (it sends flushes and FUA writes),
    /// false "write through" (it sends neither: it takes every write for durable on completion).
    pub kernel_write_back: Option<bool>,
    /// The drive's own volatile write cache is on (smartctl: ATA `--get=wcache`, SCSI WCE).
    /// NVMe's VWC is not in smartctl's JSON: the kernel's setting stands for it.
    pub drive_cache_enabled: Option<bool>,
    /// A spinning disk (SMART rotation rate, else the kernel's flag).
    pub rotational: Option<bool>,
    /// The median latency of the last `sync_write_4k` probe run (O_DIRECT|O_DSYNC 4 KiB
    /// writes: each one a FUA write or a write plus a flush while the kernel says write back).
    pub sync_write_p50_seconds: Option<f64>,
}

/// Why a drive's fsync may not be durable; a bounded set (it is a label value).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Reason {
    /// The kernel sends no flushes ("write through") while the drive says its volatile write
    /// cache is on: an fsync returns with the data possibly only in that cache.
    CacheFlushesOff,
    /// Durable 4 KiB writes complete faster than the medium can program them while the kernel
    /// sends flushes: the drive either has power-loss protection or ignores flushes. To verify.
    SyncFasterThanMedium,
    /// Nothing says fsync is not durable.
    None,
    /// The kernel's setting could not be read.
    Unknown,
}

impl Reason {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Reason::CacheFlushesOff => "cache_flushes_off",
            Reason::SyncFasterThanMedium => "sync_faster_than_medium",
            Reason::None => "none",
            Reason::Unknown => "unknown",
        }
    }
}

/// A durable 4 KiB write on a spinning disk waits for the platter: at 15,000 rpm half a
/// revolution is 2 ms, so a median under 1 ms means no write reached it.
const DISK_FLOOR_SECONDS: f64 = 0.001;
/// A flushed write to flash without power-loss protection waits for a NAND program: SLC
/// pages take about 100-200 µs, TLC 500 µs and more. Drives with power-loss protection
/// acknowledge a flush from their protected buffer in 10-50 µs, as do drives that ignore it.
const FLASH_FLOOR_SECONDS: f64 = 0.00006;

/// What the evidence says, worst first.
pub(super) fn assess(e: &Evidence) -> Reason {
    let Some(write_back) = e.kernel_write_back else {
        return Reason::Unknown;
    };
    if !write_back && e.drive_cache_enabled == Some(true) {
        return Reason::CacheFlushesOff;
    }
    if write_back
        && let Some(p50) = e
            .sync_write_p50_seconds
            .filter(|p| p.is_finite() && *p > 0.0)
    {
        let floor = match e.rotational {
            Some(true) => DISK_FLOOR_SECONDS,
            Some(false) => FLASH_FLOOR_SECONDS,
            // Without knowing the medium, only the flash floor is safe to apply.
            None => FLASH_FLOOR_SECONDS,
        };
        if p50 < floor {
            return Reason::SyncFasterThanMedium;
        }
    }
    Reason::None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(wb: Option<bool>, cache: Option<bool>, rot: Option<bool>, p50: Option<f64>) -> Evidence {
        Evidence {
            kernel_write_back: wb,
            drive_cache_enabled: cache,
            rotational: rot,
            sync_write_p50_seconds: p50,
        }
    }

    #[test]
    fn each_story_gets_its_reason() {
        let cases = [
            // `echo "write through" > queue/write_cache` on a SATA SSD whose cache is on
            // (a tuning guide's advice): no flush ever reaches it.
            (
                ev(Some(false), Some(true), Some(false), Some(0.00002)),
                Reason::CacheFlushesOff,
            ),
            // An NVMe drive without a volatile write cache (VWC 0, typical with power-loss
            // protection): the kernel says write through by itself; fast sync writes are fine.
            (
                ev(Some(false), None, Some(false), Some(0.00002)),
                Reason::None,
            ),
            // A SATA SSD with its cache off: write through is right.
            (
                ev(Some(false), Some(false), Some(false), None),
                Reason::None,
            ),
            // A consumer NVMe drive: write back, flushes sent, 900 µs per durable write.
            (
                ev(Some(true), None, Some(false), Some(0.0009)),
                Reason::None,
            ),
            // Write back and 20 µs per durable write: protected buffer or ignored flushes.
            (
                ev(Some(true), Some(true), Some(false), Some(0.00002)),
                Reason::SyncFasterThanMedium,
            ),
            // A spinning disk acknowledging durable writes in 300 µs (a controller cache, or a
            // disk ignoring flushes).
            (
                ev(Some(true), Some(true), Some(true), Some(0.0003)),
                Reason::SyncFasterThanMedium,
            ),
            // The same on flash is ordinary.
            (
                ev(Some(true), Some(true), Some(false), Some(0.0003)),
                Reason::None,
            ),
            // No probe ran: nothing to say beyond the settings.
            (ev(Some(true), Some(true), Some(true), None), Reason::None),
            (
                ev(None, Some(true), Some(false), Some(0.00001)),
                Reason::Unknown,
            ),
            // A nonsense latency is no evidence.
            (
                ev(Some(true), None, Some(false), Some(f64::NAN)),
                Reason::None,
            ),
            (ev(Some(true), None, None, Some(-1.0)), Reason::None),
        ];
        for (e, want) in cases {
            assert_eq!(assess(&e), want, "{e:?}");
        }
    }
}
