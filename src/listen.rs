//! The listen addresses of `--web.listen-address` in exporter-toolkit's forms (`:PORT`,
//! `host:PORT`, `[v6]:PORT`), parsed purely, and the sockets bound for them. Nothing here serves.

use std::fmt;
use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use tokio::net::{TcpListener, TcpSocket};

/// Connections the kernel may hold for us before we accept them. mio (and std) listen with
/// 128: a burst of reconnecting idle clients overflowed it and a scrape's SYN was dropped, to
/// be retried a second later. The kernel caps it at `net.core.somaxconn`.
pub(crate) const LISTEN_BACKLOG: u32 = 1024;

/// One address to listen on, as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ListenAddr {
    /// `:PORT`: every address of the host, IPv6 and IPv4 (Go's `net.Listen` with no host).
    All(u16),
    /// A literal address: `0.0.0.0:PORT`, `127.0.0.1:PORT`, `[::1]:PORT`, `[::]:PORT`.
    Ip(SocketAddr),
    /// A host name, resolved when bound; the first of its addresses that binds is used, as Go
    /// does (`localhost:PORT`).
    Host(String, u16),
}

impl fmt::Display for ListenAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ListenAddr::All(port) => write!(f, ":{port}"),
            ListenAddr::Ip(a) => write!(f, "{a}"),
            ListenAddr::Host(h, port) => write!(f, "{h}:{port}"),
        }
    }
}

/// The forms a listen address may take, told with each refusal.
const FORMS: &str = "expected :PORT, HOST:PORT or [IPv6]:PORT, such as :10150, \
                     127.0.0.1:10150 or [::1]:10150";

/// Why a listen address is refused; each names the address as written (`addr`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ListenAddrError {
    #[error("{addr:?}: an IPv6 address needs a port after it; {forms}", forms = FORMS)]
    Ipv6WithoutPort { addr: String },
    #[error("{addr:?}: {ip:?} is not an IPv6 address; {forms}", forms = FORMS)]
    NotIpv6 { addr: String, ip: String },
    #[error("{addr:?}: no port; {forms}", forms = FORMS)]
    NoPort { addr: String },
    #[error("{addr:?}: an IPv6 address must be in brackets; {forms}", forms = FORMS)]
    Ipv6WithoutBrackets { addr: String },
    #[error("{addr:?}: {host:?} is not a host name; {forms}", forms = FORMS)]
    NotHostName { addr: String, host: String },
    #[error("{addr:?}: {port:?} is not a port number (0 to 65535)")]
    NotPort { addr: String, port: String },
    #[error("{addr:?}: port {port} is out of range (0 to 65535)")]
    PortOutOfRange { addr: String, port: String },
}

/// Parses one listen address. The port is required (a bare host is refused), an IPv6 literal
/// must be bracketed (`::1:80` is ambiguous), and a host name is letters, digits, `-` and `.`.
pub(crate) fn parse(s: &str) -> Result<ListenAddr, ListenAddrError> {
    let addr = || s.to_string();
    let (host, port) = if let Some(rest) = s.strip_prefix('[') {
        let (v6, port) = rest
            .split_once("]:")
            .ok_or_else(|| ListenAddrError::Ipv6WithoutPort { addr: addr() })?;
        let ip: Ipv6Addr = v6.parse().map_err(|_| ListenAddrError::NotIpv6 {
            addr: addr(),
            ip: v6.to_string(),
        })?;
        let port = parse_port(s, port)?;
        return Ok(ListenAddr::Ip(SocketAddr::from((ip, port))));
    } else {
        s.rsplit_once(':')
            .ok_or_else(|| ListenAddrError::NoPort { addr: addr() })?
    };
    if host.contains(':') {
        return Err(ListenAddrError::Ipv6WithoutBrackets { addr: addr() });
    }
    let port = parse_port(s, port)?;
    if host.is_empty() {
        return Ok(ListenAddr::All(port));
    }
    if let Ok(ip) = host.parse::<Ipv4Addr>() {
        return Ok(ListenAddr::Ip(SocketAddr::from((ip, port))));
    }
    let name_ok = host.len() <= 253
        && host
            .split('.')
            .all(|l| !l.is_empty() && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'));
    if !name_ok {
        return Err(ListenAddrError::NotHostName {
            addr: addr(),
            host: host.to_string(),
        });
    }
    Ok(ListenAddr::Host(host.to_string(), port))
}

fn parse_port(s: &str, port: &str) -> Result<u16, ListenAddrError> {
    if port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ListenAddrError::NotPort {
            addr: s.to_string(),
            port: port.to_string(),
        });
    }
    port.parse().map_err(|_| ListenAddrError::PortOutOfRange {
        addr: s.to_string(),
        port: port.to_string(),
    })
}

/// Binds a listening socket for `addr` with the daemon's backlog. `:PORT` is one IPv6 socket
/// that takes IPv4 too (not left to `net.ipv6.bindv6only`), or an IPv4 one where the host has
/// no IPv6.
pub(crate) async fn bind(addr: &ListenAddr) -> io::Result<TcpListener> {
    match addr {
        ListenAddr::All(port) => {
            let any6 = SocketAddr::from((Ipv6Addr::UNSPECIFIED, *port));
            match bind_one(any6, Some(false)) {
                Err(e) if no_ipv6(&e) => {
                    bind_one(SocketAddr::from((Ipv4Addr::UNSPECIFIED, *port)), None)
                }
                r => r,
            }
        }
        ListenAddr::Ip(a) => bind_one(*a, None),
        ListenAddr::Host(host, port) => {
            let mut last = None;
            for a in tokio::net::lookup_host((host.as_str(), *port)).await? {
                match bind_one(a, None) {
                    Ok(l) => return Ok(l),
                    Err(e) => last = Some(e),
                }
            }
            Err(last.unwrap_or_else(|| {
                io::Error::new(io::ErrorKind::NotFound, format!("{host} has no address"))
            }))
        }
    }
}

fn no_ipv6(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EAFNOSUPPORT) | Some(libc::EADDRNOTAVAIL)
    )
}

fn bind_one(a: SocketAddr, v6_only: Option<bool>) -> io::Result<TcpListener> {
    let socket = if a.is_ipv6() {
        TcpSocket::new_v6()?
    } else {
        TcpSocket::new_v4()?
    };
    // As std, Go and every exporter do: a restart can bind while old connections linger.
    socket.set_reuseaddr(true)?;
    if let Some(only) = v6_only {
        set_v6_only(&socket, only)?;
    }
    socket.bind(a)?;
    socket.listen(LISTEN_BACKLOG)
}

fn set_v6_only(socket: &TcpSocket, only: bool) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let value = libc::c_int::from(only);
    // SAFETY: setsockopt reads `value` (a c_int, its size given) on a socket we own.
    let r = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::IPPROTO_IPV6,
            libc::IPV6_V6ONLY,
            (&raw const value).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exporter_toolkit_forms_parse_and_the_rest_is_refused_naming_the_value() {
        let ip = |s: &str| ListenAddr::Ip(s.parse().unwrap());
        let good = [
            (":10150", ListenAddr::All(10150)),
            ("0.0.0.0:10150", ip("0.0.0.0:10150")),
            ("127.0.0.1:0", ip("127.0.0.1:0")),
            ("[::1]:10150", ip("[::1]:10150")),
            ("[::]:9100", ip("[::]:9100")),
            (
                "localhost:10150",
                ListenAddr::Host("localhost".into(), 10150),
            ),
            (
                "db-7.example.org:1",
                ListenAddr::Host("db-7.example.org".into(), 1),
            ),
        ];
        for (s, want) in good {
            assert_eq!(parse(s), Ok(want.clone()), "{s}");
            assert_eq!(want.to_string(), s, "it prints as written");
        }
        let bad = [
            ("localhost", "no port"),
            ("", "no port"),
            (":", "not a port number"),
            (":65536", "out of range"),
            (":-1", "not a port number"),
            ("::1:10150", "must be in brackets"),
            ("[::1]", "needs a port"),
            ("[::1]:", "not a port number"),
            ("[1.2.3.4]:80", "not an IPv6 address"),
            ("a b:80", "not a host name"),
            ("host..x:80", "not a host name"),
            ("127.0.0.1:10150 ", "not a port number"),
        ];
        for (s, why) in bad {
            let e = parse(s).unwrap_err().to_string();
            assert!(e.contains(why) && e.contains(&format!("{s:?}")), "{s}: {e}");
        }
    }

    #[tokio::test]
    async fn all_addresses_takes_ipv4_and_ipv6_on_one_port() {
        let l = bind(&ListenAddr::All(0)).await.unwrap();
        let port = l.local_addr().unwrap().port();
        let v4 = tokio::net::TcpStream::connect(("127.0.0.1", port)).await;
        assert!(v4.is_ok(), "IPv4 on :{port}: {v4:?}");
        // A host without IPv6 (or without ::1 on its loopback) has nothing more to check.
        let v6_loopback = std::fs::read_to_string("/proc/net/if_inet6")
            .is_ok_and(|t| t.contains("00000000000000000000000000000001"));
        if l.local_addr().unwrap().is_ipv6() && v6_loopback {
            let v6 = tokio::net::TcpStream::connect(("::1", port)).await;
            assert!(v6.is_ok(), "IPv6 on :{port}: {v6:?}");
        }
    }
}
