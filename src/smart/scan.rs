//! `smartctl --scan-open --json` into the RAID ports it found: drives behind MegaRAID, Adaptec
//! (aacraid), HP Smart Array (cciss) and 3ware controllers, which /sys does not show as drives.
//! Pure: the scan itself is run by the collector (through the privileged helper).

use super::json::kind_of;
use serde_json::Value;

/// One drive behind a RAID controller: its node and smartctl's `-d` type for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RaidPort {
    pub path: String,
    pub dev_type: String,
}

/// What a scan found: the RAID ports, and the entries left out with why (a port smartctl
/// could not open, a node or type of a shape not accepted).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scan {
    pub ports: Vec<RaidPort>,
    pub skipped: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScanError {
    #[error("smartctl --scan-open: not valid JSON (line {line}, column {column}): {message}")]
    Json {
        line: usize,
        column: usize,
        message: String,
    },
    #[error("smartctl --scan-open: `devices` is {0}, not a list")]
    NotList(&'static str),
}

/// At most this many ports are taken from one scan (a controller has up to 240 devices; a
/// host rarely more than a few controllers): a scan listing more is cut, and says so.
pub const MAX_PORTS: usize = 1024;

fn digits(s: &str, max: usize) -> bool {
    (1..=max).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_digit())
}

/// A RAID passthrough type smartctl's scan gives: `megaraid,N`, `sat+megaraid,N`,
/// `aacraid,H,L,ID`, `cciss,N`, `3ware,N` (numbers of at most 3 digits).
pub fn is_raid_type(t: &str) -> bool {
    let t = t.strip_prefix("sat+").unwrap_or(t);
    let Some((kind, rest)) = t.split_once(',') else {
        return false;
    };
    let nums: Vec<&str> = rest.split(',').collect();
    let n = match kind {
        "megaraid" | "cciss" | "3ware" => 1,
        "aacraid" => 3,
        _ => return false,
    };
    nums.len() == n && nums.iter().all(|x| digits(x, 3))
}

/// A controller node such ports are read through: `/dev/bus/N` (MegaRAID), `/dev/sgN` or
/// `/dev/sdX` (cciss/hpsa, aacraid), `/dev/twaN`, `/dev/tweN`, `/dev/twlN` (3ware).
pub fn is_raid_node(p: &str) -> bool {
    let Some(n) = p.strip_prefix("/dev/") else {
        return false;
    };
    if let Some(x) = n.strip_prefix("bus/") {
        return digits(x, 3);
    }
    if let Some(x) = n.strip_prefix("sg") {
        return digits(x, 4);
    }
    if let Some(x) = n.strip_prefix("sd") {
        return (1..=3).contains(&x.len()) && x.bytes().all(|b| b.is_ascii_lowercase());
    }
    ["twa", "twe", "twl"]
        .iter()
        .any(|t| n.strip_prefix(t).is_some_and(|x| digits(x, 3)))
}

/// The RAID ports of a `--scan-open --json` output. Plain drives (`nvme`, `sat`, `scsi` types)
/// are not ports: /sys discovery finds them.
pub fn parse_scan_open(text: &str) -> Result<Scan, ScanError> {
    let v: Value = serde_json::from_str(text).map_err(|e| ScanError::Json {
        line: e.line(),
        column: e.column(),
        message: e.to_string(),
    })?;
    let mut scan = Scan::default();
    let devices = match v.get("devices") {
        // No device at all: smartctl leaves the key out.
        None => return Ok(scan),
        Some(Value::Array(d)) => d,
        Some(other) => return Err(ScanError::NotList(kind_of(other))),
    };
    for (i, d) in devices.iter().enumerate() {
        let s = |k: &str| d.get(k).and_then(Value::as_str);
        let (Some(path), Some(t)) = (s("name"), s("type")) else {
            scan.skipped
                .push(format!("devices[{i}]: no name or type string"));
            continue;
        };
        if !is_raid_type(t) {
            continue;
        }
        if let Some(e) = s("open_error") {
            scan.skipped.push(format!("{path} -d {t}: {e}"));
            continue;
        }
        if !is_raid_node(path) {
            scan.skipped
                .push(format!("{path} -d {t}: not a controller node this reads"));
            continue;
        }
        let port = RaidPort {
            path: path.to_string(),
            dev_type: t.to_string(),
        };
        if scan.ports.contains(&port) {
            continue;
        }
        if scan.ports.len() == MAX_PORTS {
            scan.skipped.push(format!(
                "more than {MAX_PORTS} RAID ports: the rest left out"
            ));
            break;
        }
        scan.ports.push(port);
    }
    Ok(scan)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shape smartctl 7.x gives (`js_device_info`: name, info_name, type, protocol; and
    /// `open_error` for a port it could not open), written by hand after smartmontools'
    /// source and the text form MegaRAID users post (`/dev/bus/0 -d megaraid,8 #
    /// /dev/bus/0 [megaraid_disk_08], SCSI device`): no real `--scan-open --json` of a RAID
    /// controller is in the corpus.
    const SCAN: &str = r#"{"json_format_version":[1,0],
      "smartctl":{"version":[7,3],"argv":["smartctl","--scan-open","--json=c"],"exit_status":0},
      "devices":[
        {"name":"/dev/sda","info_name":"/dev/sda","type":"scsi","protocol":"SCSI"},
        {"name":"/dev/bus/0","info_name":"/dev/bus/0 [megaraid_disk_08]","type":"megaraid,8","protocol":"SCSI"},
        {"name":"/dev/bus/0","info_name":"/dev/bus/0 [megaraid_disk_09] [SAT]","type":"sat+megaraid,9","protocol":"ATA"},
        {"name":"/dev/bus/0","info_name":"/dev/bus/0 [megaraid_disk_10]","type":"megaraid,10","protocol":"SCSI",
         "open_error":"INQUIRY failed"},
        {"name":"/dev/sdb","info_name":"/dev/sdb [aacraid_disk_00_00_1]","type":"aacraid,0,0,1","protocol":"SCSI"},
        {"name":"/dev/twa0","info_name":"/dev/twa0 [3ware_disk_00]","type":"3ware,0","protocol":"ATA"},
        {"name":"/dev/sg1","info_name":"/dev/sg1 [cciss_disk_02]","type":"cciss,2","protocol":"SCSI"},
        {"name":"/dev/nvme0","info_name":"/dev/nvme0","type":"nvme","protocol":"NVMe"},
        {"name":"/dev/bus/0","info_name":"/dev/bus/0 [megaraid_disk_08]","type":"megaraid,8","protocol":"SCSI"}
      ]}"#;

    #[test]
    fn a_scan_gives_the_raid_ports_and_says_which_it_left_out() {
        let s = parse_scan_open(SCAN).expect("scan");
        let ports: Vec<(&str, &str)> = s
            .ports
            .iter()
            .map(|p| (p.path.as_str(), p.dev_type.as_str()))
            .collect();
        assert_eq!(
            ports,
            [
                ("/dev/bus/0", "megaraid,8"),
                ("/dev/bus/0", "sat+megaraid,9"),
                ("/dev/sdb", "aacraid,0,0,1"),
                ("/dev/twa0", "3ware,0"),
                ("/dev/sg1", "cciss,2"),
            ],
            "plain drives are /sys discovery's; a port listed twice is one"
        );
        assert_eq!(s.skipped, ["/dev/bus/0 -d megaraid,10: INQUIRY failed"]);
    }

    #[test]
    fn a_scan_with_nothing_or_of_the_wrong_shape_is_no_port_or_an_error() {
        // What smartctl 7.3 prints on this machine (no device).
        let none = r#"{"json_format_version":[1,0],"smartctl":{"version":[7,3],
            "argv":["smartctl","--scan-open","--json"],"exit_status":0}}"#;
        assert_eq!(parse_scan_open(none), Ok(Scan::default()));
        assert_eq!(
            parse_scan_open(r#"{"devices": {"name": "/dev/bus/0"}}"#),
            Err(ScanError::NotList("an object"))
        );
        let e = parse_scan_open(r#"{"devices": [{"name": "/dev/bus/0", "type": "megar"#)
            .expect_err("cut short");
        assert!(
            e.to_string().contains("--scan-open") && e.to_string().contains("line 1"),
            "{e}"
        );
        // Entries of wrong types, and nodes or types of shapes not read.
        let odd = r#"{"devices": [
            {"name": 7, "type": "megaraid,1"},
            {"name": "/dev/bus/0"},
            {"name": "/dev/../etc/passwd", "type": "megaraid,1"},
            {"name": "/dev/bus/0", "type": "megaraid,1;rm"},
            {"name": "/dev/bus/0", "type": "megaraid,1234"},
            {"name": "/dev/bus/0", "type": "areca,1"}
        ]}"#;
        let s = parse_scan_open(odd).expect("scan");
        assert!(s.ports.is_empty(), "{s:?}");
        assert_eq!(s.skipped.len(), 3, "{s:?}");
        assert!(s.skipped[2].contains("/dev/../etc/passwd"), "{s:?}");
    }

    #[test]
    fn only_raid_port_types_and_controller_nodes_are_accepted() {
        for t in [
            "megaraid,0",
            "sat+megaraid,31",
            "aacraid,0,0,1",
            "cciss,2",
            "3ware,11",
        ] {
            assert!(is_raid_type(t), "{t}");
        }
        for t in [
            "megaraid",
            "megaraid,",
            "megaraid,1,2",
            "aacraid,0,1",
            "sat",
            "nvme",
            "scsi",
            "usbjmicron,0",
            "megaraid,-1",
            "megaraid,1 ",
            "sat+sat+megaraid,1",
            "",
        ] {
            assert!(!is_raid_type(t), "{t}");
        }
        for p in [
            "/dev/bus/0",
            "/dev/sg12",
            "/dev/sdab",
            "/dev/twa0",
            "/dev/twl3",
        ] {
            assert!(is_raid_node(p), "{p}");
        }
        for p in [
            "/dev/bus/",
            "/dev/bus/0/1",
            "/dev/sg",
            "/dev/sda1",
            "/dev/nvme0",
            "/dev/../sda",
            "/tmp/bus/0",
            "dev/bus/0",
            "/dev/sdabcd",
            "/dev/twx0",
        ] {
            assert!(!is_raid_node(p), "{p}");
        }
    }
}
