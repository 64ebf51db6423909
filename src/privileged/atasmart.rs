//! The second SMART backend: ATA drives read through libatasmart (feature `atasmart`, on by
//! default; the library is loaded at run time), for hosts without smartctl. What it reads is written in smartctl's JSON shape, so one parser and
//! the same vendor tables (`crate::smart`) normalize both backends. No scheduling here, and
//! never NVMe (libatasmart speaks ATA only).

// Without the feature only the config, the choice and the pure parts are used (and tested).
#![cfg_attr(not(feature = "atasmart"), allow(dead_code))]

use serde_json::{Value, json};

/// Which backend reads the drives (config `backend`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// smartctl when it is installed, else libatasmart for ATA drives.
    #[default]
    Auto,
    Smartctl,
    Libatasmart,
}

/// What read one drive: the `backend` label of its info series.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum Used {
    #[default]
    Smartctl,
    Libatasmart,
}

impl Used {
    pub(crate) fn label(self) -> &'static str {
        match self {
            Used::Smartctl => "smartctl",
            Used::Libatasmart => "libatasmart",
        }
    }
}

/// Whether this build can read drives through libatasmart. The library itself is loaded on the
/// first read; a host without it gets "libatasmart not installed" for each drive so read.
pub(crate) const BUILT_IN: bool = cfg!(feature = "atasmart");

/// The backend for one drive: libatasmart only for drives that may be ATA (sd devices, or a
/// configured device without a `-d` type), only when built in, and under `auto` only when
/// smartctl is missing. NVMe, virtio and RAID ports always go to smartctl.
pub(crate) fn choose(cfg: Backend, smartctl_found: bool, may_be_ata: bool) -> Used {
    let ata_ok = BUILT_IN && may_be_ata;
    match cfg {
        Backend::Libatasmart if ata_ok => Used::Libatasmart,
        Backend::Auto if ata_ok && !smartctl_found => Used::Libatasmart,
        _ => Used::Smartctl,
    }
}

/// A drive's answer to CHECK POWER MODE, as libatasmart gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Power {
    Awake,
    /// Standby or sleep: reading SMART data would spin it up.
    Asleep,
    /// The check failed (errno): the mode is not known.
    Unknown(i32),
}

/// Whether to read SMART data after the power check (the `--nocheck=standby` rule): never from
/// a sleeping disk, nor from one whose mode is unknown, unless the check is turned off.
pub(crate) fn may_read(power: Power, nocheck_standby: bool) -> bool {
    !nocheck_standby || power == Power::Awake
}

/// One ATA attribute as libatasmart parsed it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Attr {
    pub id: u8,
    pub name: String,
    pub value: Option<u8>,
    pub worst: Option<u8>,
    pub thresh: Option<u8>,
    /// The 48-bit raw value (six bytes, little-endian).
    pub raw: u64,
}

/// What libatasmart read of one drive.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Reading {
    pub model: Option<String>,
    pub serial: Option<String>,
    pub firmware: Option<String>,
    pub size_bytes: Option<u64>,
    /// CHECK POWER MODE said standby/sleep: nothing else was read.
    pub asleep: bool,
    pub smart_available: bool,
    pub passed: Option<bool>,
    pub attributes: Vec<Attr>,
    pub power_on_ms: Option<u64>,
    pub power_cycles: Option<u64>,
    pub temperature_mkelvin: Option<u64>,
}

/// The reading in smartctl's JSON shape (the fields `crate::smart::normalize` reads).
pub(crate) fn to_json(path: &str, r: &Reading) -> Value {
    let mut v = json!({
        "device": {"name": path, "type": "ata", "protocol": "ATA"},
    });
    let mut set = |k: &str, x: Value| {
        if let Some(o) = v.as_object_mut() {
            o.insert(k.to_string(), x);
        }
    };
    if r.asleep {
        set("power_mode", json!({"name": "STANDBY"}));
        return v;
    }
    if let Some(m) = &r.model {
        set("model_name", json!(m));
    }
    if let Some(s) = &r.serial {
        set("serial_number", json!(s));
    }
    if let Some(f) = &r.firmware {
        set("firmware_version", json!(f));
    }
    if let Some(b) = r.size_bytes {
        set("user_capacity", json!({"bytes": b}));
    }
    set("smart_support", json!({"available": r.smart_available}));
    if let Some(p) = r.passed {
        set("smart_status", json!({"passed": p}));
    }
    if !r.attributes.is_empty() {
        let table: Vec<Value> = r
            .attributes
            .iter()
            .map(|a| {
                json!({"id": a.id, "name": a.name, "value": a.value, "worst": a.worst,
                       "thresh": a.thresh, "raw": {"value": a.raw}})
            })
            .collect();
        set("ata_smart_attributes", json!({"table": table}));
    }
    if let Some(ms) = r.power_on_ms {
        // smartctl gives whole hours and minutes.
        set(
            "power_on_time",
            json!({"hours": ms / 3_600_000, "minutes": ms % 3_600_000 / 60_000}),
        );
    }
    if let Some(c) = r.power_cycles {
        set("power_cycle_count", json!(c));
    }
    if let Some(mk) = r.temperature_mkelvin {
        // libatasmart: millikelvin from the attribute's whole degrees Celsius.
        let c = (mk as f64 - 273_150.0) / 1000.0;
        set("temperature", json!({"current": c.round() as i64}));
    }
    v
}

/// Reads one drive through libatasmart. Blocking: run it off the async threads.
#[cfg(feature = "atasmart")]
pub(crate) fn read(path: &str, nocheck_standby: bool) -> Result<Reading, AtaError> {
    ffi::read(path, nocheck_standby)
}

/// A libatasmart call that failed, with the step it was.
#[derive(Debug, thiserror::Error)]
#[error("libatasmart {step} on {path}: {source}")]
pub struct AtaError {
    pub step: &'static str,
    pub path: String,
    pub source: std::io::Error,
}

#[cfg(feature = "atasmart")]
mod ffi {
    //! libatasmart's C API as atasmart.h (0.19, Debian's libatasmart4) declares it, bound at run
    //! time: the binary has no link-time dependency on the library, so one build runs on hosts
    //! with and without it, and a host without it gets an error per drive read this way.

    use super::{AtaError, Attr, Power, Reading, may_read};
    use libloading::Library;
    use std::ffi::{CStr, CString, c_char, c_int, c_uint, c_void};
    use std::sync::OnceLock;

    /// The library's soname: ABI version 4 (Debian and Ubuntu: libatasmart4).
    pub(crate) const SONAME: &str = "libatasmart.so.4";

    type SkBool = c_uint;

    /// `SkDisk`: opaque, only ever behind a pointer libatasmart made.
    #[repr(C)]
    struct SkDisk {
        _opaque: [u8; 0],
    }

    /// `SkIdentifyParsedData` (libatasmart may append fields: only read through its pointer).
    #[repr(C)]
    pub(crate) struct SkIdentifyParsedData {
        serial: [c_char; 21],
        firmware: [c_char; 9],
        model: [c_char; 41],
    }

    /// `SkSmartAttributeParsedData`. The C struct's ten one-bit `SkBool` fields after
    /// `threshold` are `bits`: GCC puts the first eight (threshold_valid, online, prefailure,
    /// good_now, good_now_valid, good_in_the_past, good_in_the_past_valid, current_value_valid)
    /// in the byte after `threshold`, lowest bit first, and the last two (worst_value_valid,
    /// warn) in the next byte, as a bit-field may not straddle its 4-byte unit. Checked against
    /// atasmart.h with offsetof and by setting each field (x86-64): size 48, current_value at 25,
    /// raw at 40 (the test below keeps these).
    #[repr(C)]
    pub(crate) struct SkSmartAttributeParsedData {
        id: u8,
        name: *const c_char,
        pretty_unit: c_uint,
        flags: u16,
        threshold: u8,
        bits: [u8; 2],
        current_value: u8,
        worst_value: u8,
        pretty_value: u64,
        raw: [u8; 6],
    }

    impl SkSmartAttributeParsedData {
        const THRESHOLD_VALID: usize = 0;
        const CURRENT_VALUE_VALID: usize = 7;
        const WORST_VALUE_VALID: usize = 8;

        fn bit(&self, n: usize) -> bool {
            self.bits[n / 8] >> (n % 8) & 1 != 0
        }
    }

    type Figure = unsafe extern "C" fn(*mut SkDisk, *mut u64) -> c_int;
    type Flag = unsafe extern "C" fn(*mut SkDisk, *mut SkBool) -> c_int;
    type OnAttribute =
        unsafe extern "C" fn(*mut SkDisk, *const SkSmartAttributeParsedData, *mut c_void);

    /// The functions read() calls, resolved once; the library stays loaded for the process.
    struct Api {
        open: unsafe extern "C" fn(*const c_char, *mut *mut SkDisk) -> c_int,
        free: unsafe extern "C" fn(*mut SkDisk),
        identify_is_available: Flag,
        identify_parse:
            unsafe extern "C" fn(*mut SkDisk, *mut *const SkIdentifyParsedData) -> c_int,
        check_sleep_mode: Flag,
        smart_is_available: Flag,
        get_size: Figure,
        smart_read_data: unsafe extern "C" fn(*mut SkDisk) -> c_int,
        smart_status: Flag,
        smart_parse_attributes:
            unsafe extern "C" fn(*mut SkDisk, OnAttribute, *mut c_void) -> c_int,
        smart_get_power_on: Figure,
        smart_get_power_cycle: Figure,
        smart_get_temperature: Figure,
        _lib: Library,
    }

    /// Why libatasmart could not be used: what to tell the operator.
    #[derive(Debug, thiserror::Error)]
    pub(crate) enum LoadError {
        /// dlopen's own words (the file it looked for).
        #[error("libatasmart not installed ({cause}; Debian and Ubuntu: package libatasmart4)")]
        NotInstalled { cause: String },
        /// A function this build calls is missing from the library found.
        #[error("{SONAME} is not the libatasmart this build knows: {cause}")]
        UnknownLibrary { symbol: &'static str, cause: String },
    }

    /// Loads `soname` and resolves every function.
    fn load(soname: &str) -> Result<Api, LoadError> {
        // SAFETY: loading runs libatasmart's and libudev's initialisers, which only set up
        // their own state.
        let lib = unsafe { Library::new(soname) }
            .map_err(|e| LoadError::NotInstalled { cause: cause(&e) })?;
        fn sym<T: Copy>(lib: &Library, name: &'static str) -> Result<T, LoadError> {
            // SAFETY: each T below is the function's type as atasmart.h declares it.
            unsafe { lib.get::<T>(name.as_bytes()) }
                .map(|f| *f)
                .map_err(|e| LoadError::UnknownLibrary {
                    symbol: name,
                    cause: cause(&e),
                })
        }
        Ok(Api {
            open: sym(&lib, "sk_disk_open")?,
            free: sym(&lib, "sk_disk_free")?,
            identify_is_available: sym(&lib, "sk_disk_identify_is_available")?,
            identify_parse: sym(&lib, "sk_disk_identify_parse")?,
            check_sleep_mode: sym(&lib, "sk_disk_check_sleep_mode")?,
            smart_is_available: sym(&lib, "sk_disk_smart_is_available")?,
            get_size: sym(&lib, "sk_disk_get_size")?,
            smart_read_data: sym(&lib, "sk_disk_smart_read_data")?,
            smart_status: sym(&lib, "sk_disk_smart_status")?,
            smart_parse_attributes: sym(&lib, "sk_disk_smart_parse_attributes")?,
            smart_get_power_on: sym(&lib, "sk_disk_smart_get_power_on")?,
            smart_get_power_cycle: sym(&lib, "sk_disk_smart_get_power_cycle")?,
            smart_get_temperature: sym(&lib, "sk_disk_smart_get_temperature")?,
            _lib: lib,
        })
    }

    /// dlerror()'s text ("libatasmart.so.4: cannot open shared object file: ..."), which
    /// libloading keeps as the source of its "dlopen failed".
    fn cause(e: &libloading::Error) -> String {
        std::error::Error::source(e).map_or_else(|| e.to_string(), ToString::to_string)
    }

    /// The library, loaded on the first read (by whichever process reads: the privileged helper).
    fn api() -> Result<&'static Api, &'static LoadError> {
        static API: OnceLock<Result<Api, LoadError>> = OnceLock::new();
        API.get_or_init(|| load(SONAME)).as_ref()
    }

    /// An open libatasmart disk, freed on drop.
    struct Disk<'a> {
        api: &'a Api,
        d: *mut SkDisk,
    }

    impl Drop for Disk<'_> {
        fn drop(&mut self) {
            // SAFETY: opened by sk_disk_open and freed once, here.
            unsafe { (self.api.free)(self.d) }
        }
    }

    fn last_err(step: &'static str, path: &str) -> AtaError {
        AtaError {
            step,
            path: path.to_string(),
            source: std::io::Error::last_os_error(),
        }
    }

    fn text(chars: &[c_char]) -> Option<String> {
        let bytes: Vec<u8> = chars
            .iter()
            .take_while(|c| **c != 0)
            .map(|c| *c as u8)
            .collect();
        let s = String::from_utf8_lossy(&bytes).trim().to_string();
        (!s.is_empty()).then_some(s)
    }

    /// A getter that fails with ENOENT when the drive has no such figure.
    fn figure(f: impl FnOnce(*mut u64) -> i32) -> Option<u64> {
        let mut x = 0u64;
        (f(&mut x) >= 0).then_some(x)
    }

    extern "C" fn on_attribute(
        _d: *mut SkDisk,
        a: *const SkSmartAttributeParsedData,
        user: *mut c_void,
    ) {
        // SAFETY: libatasmart passes a valid attribute for the duration of the call, and
        // `user` is the Vec<Attr> handed to sk_disk_smart_parse_attributes below.
        let (a, out) = unsafe { (&*a, &mut *(user as *mut Vec<Attr>)) };
        let name = if a.name.is_null() {
            String::new()
        } else {
            // SAFETY: a NUL-terminated name owned by libatasmart.
            unsafe { CStr::from_ptr(a.name) }
                .to_string_lossy()
                .into_owned()
        };
        let raw = a
            .raw
            .iter()
            .rev()
            .fold(0u64, |acc, b| (acc << 8) | u64::from(*b));
        out.push(Attr {
            id: a.id,
            name,
            value: a
                .bit(SkSmartAttributeParsedData::CURRENT_VALUE_VALID)
                .then_some(a.current_value),
            worst: a
                .bit(SkSmartAttributeParsedData::WORST_VALUE_VALID)
                .then_some(a.worst_value),
            thresh: a
                .bit(SkSmartAttributeParsedData::THRESHOLD_VALID)
                .then_some(a.threshold),
            raw,
        });
    }

    pub(crate) fn read(path: &str, nocheck_standby: bool) -> Result<Reading, AtaError> {
        let api = api().map_err(|e| AtaError {
            step: "load",
            path: path.to_string(),
            source: std::io::Error::other(e.to_string()),
        })?;
        let c_path = CString::new(path).map_err(|_| AtaError {
            step: "open",
            path: path.to_string(),
            source: std::io::Error::from(std::io::ErrorKind::InvalidInput),
        })?;
        let mut d: *mut SkDisk = std::ptr::null_mut();
        // SAFETY: a NUL-terminated path and a place for the handle.
        if unsafe { (api.open)(c_path.as_ptr(), &mut d) } < 0 || d.is_null() {
            return Err(last_err("open", path));
        }
        let disk = Disk { api, d };
        let mut r = Reading::default();
        // libatasmart picks its access method (SAT 16/12, Linux IDE ioctls, USB bridges) from
        // udev's ID_ATA_SMART_ACCESS or the parent bus; when none answered IDENTIFY, every
        // later call fails with ENOTSUP: say which step that is.
        let mut identified: SkBool = 0;
        // SAFETY: an open disk and a place for the answer.
        if unsafe { (api.identify_is_available)(disk.d, &mut identified) } < 0 || identified == 0 {
            return Err(AtaError {
                step: "identify (no access method libatasmart tried answered IDENTIFY DEVICE; the udev property ID_ATA_SMART_ACCESS selects one: sat16, sat12, linux-ide)",
                path: path.to_string(),
                source: std::io::Error::from_raw_os_error(libc::ENOTSUP),
            });
        }
        // Power mode first: a sleeping disk is not woken (as smartctl --nocheck=standby).
        let mut awake: SkBool = 0;
        // SAFETY: an open disk and a place for the answer.
        let power = if unsafe { (api.check_sleep_mode)(disk.d, &mut awake) } < 0 {
            Power::Unknown(std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
        } else if awake != 0 {
            Power::Awake
        } else {
            Power::Asleep
        };
        if !may_read(power, nocheck_standby) {
            if let Power::Unknown(errno) = power {
                return Err(AtaError {
                    step: "power-mode check (not read, so as not to wake it)",
                    path: path.to_string(),
                    source: std::io::Error::from_raw_os_error(errno),
                });
            }
            r.asleep = true;
            return Ok(r);
        }
        let mut available: SkBool = 0;
        // SAFETY: as above.
        if unsafe { (api.smart_is_available)(disk.d, &mut available) } < 0 {
            return Err(last_err("SMART availability", path));
        }
        r.smart_available = available != 0;
        let mut id: *const SkIdentifyParsedData = std::ptr::null();
        // SAFETY: libatasmart stores a pointer to its own parsed identify data in `id`.
        if unsafe { (api.identify_parse)(disk.d, &mut id) } >= 0 && !id.is_null() {
            // SAFETY: valid until the disk is freed; copied out here.
            let id = unsafe { &*id };
            r.model = text(&id.model);
            r.serial = text(&id.serial);
            r.firmware = text(&id.firmware);
        }
        // SAFETY: an open disk and a place for the size.
        r.size_bytes = figure(|x| unsafe { (api.get_size)(disk.d, x) });
        if !r.smart_available {
            return Ok(r);
        }
        // SAFETY: an open disk.
        if unsafe { (api.smart_read_data)(disk.d) } < 0 {
            return Err(last_err("reading SMART data", path));
        }
        let mut good: SkBool = 0;
        // SAFETY: as above.
        if unsafe { (api.smart_status)(disk.d, &mut good) } >= 0 {
            r.passed = Some(good != 0);
        }
        let mut attrs: Vec<Attr> = Vec::new();
        // SAFETY: the callback only runs during this call, with `attrs` alive.
        let parsed = unsafe {
            (api.smart_parse_attributes)(
                disk.d,
                on_attribute,
                &mut attrs as *mut Vec<Attr> as *mut c_void,
            )
        };
        if parsed < 0 {
            return Err(last_err("parsing SMART attributes", path));
        }
        r.attributes = attrs;
        // SAFETY: an open disk with SMART data read, and a place for each figure.
        r.power_on_ms = figure(|x| unsafe { (api.smart_get_power_on)(disk.d, x) });
        r.power_cycles = figure(|x| unsafe { (api.smart_get_power_cycle)(disk.d, x) });
        r.temperature_mkelvin = figure(|x| unsafe { (api.smart_get_temperature)(disk.d, x) });
        Ok(r)
    }

    #[cfg(test)]
    mod tests {
        use super::*;
        use std::mem::{offset_of, size_of};

        #[test]
        fn the_attribute_struct_has_atasmart_h_layout() {
            // gcc on x86-64, offsetof over atasmart.h 0.19.
            type A = SkSmartAttributeParsedData;
            assert_eq!(size_of::<A>(), 48);
            assert_eq!(
                [
                    offset_of!(A, name),
                    offset_of!(A, pretty_unit),
                    offset_of!(A, flags),
                    offset_of!(A, threshold),
                    offset_of!(A, bits),
                    offset_of!(A, current_value),
                    offset_of!(A, worst_value),
                    offset_of!(A, pretty_value),
                    offset_of!(A, raw),
                ],
                [8, 16, 20, 22, 23, 25, 26, 32, 40]
            );
            type I = SkIdentifyParsedData;
            assert_eq!(
                [
                    offset_of!(I, serial),
                    offset_of!(I, firmware),
                    offset_of!(I, model)
                ],
                [0, 21, 30]
            );
            // The bytes gcc writes for current_value_valid = 1 and for worst_value_valid = 1.
            let mut a = A {
                id: 0,
                name: std::ptr::null(),
                pretty_unit: 0,
                flags: 0,
                threshold: 0,
                bits: [0x80, 0x00],
                current_value: 0,
                worst_value: 0,
                pretty_value: 0,
                raw: [0; 6],
            };
            assert!(a.bit(A::CURRENT_VALUE_VALID) && !a.bit(A::WORST_VALUE_VALID));
            a.bits = [0x00, 0x01];
            assert!(!a.bit(A::CURRENT_VALUE_VALID) && a.bit(A::WORST_VALUE_VALID));
            a.bits = [0x01, 0x00];
            assert!(a.bit(A::THRESHOLD_VALID));
        }

        #[test]
        fn a_host_without_the_library_is_told_so() {
            let e = load("libatasmart-not-here.so.4")
                .err()
                .expect("no such library");
            assert!(matches!(e, LoadError::NotInstalled { .. }), "{e:?}");
            let e = e.to_string();
            assert!(
                e.starts_with("libatasmart not installed (libatasmart-not-here.so.4: cannot open")
                    && e.contains("libatasmart4"),
                "{e}"
            );
        }

        #[test]
        fn a_missing_disk_fails_at_open_or_for_want_of_the_library() {
            // Whether this machine has libatasmart4 is not the test's business: both are told.
            let e = read("/dev/ssdwatch-no-disk", true).unwrap_err().to_string();
            assert!(
                e == "libatasmart open on /dev/ssdwatch-no-disk: No such file or directory (os error 2)"
                    || e.starts_with(
                        "libatasmart load on /dev/ssdwatch-no-disk: libatasmart not installed ("
                    ),
                "{e}"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sleeping_or_unknown_disk_is_not_read_unless_the_check_is_off() {
        assert!(may_read(Power::Awake, true));
        assert!(!may_read(Power::Asleep, true), "would spin it up");
        assert!(!may_read(Power::Unknown(5), true), "mode unknown: not read");
        assert!(may_read(Power::Asleep, false), "nocheck_standby: false");
    }

    #[test]
    fn libatasmart_only_for_ata_drives_and_under_auto_only_without_smartctl() {
        let lib = if BUILT_IN {
            Used::Libatasmart
        } else {
            Used::Smartctl
        };
        assert_eq!(choose(Backend::Auto, true, true), Used::Smartctl);
        assert_eq!(choose(Backend::Auto, false, true), lib);
        assert_eq!(choose(Backend::Libatasmart, true, true), lib);
        assert_eq!(
            choose(Backend::Libatasmart, true, false),
            Used::Smartctl,
            "NVMe stays with smartctl"
        );
        assert_eq!(choose(Backend::Smartctl, false, true), Used::Smartctl);
    }

    #[test]
    fn a_reading_goes_through_the_smartctl_model_with_the_same_meaning() {
        let r = Reading {
            model: Some("Samsung SSD 860 EVO 250GB".into()),
            serial: Some("S3YHNX0M123456".into()),
            firmware: Some("RVT04B6Q".into()),
            size_bytes: Some(250_059_350_016),
            smart_available: true,
            passed: Some(true),
            attributes: vec![
                Attr {
                    id: 5,
                    name: "reallocated-sector-count".into(),
                    value: Some(100),
                    worst: Some(100),
                    thresh: Some(10),
                    raw: 3,
                },
                Attr {
                    id: 194,
                    name: "temperature-celsius-2".into(),
                    value: Some(67),
                    worst: Some(50),
                    thresh: Some(0),
                    raw: 0x0032_0014_0021,
                },
            ],
            power_on_ms: Some(5 * 3_600_000 + 30 * 60_000),
            power_cycles: Some(12),
            temperature_mkelvin: Some(33_000 + 273_150),
            ..Reading::default()
        };
        let h = crate::smart::normalize(
            &to_json("/dev/sda", &r),
            crate::smart::table::Table::builtin(),
        );
        assert_eq!(h.protocol.as_deref(), Some("ATA"));
        assert_eq!(h.model.as_deref(), Some("Samsung SSD 860 EVO 250GB"));
        assert_eq!(h.serial.as_deref(), Some("S3YHNX0M123456"));
        assert_eq!(h.capacity_bytes, Some(250_059_350_016));
        assert_eq!(h.smart_supported, Some(true));
        assert_eq!(h.smart_passed, Some(true));
        assert_eq!(h.temperature_celsius, Some(33.0));
        assert_eq!(h.power_on_seconds, Some(5 * 3600 + 30 * 60));
        assert_eq!(h.power_cycles, Some(12));
        assert_eq!(
            h.reallocated_sectors,
            Some(3),
            "attribute 5 raw, as from smartctl"
        );
        assert_eq!(h.attributes.len(), 2);
        assert_eq!(h.attributes[1].raw, Some(0x0032_0014_0021));
        assert_eq!(h.smartctl_exit_status, None, "no smartctl exit bits");

        let asleep = crate::smart::normalize(
            &to_json(
                "/dev/sda",
                &Reading {
                    asleep: true,
                    ..Reading::default()
                },
            ),
            crate::smart::table::Table::builtin(),
        );
        assert!(asleep.in_standby);
        assert_eq!(asleep.smart_supported, None, "nothing read");
    }
}
