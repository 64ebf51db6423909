//! The databases collector against real servers and real faults: a PostgreSQL started by the
//! test whose archiver fails and whose slot nobody consumes, then fixed; a MariaDB whose binary
//! logs are flushed and purged; a data directory the daemon's user may not read, then may
//! through the group; a watched path on a mount whose listing hangs.

mod attack;
mod faults;
mod hung_many;
mod mariadb;
mod pages;
mod postgres;
mod stopped;

/// The bytes of one component of one database in an exposition (whatever mount holds it).
pub fn component(text: &str, database: &str, component: &str) -> Option<f64> {
    crate::support::value_matching(
        text,
        "ssdwatch_database_component_bytes",
        &format!("{{database=\"{database}\",component=\"{component}\",mountpoint="),
    )
}
