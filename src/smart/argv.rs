//! smartctl's argument lists: the fixed sets a read or a RAID scan runs with. Pure: the
//! collector and the privileged helper both build them here, so neither takes an argument list
//! from the other.

/// The smartctl argv for one drive. Cheap options only: identity, overall health and the
/// attribute table / NVMe health log. No `-x`. Once the drive's protocol is known (from its
/// first run) the small logs of that protocol are added to the same run, never a second run:
/// ATA the device-statistics log (the standard endurance indicator), the SMART error log's
/// count, the self-test log, the SMART capabilities (self-test status) and the write-cache
/// setting; NVMe the identify data's temperature limits (`--capabilities`) and the self-test
/// log; SCSI the error counter pages and the self-test log. Never NVMe's `--log=error`: reading
/// the NVMe error log makes some drives count more entries (its count is in the health log
/// anyway). A sub-log a drive rejects only sets an exit bit: the rest of the output is still
/// used, and the drive is not asked that log again (`Asks`). The OCP SMART log (NVMe C0h),
/// when asked (hourly, where configured), is one more log of the same run: smartctl only
/// dumps it as text, so the run then asks for its text output inside the JSON (`--json=co`).
pub fn smartctl_args(
    path: &str,
    dev_type: Option<&str>,
    protocol: Option<&str>,
    asks: Asks,
    nocheck_standby: bool,
) -> Vec<String> {
    let ocp = asks.ocp && protocol == Some("NVMe");
    let json = if ocp { "--json=co" } else { "--json=c" };
    let mut a: Vec<String> = [json, "--info", "--health", "--attributes"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    if nocheck_standby {
        a.push("--nocheck=standby".into());
    }
    let logs: &[&str] = match protocol {
        Some("ATA") => &[
            "--capabilities",
            "--log=error",
            "--log=selftest",
            "--get=wcache",
        ],
        Some("NVMe") => &["--capabilities", "--log=selftest"],
        Some("SCSI") => &["--log=error", "--log=selftest"],
        _ => &[],
    };
    if asks.logs {
        a.extend(logs.iter().map(|s| s.to_string()));
    }
    if asks.devstat && protocol == Some("ATA") {
        a.push("--log=devstat".into());
    }
    if ocp {
        // smartctl 7.3 reads both numbers of `nvmelog,N,SIZE` as hex: 0x200 is 512 bytes.
        a.push("--log=nvmelog,0xc0,0x200".into());
    }
    if let Some(t) = dev_type {
        a.push("-d".into());
        a.push(t.into());
    }
    a.push(path.into());
    a
}

/// smartctl's argv for RAID port discovery: every device it can find, each opened to tell its
/// type (`smart::scan` keeps the RAID ports).
pub fn scan_args() -> Vec<String> {
    vec!["--scan-open".into(), "--json=c".into()]
}

/// Which of its protocol's extra logs a drive is asked for: each is dropped once the drive
/// refused it (a bridge that rejects the self-test log still gives the device statistics).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Asks {
    /// ATA's device statistics log (the standard endurance indicator).
    pub devstat: bool,
    /// The error log's count, the self-test log, `--capabilities` and the write cache.
    pub logs: bool,
    /// NVMe's OCP SMART log (C0h): only on its slower schedule, where configured.
    #[serde(default)]
    pub ocp: bool,
}

impl Asks {
    pub const ALL: Asks = Asks {
        devstat: true,
        logs: true,
        ocp: false,
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argv_is_cheap_and_never_reads_the_nvme_error_log() {
        let base = [
            "--json=c",
            "--info",
            "--health",
            "--attributes",
            "--nocheck=standby",
        ];
        let a = smartctl_args("/dev/nvme0n1", None, None, Asks::ALL, true);
        assert_eq!(a[..5], base);
        assert_eq!(a.len(), 6, "an unknown protocol gets the base set: {a:?}");
        let a = smartctl_args("/dev/nvme0n1", None, Some("NVMe"), Asks::ALL, true);
        assert_eq!(a[..5], base);
        assert_eq!(
            a[5..],
            ["--capabilities", "--log=selftest", "/dev/nvme0n1"],
            "no NVMe error log"
        );
        let a = smartctl_args(
            "/dev/bus/0",
            Some("megaraid,3"),
            Some("ATA"),
            Asks::ALL,
            true,
        );
        for x in [
            "--log=devstat",
            "--log=error",
            "--log=selftest",
            "--get=wcache",
        ] {
            assert!(a.contains(&x.to_string()), "{x}: {a:?}");
        }
        assert!(a.windows(2).any(|w| w == ["-d", "megaraid,3"]));
        // A drive that refused the logs keeps the device statistics, and the reverse.
        let only = |asks| smartctl_args("/dev/sda", None, Some("ATA"), asks, true);
        let a = only(Asks {
            devstat: true,
            logs: false,
            ocp: false,
        });
        assert!(a.contains(&"--log=devstat".to_string()), "{a:?}");
        assert!(
            !a.iter()
                .any(|x| x.contains("selftest") || x == "--log=error"),
            "{a:?}"
        );
        let a = only(Asks {
            devstat: false,
            logs: true,
            ocp: false,
        });
        assert!(!a.contains(&"--log=devstat".to_string()), "{a:?}");
        assert!(a.contains(&"--log=selftest".to_string()), "{a:?}");
        let a = smartctl_args("/dev/sdb", None, Some("SCSI"), Asks::ALL, false);
        assert!(a.contains(&"--log=error".to_string()), "{a:?}");
        for p in [None, Some("ATA"), Some("NVMe"), Some("SCSI")] {
            let a = smartctl_args("/dev/sda", None, p, Asks::ALL, true);
            assert!(
                !a.iter()
                    .any(|x| x == "-x" || x == "-a" || x.starts_with("--xall")),
                "{a:?}"
            );
            assert!(
                !a.iter()
                    .any(|x| x.contains("xerror") || x.contains("test=")),
                "reads, never starts a test: {a:?}"
            );
        }
    }

    #[test]
    fn the_ocp_log_is_asked_of_nvme_drives_only_and_in_the_same_run() {
        let ocp = Asks {
            ocp: true,
            ..Asks::ALL
        };
        let a = smartctl_args("/dev/nvme0n1", None, Some("NVMe"), ocp, true);
        assert_eq!(
            a[0], "--json=co",
            "the dump is text: the run carries its text output"
        );
        assert_eq!(
            a[a.len() - 2..],
            ["--log=nvmelog,0xc0,0x200", "/dev/nvme0n1"]
        );
        assert!(a.contains(&"--log=selftest".to_string()), "{a:?}");
        // Not an NVMe drive, or one whose protocol is not known yet: never asked.
        for p in [None, Some("ATA"), Some("SCSI")] {
            let a = smartctl_args("/dev/sda", None, p, ocp, true);
            assert_eq!(a[0], "--json=c", "{a:?}");
            assert!(!a.iter().any(|x| x.contains("nvmelog")), "{a:?}");
        }
        let a = smartctl_args("/dev/nvme0n1", None, Some("NVMe"), Asks::ALL, true);
        assert!(!a.iter().any(|x| x.contains("nvmelog") || x == "--json=co"));
    }

    /// The argument as built is one this machine's smartctl takes (7.3 refuses `nvmelog,0xc0,512`:
    /// it reads the size as hex, past its limit).
    #[test]
    fn smartctl_accepts_the_ocp_log_argument() {
        let Ok(out) = std::process::Command::new("smartctl")
            .args(["-d", "nvme", "--log=nvmelog,0xc0,0x200", "/dev/null"])
            .output()
        else {
            eprintln!("smartctl not installed: skipped");
            return;
        };
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("smartctl"), "{text}");
        assert!(!text.contains("INVALID ARGUMENT"), "{text}");
    }
}
