//! The package and its systemd unit on this machine: the .deb installed and purged, the unit's
//! sandbox as systemd judges it, and the notify protocol and watchdog.

mod changelog;
mod deb;
mod notify;
mod unit_security;
