//! A drive smartctl's database does not know (an old database on a stable distribution, a
//! drive newer than it) must give the same normalized figures as when it is known, wherever
//! its product line is known by model name; otherwise no figure, never a wrong one. The
//! "old database" outputs are made here from the real captures in tests/fixtures/smart: the
//! family removed and the vendor attribute names replaced as an old smartctl prints them.
//! Also: the standard Device Statistics log with no vendor table at all, and counters whose
//! names do not vouch for their unit staying silent.

use serde_json::Value;
use ssdwatch::smart::table::Table;
use ssdwatch::smart::{FamilySource, Health, normalize};
use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/smart")
}

/// Every real JSON capture that has an ATA attribute table, by file stem.
fn ata_captures() -> Vec<(String, Value)> {
    let mut out = Vec::new();
    let mut paths: Vec<PathBuf> = std::fs::read_dir(fixtures())
        .expect("fixtures dir")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .filter(|p| p.file_name().is_some_and(|n| n != "expected.json"))
        .collect();
    paths.sort();
    for p in paths {
        let text = std::fs::read_to_string(&p).expect("read fixture");
        let v: Value = serde_json::from_str(&text).expect("fixture is JSON");
        if v.pointer("/ata_smart_attributes/table").is_some() {
            let stem = p.file_stem().expect("stem").to_string_lossy().into_owned();
            out.push((stem, v));
        }
    }
    assert!(out.len() >= 15, "only {} ATA captures found", out.len());
    out
}

/// smartctl's DEFAULT attribute names (drivedb.h's DEFAULT entry): what a drive missing
/// from the database shows. `,SSD`/`,HDD`-only names are given on the right kind of drive.
fn default_name(id: u64, ssd: bool) -> &'static str {
    match (id, ssd) {
        (1, _) => "Raw_Read_Error_Rate",
        (5, _) => "Reallocated_Sector_Ct",
        (9, _) => "Power_On_Hours",
        (12, _) => "Power_Cycle_Count",
        (177, true) => "Wear_Leveling_Count",
        (194, _) => "Temperature_Celsius",
        (197, _) => "Current_Pending_Sector",
        (199, _) => "UDMA_CRC_Error_Count",
        (231, false) => "Temperature_Celsius",
        (232, _) => "Available_Reservd_Space",
        (233, true) => "Media_Wearout_Indicator",
        (241, _) => "Total_LBAs_Written",
        (242, _) => "Total_LBAs_Read",
        (_, true) => "Unknown_SSD_Attribute",
        _ => "Unknown_Attribute",
    }
}

#[derive(Clone, Copy, Debug)]
enum OldDb {
    /// Every attribute name is `Unknown_Attribute` (the description of an old db).
    AllUnknown,
    /// smartctl's DEFAULT names, which lie about units (an Intel 241 "Total_LBAs_Written").
    DefaultNames,
}

/// The same capture as an old drive database prints it.
fn as_old_database(v: &Value, how: OldDb) -> Value {
    let mut v = v.clone();
    let obj = v.as_object_mut().expect("object");
    obj.remove("model_family");
    obj.insert("in_smartctl_database".into(), Value::Bool(false));
    let ssd = obj.get("rotation_rate").and_then(Value::as_u64) == Some(0);
    if let Some(table) = v
        .pointer_mut("/ata_smart_attributes/table")
        .and_then(Value::as_array_mut)
    {
        for a in table {
            let id = a.get("id").and_then(Value::as_u64).unwrap_or(0);
            let name = match how {
                OldDb::AllUnknown => "Unknown_Attribute",
                OldDb::DefaultNames => default_name(id, ssd),
            };
            a["name"] = Value::String(name.into());
        }
    }
    v
}

/// The figures compared, field by field.
fn figures(h: &Health) -> Vec<(&'static str, Option<f64>)> {
    let f = |x: Option<u64>| x.map(|v| v as f64);
    vec![
        ("wear_used_ratio", h.wear_used_ratio),
        ("host_written_bytes", f(h.host_written_bytes)),
        ("host_read_bytes", f(h.host_read_bytes)),
        ("nand_written_bytes", f(h.nand_written_bytes)),
        ("erase_count_avg", f(h.erase_count_avg)),
        ("erase_count_max", f(h.erase_count_max)),
        ("spare_available_ratio", h.spare_available_ratio),
        ("unsafe_shutdowns", f(h.unsafe_shutdowns)),
    ]
}

#[test]
fn an_old_drive_database_gives_the_same_wear_and_write_figures_as_a_new_one() {
    let table = Table::builtin();
    let mut strict = Vec::new();
    let mut failures = Vec::new();
    for (name, v) in ata_captures() {
        let new = normalize(&v, table);
        if new.model_family.is_none() {
            continue; // already an "old database" capture: nothing to compare with
        }
        for how in [OldDb::AllUnknown, OldDb::DefaultNames] {
            let old = normalize(&as_old_database(&v, how), table);
            let known = new.family_source == FamilySource::Drivedb;
            if known {
                // The vendor line is known: the model name must find the same entry.
                if old.vendor_table_family != new.vendor_table_family
                    || old.family_source != FamilySource::ModelName
                {
                    failures.push(format!(
                        "{name} ({how:?}): family {:?} by {:?}, want {:?} by model name",
                        old.vendor_table_family, old.family_source, new.vendor_table_family
                    ));
                }
                strict.push(name.clone());
            }
            for ((field, was), (_, now)) in figures(&new).into_iter().zip(figures(&old)) {
                let ok = if known {
                    was == now
                } else {
                    // No table entry: the old database may know less, never something else.
                    now.is_none() || now == was
                };
                if !ok {
                    failures.push(format!(
                        "{name} ({how:?}): {field} {now:?} with an old database, {was:?} with a new one"
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // The SATA SSDs of a known family in the corpus: Samsung 860 EVO and PM883, Intel
    // S4500/S4510, Kingston A400, Micron 5300 (two), Crucial m4, Transcend MTS400.
    strict.dedup();
    assert!(strict.len() >= 9, "only {strict:?} compared strictly");
}

#[test]
fn the_old_database_copy_of_a_micron_5300_still_has_its_nand_bytes_and_a_pm883_its_wear() {
    let table = Table::builtin();
    let caps = ata_captures();
    let get = |stem: &str| {
        let (_, v) = caps.iter().find(|(n, _)| n == stem).expect(stem);
        normalize(&as_old_database(v, OldDb::AllUnknown), table)
    };
    let m = get("ata-micron-5300-mtfddak1t9tds");
    // (247 4,062,707,571 + 248 8,824,675,195) pages x 16 KiB.
    assert_eq!(m.nand_written_bytes, Some(211_146_879_238_144));
    assert_eq!(m.host_written_bytes, Some(130_006_927_240 * 512));
    let s = get("ata-samsung-pm883-mz7lh1t9hmlt");
    assert_eq!(s.vendor_table_family.as_deref(), Some("samsung"));
    assert!(s.wear_used_ratio.is_some() && s.host_written_bytes.is_some());
}

fn no_tables() -> Table {
    Table::parse("defaults: []\nfamilies: []\n").expect("empty table")
}

fn capture(stem: &str) -> Value {
    let text = std::fs::read_to_string(fixtures().join(format!("{stem}.json"))).expect(stem);
    serde_json::from_str(&text).expect("JSON")
}

#[test]
fn the_device_statistics_log_gives_wear_and_host_bytes_without_any_vendor_table() {
    let t = no_tables();
    // Samsung 860 EVO: page 7 Percentage Used 19; page 1 Logical Sectors Written
    // 64,777,770,148 and Read 34,909,544,344, 512-byte sectors.
    let h = normalize(&capture("ata-samsung-860evo"), &t);
    assert_eq!(h.wear_used_ratio, Some(0.19));
    assert_eq!(h.host_written_bytes, Some(64_777_770_148 * 512));
    assert_eq!(h.host_read_bytes, Some(34_909_544_344 * 512));
    assert_eq!(
        h.wear_source.map(|s| s.to_string()).as_deref(),
        Some("ATA devstat Percentage Used Endurance Indicator")
    );
    // Crucial m4: Percentage Used 3; 13,843,916,035 sectors written.
    let h = normalize(&capture("ata-crucial-m4-mtfddak128mam"), &t);
    assert_eq!(h.wear_used_ratio, Some(0.03));
    assert_eq!(h.host_written_bytes, Some(13_843_916_035 * 512));
    // The same from an old database: devstat does not depend on the drive's family.
    let old = as_old_database(&capture("ata-crucial-m4-mtfddak128mam"), OldDb::AllUnknown);
    let h = normalize(&old, &t);
    assert_eq!(h.wear_used_ratio, Some(0.03));
    assert_eq!(h.family_source, FamilySource::None);
}

#[test]
fn a_write_counter_whose_name_does_not_vouch_for_its_unit_stays_silent() {
    let t = no_tables();
    // Intel S4510, in smartctl's database: 241 is Host_Writes_32MiB, another name.
    let h = normalize(&capture("ata-intel-s4510-ssdsc2kb480g8"), &t);
    assert!(h.model_family.is_some());
    assert_eq!(h.host_written_bytes, None, "{:?}", h.host_written_source);
    assert_eq!(h.wear_used_ratio, None);
    // SK hynix behind MegaRAID, not in the database: 241 carries smartctl's default name
    // Total_LBAs_Written but counts NAND GiB. Intel DC S3500 likewise counts 32 MiB units.
    for stem in [
        "megaraid-sat-skhynix-hfs1t9g3h2x069n",
        "ata-intel-dc-s3500-ssdsc2bb120g4l-nodb",
    ] {
        let v = capture(stem);
        let named = v["ata_smart_attributes"]["table"]
            .as_array()
            .expect("table")
            .iter()
            .any(|a| a["id"] == 241 && a["name"] == "Total_LBAs_Written");
        assert!(named, "{stem}: the trap is a default-named 241");
        let h = normalize(&v, &t);
        assert_eq!(h.host_written_bytes, None, "{stem}");
        assert_eq!(h.nand_written_bytes, None, "{stem}");
        // With the vendor table, the model name gives the true unit instead.
        let h = normalize(&v, Table::builtin());
        assert_eq!(h.family_source, FamilySource::ModelName, "{stem}");
        assert!(h.host_written_bytes.is_some(), "{stem}");
    }
    // Unknown_Attribute everywhere on a drive no table knows: no converted figure at all.
    let h = normalize(
        &as_old_database(
            &capture("ata-toshiba-thnsnh128gbst-nodb"),
            OldDb::AllUnknown,
        ),
        Table::builtin(),
    );
    assert_eq!(
        (
            h.wear_used_ratio,
            h.host_written_bytes,
            h.nand_written_bytes
        ),
        (None, None, None)
    );
}

#[test]
fn a_drive_the_database_knows_but_no_table_does_reads_total_lbas_written_as_sectors() {
    // Seagate Exos X16, in smartctl's database, no vendor table entry: 241
    // Total_LBAs_Written 385,165,652,077 logical sectors of 512 bytes.
    let h = normalize(
        &capture("ata-seagate-exos-x16-st16000nm001g"),
        Table::builtin(),
    );
    assert_eq!(h.family_source, FamilySource::None);
    assert_eq!(h.host_written_bytes, Some(385_165_652_077 * 512));
    assert_eq!(
        h.host_written_source.map(|s| s.to_string()).as_deref(),
        Some("ATA attr 241 Total_LBAs_Written")
    );
    // The same drive from an old database: the name is then smartctl's default: silent.
    let old = as_old_database(
        &capture("ata-seagate-exos-x16-st16000nm001g"),
        OldDb::DefaultNames,
    );
    assert_eq!(normalize(&old, Table::builtin()).host_written_bytes, None);
}
