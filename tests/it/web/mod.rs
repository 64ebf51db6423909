//! The daemon's HTTP face over real HTTP: its routes, what a hostile client can't do to it, and
//! the web config file (TLS, basic auth, reloads).

mod attack;
mod http;
mod limits;
mod tls;
